"""The tables of benchmarks/throughput.py: its raw runs summarised (medians over --repeat), the
ratios side by side, the fraction of the limit (benchmarks/limit.py), and a one-line verdict for
train.py's default setup.
"""

from __future__ import annotations

from statistics import median

from a3c_torch.config import MODELS, Config
from benchmarks.limit import MIN_CPU_SHARE, fraction_of_limit, starved

# A setup is "MODEL:ENVS" (train.py's --model and --envs-per-process) or DEFAULT.
DEFAULT = "default"  # train.py's own default: its --model, and the --envs-per-process it resolves for N workers
TODAY = "universe:1"  # the worker before --model and --envs-per-process: the reference for ratios


def check_setup(text: str) -> str:
    """`text` as a setup name, or ValueError."""
    model, _, envs = text.partition(":")
    if text != DEFAULT and (model not in MODELS or not envs.isdigit() or int(envs) < 1):
        raise ValueError(f"setup must be {DEFAULT} or MODEL:ENVS (e.g. a3c:4), got {text!r}")
    return text if text == DEFAULT else f"{model}:{int(envs)}"


def resolve_setup(setup: str, processes: int) -> tuple[str, int]:
    """(--model, --envs-per-process) of `setup` with `processes` workers; for DEFAULT, what
    train.py resolves when neither flag is given."""
    if setup == DEFAULT:
        cfg = Config(num_processes=processes)
        return cfg.model, cfg.envs_per_process
    model, _, envs = setup.partition(":")
    return model, int(envs)


def is_default(model: str, envs: int, processes: int) -> bool:
    return (model, envs) == resolve_setup(DEFAULT, processes)


def setup_name(setup: str, processes: int) -> str:
    """What the tables call a setup with `processes` workers: "default (a3c-centred:4)", "a3c:4 *"
    (* = the same as train.py's default with that many workers) or "a3c:8"."""
    model, envs = resolve_setup(setup, processes)
    if setup == DEFAULT:
        return f"{DEFAULT} ({model}:{envs})"
    return setup + (" *" if is_default(model, envs, processes) else "")


def setup_of(run: dict) -> str:
    """A run's setup (runs written before setups had names: their MODEL:ENVS)."""
    return run.get("setup") or f"{run['model']}:{run['envs_per_process']}"


def limit_for(result: dict, model: str, envs: int) -> dict | None:
    """The limit measured for `model` at `envs` envs per worker, if any."""
    return next((lim for lim in result.get("limit", []) if (lim["model"], lim["envs_per_process"]) == (model, envs)), None)


