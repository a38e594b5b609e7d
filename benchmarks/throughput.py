"""Throughput of A3C training against the emulator's own speed, on this machine, in one run.

What it measures
----------------
(a) Emulator ceiling. The training env stack the workers play (`make_env(EnvSettings(env_id), train=True)`,
    the lean one on the bare ALE: sticky actions, frame-skip 4 with the max of the last two frames,
    --screen-size grayscale (default: train.py's, 84x84), episode statistics, life-loss terminals,
    FIRE at a game's start, reward clipping) driven by a random policy in one process:
    agent steps/s on one core. Then the same in N processes at once (N = --max-processes), which
    gives the per-core speed when every core is busy (shared caches, memory bandwidth, turbo).
    Each process warms up for --emulator-warmup seconds, then counts steps for --emulator-seconds.

(b) Training throughput with 1, 2, ..., --max-processes worker processes, measured on the real
    trainer: `train.py --no-evaluator --num-processes N --log-interval 1 --max-steps <huge>` runs
    as a subprocess. With stdout not a terminal, the trainer prints a line
    `step X/Y  S steps/s ...` about once a second, where X is the global step counter (the
    mp.Value every worker adds its steps to). This script timestamps each line as it arrives and
    reads X from it. Once the counter has started to move (all workers spawned, imports done),
    it waits --warmup more seconds (the first optimizer.step in a spawned worker is about 1 s
    slower, and the first updates are not steady), then measures for --seconds and stops the
    trainer with SIGINT (it exits 130 after writing its final checkpoint into a temporary
    --runs-dir, which is deleted afterwards).

    Training SPS = least-squares slope of the global step counter against time over the lines
    inside the measurement window: the trainer's own counter, insensitive to start-up, shutdown,
    a late line or the counter's granularity, read from stdout alone (the per-line 1-s `steps/s`
    is noisier; the checkpoint's global_step/wall_time includes start-up and shutdown).

Because the machine may be shared (other people's tests), the script also reads /proc to report
how much CPU the workers actually got during the window ("worker cores": N means each worker had
a full core) and how many cores everything else on the machine used ("other load"). "steps per
worker CPU-s" = training SPS / worker cores is the per-core training speed with that contention
mostly factored out; compare it with the emulator's steps per CPU-second.

(c) The limit (benchmarks/limit.py): for each model and K the setups train with, in a spawned
    process with one thread, the bare ALE work of an agent step (t_ale: 4 `act` calls, the max
    of the last two screens, the resize) and the real network's work (t_net: the acting forward
    at batch K, plus the update per agent step), for --limit-seconds each after
    --limit-warmup. One core can train at most 1 / (t_ale + t_net) steps/s; "of limit" =
    SPS / (min(N, CPUs) / (t_ale + t_net)). The report warns when that process got less than
    0.9 of a core: the fractions are then too high.

(d) The classic worker pattern (benchmarks/classic_pattern.py: forward with autograd at every
    acting step, batch 1, one backward per rollout, the universe trunk by default), one process,
    steps counted for --seconds after --warmup: the baseline of the "x classic" column.

Each training run is one setup (--setups) with 1..N workers: `default`, train.py as a user runs
it (no --model, no --envs-per-process: its default model, and the K it resolves for N workers,
checked against the trainer's own start line), or `MODEL:ENVS`, its --model and
--envs-per-process.
With --repeat R, each setup's 1..N runs are measured R times, interleaved (1, 2, 1, 2, ...): the
table shows medians, and a repeat's efficiency divides its N-worker run by the 1-worker run
just before it, so that a shared machine's slow drift cancels out; every run is listed below it.

The training table's columns are explained in docs/benchmarks.md ("The table's columns").

Run
---
    .venv/bin/python -m benchmarks.throughput                       # Pong, default and universe:1 x 1..cpu_count workers, 30 s each
    .venv/bin/python -m benchmarks.throughput --setups default universe:1 a3c:4 --max-processes 1
    .venv/bin/python -m benchmarks.throughput --seconds 15 --max-processes 2 --json /tmp/tp.json
    .venv/bin/python -m benchmarks.throughput --env-id ALE/Breakout-v5 --no-emulator-parallel
    .venv/bin/python -m benchmarks.throughput --screen-size 42 --max-processes 2   # the smaller input
    .venv/bin/python -m benchmarks.throughput --setups a3c:4 --max-processes 2 --repeat 5 --no-classic   # scaling, 5 times

The numbers are only comparable between runs on an otherwise idle machine; look at "other load".
"""

