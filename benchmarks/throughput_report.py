"""The tables of benchmarks/throughput.py: its raw runs summarised (medians over --repeat), the
ratios side by side, and a one-line verdict for the default setup.
"""

from __future__ import annotations

from statistics import median

from a3c_torch.config import Config

TODAY = ("universe", 1)  # the worker before --model and --envs-per-process: the reference for ratios


def setup_name(model: str, envs: int) -> str:
    default = (model, envs) == (Config.model, Config.envs_per_process)
    return f"{model}:{envs}" + (" *" if default else "")


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (setup, N): the median over repeats, and the efficiency of each repeat.

    A repeat's efficiency divides its N-worker run by the 1-worker run of the same repeat, which
    was measured just before it: the slow drift of a shared machine's speed cancels out of the
    ratio, which a median of each column apart would not do.
    """
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["model"], run["envs_per_process"], run["processes"]), []).append(run)
    rows = []
    for (model, envs, n), group in groups.items():
        singles = {run.get("repeat", 0): run["sps"] for run in groups.get((model, envs, 1), [])}
        efficiencies = [run["sps"] / (n * singles[run.get("repeat", 0)]) for run in group if run.get("repeat", 0) in singles]
        rows.append({
            "model": model, "envs_per_process": envs, "processes": n, "runs": len(group),
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
    repeats = result["settings"].get("repeat", 1)
    rows = summarise(result["training"])
    over = f", the median of {repeats} interleaved runs" if repeats > 1 else ""
    print(f"\nTraining (train.py --no-evaluator), global steps/s over the measurement window{over}; setup = --model:--envs-per-process, * = the default:")
    header = f"{'setup':>13} {'N':>3} {'SPS':>7} {'SPS/proc':>9} {'train/emu':>10} {'efficiency':>11} {'x classic':>10} {'x universe:1':>13} {'worker cores':>13} {'other load':>11} {'steps/CPU-s':>12}"
    print(header)
    print("-" * len(header))
    by_key = {(r["model"], r["envs_per_process"], r["processes"]): r for r in rows}
    for row in rows:
        model, envs, n, sps = row["model"], row["envs_per_process"], row["processes"], row["sps"]
        per_proc = sps / n
        today = by_key.get((*TODAY, n))
        eff = f"{row['efficiency']:11.2f}" if row["efficiency"] is not None else f"{'-':>11}"
        vs_classic = f"{per_proc / classic['sps']:10.2f}" if classic else f"{'-':>10}"
        vs_today = f"{per_proc / (today['sps'] / n):13.2f}" if today else f"{'-':>13}"
        print(f"{setup_name(model, envs):>13} {n:3d} {sps:7.0f} {per_proc:9.0f} {per_proc / single['sps']:10.2f} {eff} {vs_classic} {vs_today} {row['worker_cores']:13.2f} {row['other_load_cores']:11.2f} {row['steps_per_worker_cpu_s']:12.0f}")
    print("\ntrain/emu = (SPS/N) / single-process emulator steps/s; efficiency = SPS(N) / (N * SPS(1)) of the same setup")
    print("(and the same repeat); x classic = (SPS/N) / the classic pattern's steps/s; x universe:1 = (SPS/N) / that of")
    print("universe:1 (the worker before --model and --envs-per-process) with the same N; worker cores = CPU the workers")
    print("got (ideal N); other load = busy cores used by anything else; steps/CPU-s = SPS / worker cores.")
    if repeats > 1:
        print("\nEach run, in the order measured within its setup:")
        for row in rows:
            each = " ".join(f"{sps:.0f}" for sps in row["sps_each"])
            effs = " ".join(f"{e:.2f}" for e in row["efficiency_each"]) if row["processes"] > 1 else ""
            print(f"  {setup_name(row['model'], row['envs_per_process']):>13} N={row['processes']}: steps/s {each}" + (f"; efficiency {effs}" if effs else ""))
    print_verdict(rows)


def print_verdict(rows: list[dict]) -> None:
    """One answer to "does this machine train as fast as it should?": the default setup with the
    largest N measured (else the last row)."""
    if not rows:
        return
    default = [r for r in rows if (r["model"], r["envs_per_process"]) == (Config.model, Config.envs_per_process)]
    last = (default or rows)[-1]
    n, sps = last["processes"], last["sps"]
    line = f"\nWith {n} worker{'s' if n > 1 else ''} ({setup_name(last['model'], last['envs_per_process'])}): {sps:,.0f} steps/s ({4 * sps:,.0f} Atari frames/s)"
    if last["efficiency"] is not None and n > 1:
        line += f", scaling efficiency {last['efficiency']:.2f} (1.00: N workers train N times as fast as one)"
    print(line + ".")
    if last["worker_cores"] < 0.9 * n or last["other_load_cores"] > 0.5:
        print(f"The workers got {last['worker_cores']:.2f} of {n} core{'s' if n > 1 else ''} and other processes used {last['other_load_cores']:.2f}: "
              "the machine was not idle, so these numbers are lower than it can do; measure again on an idle machine.")
    print("For comparison, see results/speed/README.md for what this project's 2-core machine measured.")