def row_fraction(result: dict, row: dict) -> float | None:
    """The fraction of the limit a run or summary row reached (None: no limit measured for it)."""
    lim = limit_for(result, row["model"], row["envs_per_process"])
    if lim is None:
        return None
    return fraction_of_limit(row["sps"], row["processes"], result["machine"]["cpu_count"], lim["t_ale_us"], lim["t_net_us"])


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (setup, N): the median over repeats, and the efficiency of each repeat.

    A repeat's efficiency divides its N-worker run by the 1-worker run of the same repeat, which
    was measured just before it: the slow drift of a shared machine's speed cancels out of the
    ratio, which a median of each column apart would not do.
    """
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((setup_of(run), run["processes"]), []).append(run)
    rows = []
    for (setup, n), group in groups.items():
        singles = {run.get("repeat", 0): run["sps"] for run in groups.get((setup, 1), [])}
        efficiencies = [run["sps"] / (n * singles[run.get("repeat", 0)]) for run in group if run.get("repeat", 0) in singles]
        rows.append({
            "setup": setup, "model": group[0]["model"], "envs_per_process": group[0]["envs_per_process"], "processes": n, "runs": len(group),
            "sps": median(run["sps"] for run in group),
            "sps_each": [run["sps"] for run in group],
            "efficiency": median(efficiencies) if efficiencies else None,
            "efficiency_each": efficiencies,
            **{key: median(run[key] for run in group) for key in ("worker_cores", "other_load_cores", "steps_per_worker_cpu_s")},
        })  # fmt: skip
    return rows


def print_report(result: dict) -> None:
    emu = result["emulator"]
    single = emu["single"]
    print(f"\n{result['env_id']}, {result['settings']['screen_size']}x{result['settings']['screen_size']}  ({result['machine']['cpu_count']} CPUs, {result['machine']['processor']}, python {result['machine']['python']})")
    print(f"load average at start: {result['machine']['loadavg_start']}, at end: {result['machine']['loadavg_end']}")
    print("\nEmulator + training preprocessing, random policy (agent steps/s; frames/s = 4x):")
    print(f"  1 process : {single['sps']:8.0f} steps/s  ({1e6 / single['sps']:.0f} us/step), {single['steps_per_cpu_s']:.0f} steps per CPU-s, CPU share {single['cpu_s'] / single['wall_s']:.2f}")
    if emu.get("parallel"):
        par = emu["parallel"]
        per = [r["sps"] for r in par]
        cpu = sum(r["steps"] for r in par) / sum(r["cpu_s"] for r in par)
        print(f"  {len(par)} processes: {sum(per):8.0f} steps/s in all, {sum(per) / len(per):.0f} per process (per core under load), {cpu:.0f} steps per CPU-s")
    classic = result.get("classic")
    if classic:
        print(f"\nClassic worker pattern (benchmarks/classic_pattern.py: autograd while acting, batch 1, model {classic['model']}), 1 process:")
        print(f"  {classic['sps']:8.0f} steps/s, {classic['steps_per_cpu_s']:.0f} steps per CPU-s")
    print_limits(result.get("limit", []))
    repeats = result["settings"].get("repeat", 1)
    rows = summarise(result["training"])
    over = f", the median of {repeats} interleaved runs" if repeats > 1 else ""
    print(f"\nTraining (train.py --no-evaluator), global steps/s over the measurement window{over}; setup = --model:--envs-per-process,")
    print(f"{DEFAULT} = train.py's own (its K depends on N), * = the same as the default with that N:")
    width = max([13] + [len(setup_name(r["setup"], r["processes"])) for r in rows])
    header = f"{'setup':>{width}} {'N':>3} {'SPS':>7} {'SPS/proc':>9} {'train/emu':>10} {'of limit':>9} {'efficiency':>11} {'x classic':>10} {'x universe:1':>13} {'worker cores':>13} {'other load':>11} {'steps/CPU-s':>12}"
    print(header)
    print("-" * len(header))
    by_key = {(r["setup"], r["processes"]): r for r in rows}
    for row in rows:
        n, sps = row["processes"], row["sps"]
        per_proc = sps / n
        today = by_key.get((TODAY, n))
        fraction = row_fraction(result, row)
        of_limit = f"{fraction:9.2f}" if fraction is not None else f"{'-':>9}"
        eff = f"{row['efficiency']:11.2f}" if row["efficiency"] is not None else f"{'-':>11}"
        vs_classic = f"{per_proc / classic['sps']:10.2f}" if classic else f"{'-':>10}"
        vs_today = f"{per_proc / (today['sps'] / n):13.2f}" if today else f"{'-':>13}"
        print(f"{setup_name(row['setup'], n):>{width}} {n:3d} {sps:7.0f} {per_proc:9.0f} {per_proc / single['sps']:10.2f} {of_limit} {eff} {vs_classic} {vs_today} {row['worker_cores']:13.2f} {row['other_load_cores']:11.2f} {row['steps_per_worker_cpu_s']:12.0f}")
    print("\ntrain/emu = (SPS/N) / single-process emulator steps/s; of limit = SPS / (min(N, CPUs) / (t_ale + t_net)) with the")
    print("limit of the row's model and K; efficiency = SPS(N) / (N * SPS(1)) of the same setup (and the same repeat);")
    print("x classic = (SPS/N) / the classic pattern's steps/s; x universe:1 = (SPS/N) / that of universe:1 (the worker")
    print("before --model and --envs-per-process) with the same N; worker cores = CPU the workers got (ideal N); other load")
    print("= busy cores used by anything else; steps/CPU-s = SPS / worker cores.")
    if repeats > 1:
        print("\nEach run, in the order measured within its setup:")
        for row in rows:
            each = " ".join(f"{sps:.0f}" for sps in row["sps_each"])
            effs = " ".join(f"{e:.2f}" for e in row["efficiency_each"]) if row["processes"] > 1 else ""
            print(f"  {setup_name(row['setup'], row['processes']):>{width}} N={row['processes']}: steps/s {each}" + (f"; efficiency {effs}" if effs else ""))
    print_verdict(result, rows)


def print_limits(limits: list[dict]) -> None:
    """The limit's two costs per model and K, and a warning where their process was starved."""
    if not limits:
        return
    print("\nThe limit (benchmarks/limit.py): bare ALE work (t_ale) + the real network's work (t_net = acting forward +")
    print("the update per agent step) at K envs per worker, one spawned process, one thread; us per agent step:")
    for lim in limits:
        print(f"  {lim['model']}:{lim['envs_per_process']:<3} t_ale {lim['t_ale_us']:6.0f}  t_net {lim['t_net_us']:6.0f} (acting {lim['t_act_us']:.0f} + update {lim['t_update_us']:.0f})"
              f"  -> {lim['limit_sps_per_core']:6.0f} steps/s per core; CPU share {lim['cpu_share']:.2f}")
    hungry = [lim for lim in limits if starved(lim)]
    if hungry:
        shares = ", ".join(f"{lim['model']}:{lim['envs_per_process']} {lim['cpu_share']:.2f}" for lim in hungry)
        print(f"WARNING: the limit's measuring process got less than {MIN_CPU_SHARE} of a core ({shares}): its costs are inflated,")
        print("the limit is too low and the fractions of the limit are too high. Measure again on an idle machine.")