from __future__ import annotations

import os

# Before anything can import torch (the trainer subprocess inherits this too).
os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

from a3c_torch.config import MODELS, Config, HelpFormatter  # noqa: E402
from benchmarks.limit import in_spawned_process, measure_in_child  # noqa: E402
from benchmarks.proc_cpu import children, cpu_snapshot, is_spawned_worker  # noqa: E402
from benchmarks.throughput_report import DEFAULT, TODAY, check_setup, print_report, resolve_setup, row_fraction, setup_name  # noqa: E402

STEP_LINE = re.compile(r"^step ([\d,]+)/")
# The trainer's start line: "training ALE/Pong-v5 (model a3c-centred) with 2 worker processes x 4 envs ..."
# (no model for vector observations, no "x K envs" for K = 1).
START_LINE = re.compile(r"^training \S+(?: \(model ([\w-]+)\))? with \d+ worker process(?:es)?(?: x (\d+) envs)?")


# --------------------------------------------------------------------------- emulator
def emulator_run(env_id: str, screen_size: int, seconds: float, warmup: float, seed: int) -> dict:
    """Random policy on the training env stack; steps counted after `warmup` seconds."""
    from a3c_torch.envs import EnvSettings, make_env

    env = make_env(EnvSettings(env_id, screen_size=screen_size), seed=seed, train=True)
    env.reset(seed=seed)

    def fifty_steps() -> int:  # the clock is read every 50 steps, not every step
        for _ in range(50):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        return 50

    result = timed_steps(fifty_steps, seconds, warmup)
    env.close()
    return result


def timed_steps(play_some, seconds: float, warmup: float) -> dict:
    """Call `play_some()` (it returns the agent steps it played) for `warmup` s, then count for `seconds`."""

    def play(duration: float) -> int:
        steps, end = 0, time.perf_counter() + duration
        while time.perf_counter() < end:
            steps += play_some()
        return steps

    play(warmup)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    steps = play(seconds)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"steps": steps, "wall_s": wall, "cpu_s": cpu, "sps": steps / wall, "steps_per_cpu_s": steps / cpu}


def emulator_parallel(env_id: str, screen_size: int, processes: int, seconds: float, warmup: float) -> list[dict]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes) as pool:
        return pool.starmap(emulator_run, [(env_id, screen_size, seconds, warmup, 100 + i) for i in range(processes)])


def classic_run(env_id: str, screen_size: int, model: str, seconds: float, warmup: float, seed: int) -> dict:
    """The classic worker pattern (benchmarks/classic_pattern.py), 1 process: steps counted after `warmup` s."""
    import torch

    from a3c_torch.envs import EnvSettings, make_env
    from a3c_torch.model import ActorCritic
    from a3c_torch.optim import make_optimizer
    from benchmarks.classic_pattern import ClassicWorker

    torch.set_num_threads(1)
    cfg = Config(env_id=env_id, screen_size=screen_size, model=model, envs_per_process=1)
    env = make_env(EnvSettings.from_config(cfg), seed=seed, train=True)
    shared = ActorCritic(env.observation_space.shape, int(env.action_space.n), cfg.hidden_size, cfg.model)
    shared.share_memory()
    worker = ClassicWorker(env, ActorCritic.like(shared), shared, make_optimizer(cfg.optimizer, shared.parameters(), cfg.learning_rate), seed)

    def one_rollout() -> int:
        worker.update(cfg)
        return cfg.num_steps

    result = timed_steps(one_rollout, seconds, warmup)
    env.close()
    return {"model": model, **result}


# --------------------------------------------------------------------------- training
def slope(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of step against time."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_s = sum(s for _, s in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (s - mean_s) for t, s in points) / var


def measure_training(processes: int, setup: str, args) -> dict:
    model, envs = resolve_setup(setup, processes)
    runs_dir = tempfile.mkdtemp(prefix="a3c-throughput-")
    chosen = [] if setup == DEFAULT else ["--model", model, "--envs-per-process", str(envs)]  # default: train.py's own
    cmd = [
        sys.executable, str(ROOT / "train.py"),
        "--env-id", args.env_id, "--screen-size", str(args.screen_size), "--no-evaluator", "--num-processes", str(processes),
        *chosen,
        "--max-steps", str(10**12), "--runs-dir", runs_dir, "--exp-name", "throughput",
        "--log-interval", "1", "--checkpoint-interval", "86400", "--seed", str(args.seed),
    ]  # fmt: skip
    started: list[tuple[str, int]] = []  # the (model, K) the trainer says it trains
    samples: list[tuple[float, int]] = []
    tail: list[str] = []
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env={**os.environ, "OMP_NUM_THREADS": "1"})

    def read_lines():
        for line in proc.stdout:
            now = time.monotonic()
            match = STEP_LINE.match(line)
            if match:
                samples.append((now, int(match.group(1).replace(",", ""))))
            start = START_LINE.match(line)
            if start:
                started.append((start.group(1) or model, int(start.group(2) or 1)))
            tail.append(line.rstrip())
            del tail[:-20]

    reader = threading.Thread(target=read_lines, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + args.startup_timeout
        while not any(step > 0 for _, step in samples):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"train.py with {processes} workers never started stepping (exit code {proc.poll()}):\n" + "\n".join(tail))
            time.sleep(0.1)
        time.sleep(args.warmup)
        workers = [p for p in children(proc.pid) if is_spawned_worker(p)]
        before = cpu_snapshot(proc.pid, workers)
        time.sleep(args.seconds)
        after = cpu_snapshot(proc.pid, workers)
        if proc.poll() is not None:
            raise RuntimeError(f"train.py with {processes} workers exited early (exit code {proc.returncode}):\n" + "\n".join(tail))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        reader.join(timeout=5)
        shutil.rmtree(runs_dir, ignore_errors=True)

    if started != [(model, envs)]:
        raise RuntimeError(f"{setup} with {processes} workers should train {model}:{envs}, but train.py said {started or 'nothing'} (its start line: 'training ... (model M) with N worker processes x K envs')")
    window = [(t, s) for t, s in samples if before["wall"] <= t <= after["wall"]]
    if len(window) < 3:
        raise RuntimeError(f"only {len(window)} progress lines inside the {args.seconds:.0f} s window; use a longer --seconds")
    wall = after["wall"] - before["wall"]
    sps = slope(window)
    worker_cores = (after["workers"] - before["workers"]) / wall
    ours = (after["workers"] - before["workers"]) + (after["trainer"] - before["trainer"]) + (after["self"] - before["self"])
    other = (after["machine"] - before["machine"] - ours) / wall
    return {
        "processes": processes,
        "setup": setup,
        "model": model,
        "envs_per_process": envs,
        "sps": sps,
        "sps_endpoints": (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]),
        "points": len(window),
        "window_s": wall,
        "worker_pids_found": len(workers),
        "worker_cores": worker_cores,
        "trainer_main_cores": (after["trainer"] - before["trainer"]) / wall,
        "other_load_cores": max(0.0, other),
        "steps_per_worker_cpu_s": sps / worker_cores if worker_cores > 0 else float("nan"),
        "exit_code": code,
    }