def print_verdict(result: dict, rows: list[dict]) -> None:
    """One answer to "does this machine train as fast as it should?": train.py's default setup
    with the largest N measured (else the last row)."""
    if not rows:
        return
    default = [r for r in rows if r["setup"] == DEFAULT] or [r for r in rows if is_default(r["model"], r["envs_per_process"], r["processes"])]
    last = max(default, key=lambda r: r["processes"]) if default else rows[-1]
    n, sps = last["processes"], last["sps"]
    line = f"\nWith {n} worker{'s' if n > 1 else ''} ({setup_name(last['setup'], n)}): {sps:,.0f} steps/s ({4 * sps:,.0f} Atari frames/s)"
    if last["efficiency"] is not None and n > 1:
        line += f", scaling efficiency {last['efficiency']:.2f} (1.00: N workers train N times as fast as one)"
    fraction = row_fraction(result, last)
    if fraction is not None:
        line += f", {fraction:.2f} of the limit (bare ALE + network on {min(n, result['machine']['cpu_count'])} core{'s' if min(n, result['machine']['cpu_count']) > 1 else ''})"
    print(line + ".")
    if last["worker_cores"] < 0.9 * n or last["other_load_cores"] > 0.5:
        print(f"The workers got {last['worker_cores']:.2f} of {n} core{'s' if n > 1 else ''} and other processes used {last['other_load_cores']:.2f}: "
              "the machine was not idle, so these numbers are lower than it can do; measure again on an idle machine.")
    lim = limit_for(result, last["model"], last["envs_per_process"])
    if lim is not None and starved(lim):
        print(f"The limit was measured with {lim['cpu_share']:.2f} of a core: the fraction of the limit is too high.")
    print("For comparison, see results/speed/README.md for what this project's 2-core machine measured.")