def parse_setup(text: str) -> str:
    try:
        return check_setup(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def measure_limits(args) -> list[dict]:
    """The limit (benchmarks/limit.py) for every model and K the setups train with, each in a
    spawned process of its own."""
    pairs = dict.fromkeys(resolve_setup(setup, n) for setup in args.setups for n in range(1, args.max_processes + 1))
    limits = []
    for model, envs in pairs:
        print(f"the limit for {model}:{envs} (bare ALE + network), 1 process: warm-up {args.limit_warmup:.0f} s + {args.limit_seconds:.0f} s of each ...", flush=True)
        lim = measure_in_child(args.env_id, args.screen_size, model, envs, args.limit_seconds, args.limit_warmup, args.seed)
        print(f"  t_ale {lim['t_ale_us']:.0f} us + t_net {lim['t_net_us']:.0f} us per agent step: {lim['limit_sps_per_core']:.0f} steps/s per core, CPU share {lim['cpu_share']:.2f}", flush=True)
        limits.append(lim)
    return limits


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m benchmarks.throughput", formatter_class=HelpFormatter)
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--screen-size", type=int, default=Config.screen_size, help="Atari frame size, for the emulator and the trainer (train.py's default)")
    parser.add_argument("--setups", type=parse_setup, nargs="+", default=[DEFAULT, TODAY], metavar="SETUP", help=f"what to train: {DEFAULT} (train.py's own model and the envs per worker it resolves for N workers) or MODEL:ENVS (train.py --model and --envs-per-process)")
    parser.add_argument("--max-processes", type=positive_int, default=os.cpu_count() or 1, help="measure training with 1..MAX_PROCESSES workers")
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window per training run")
    parser.add_argument("--repeat", type=positive_int, default=1, help="measure each setup's 1..MAX_PROCESSES runs this many times, interleaved; the table shows medians")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds skipped after the step counter starts moving")
    parser.add_argument("--emulator-seconds", type=float, default=10.0)
    parser.add_argument("--emulator-warmup", type=float, default=2.0)
    parser.add_argument("--no-emulator-parallel", dest="emulator_parallel", action="store_false", help="skip the MAX_PROCESSES-parallel emulator run")
    parser.add_argument("--no-classic", dest="classic", action="store_false", help="skip the classic-pattern baseline")
    parser.add_argument("--classic-model", choices=MODELS, default=resolve_setup(TODAY, 1)[0], help="the trunk of the classic-pattern baseline")
    parser.add_argument("--limit-seconds", type=float, default=6.0, help="seconds of each of the limit's two costs (bare ALE, network), per model and K")
    parser.add_argument("--limit-warmup", type=float, default=2.0, help="seconds of each of the limit's costs before timing")
    parser.add_argument("--startup-timeout", type=float, default=180.0, help="give up if a trainer has not stepped after this long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    return parser


def main() -> int:
    args = build_parser().parse_args()

    result = {
        "env_id": args.env_id,
        "settings": vars(args),
        "machine": {"cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(), "python": platform.python_version(), "loadavg_start": os.getloadavg()},
        "emulator": {},
        "training": [],
    }
    print(f"emulator alone, 1 process, {args.emulator_seconds:.0f} s ...", flush=True)
    result["emulator"]["single"] = emulator_run(args.env_id, args.screen_size, args.emulator_seconds, args.emulator_warmup, seed=100)
    if args.emulator_parallel and args.max_processes > 1:
        print(f"emulator alone, {args.max_processes} processes at once, {args.emulator_seconds:.0f} s ...", flush=True)
        result["emulator"]["parallel"] = emulator_parallel(args.env_id, args.screen_size, args.max_processes, args.emulator_seconds, args.emulator_warmup)
    if args.classic:
        print(f"classic pattern, model {args.classic_model}, 1 process: warm-up {args.warmup:.0f} s + {args.seconds:.0f} s ...", flush=True)
        result["classic"] = in_spawned_process(classic_run, args.env_id, args.screen_size, args.classic_model, args.seconds, args.warmup, args.seed)
        print(f"  {result['classic']['sps']:.0f} steps/s", flush=True)
    from a3c_torch.envs import lean_stack_fits

    result["limit"] = measure_limits(args) if lean_stack_fits(args.env_id) else []  # the bare ALE needs an Atari screen game
    for setup in args.setups:
        for repeat, n in ((r, n) for r in range(args.repeat) for n in range(1, args.max_processes + 1)):  # 1, 2, .., 1, 2, ..
            again = f" (repeat {repeat + 1}/{args.repeat})" if args.repeat > 1 else ""
            print(f"training {setup_name(setup, n)} with {n} worker process{'es' if n > 1 else ''}{again}: warm-up {args.warmup:.0f} s + {args.seconds:.0f} s ...", flush=True)
            row = {**measure_training(n, setup, args), "repeat": repeat}
            row["fraction_of_limit"] = row_fraction(result, row)
            result["training"].append(row)
            of_limit = f", {row['fraction_of_limit']:.2f} of the limit" if row["fraction_of_limit"] is not None else ""
            print(f"  {row['sps']:.0f} steps/s (endpoints {row['sps_endpoints']:.0f}, {row['points']} points){of_limit}, worker cores {row['worker_cores']:.2f}, other load {row['other_load_cores']:.2f}", flush=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
