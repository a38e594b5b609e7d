"""Soak test: does any process of a long training run keep growing?

Runs `train.py` for --warmup-seconds plus --minutes, samples the resident memory (VmRSS from
/proc/<pid>/status) of the trainer and of each of its child processes (workers, evaluator,
multiprocessing's resource tracker) when the warm-up ends and then every --sample-seconds, stops
the run with SIGINT, prints a table, and exits 1 if any process grew by more than
--max-growth-mib between the first and the last sample, if a process died on the way, or if the
trainer did not stop cleanly (exit code 130).

What it guards against: an autograd graph kept across rollouts, unbounded queues or lists, a
leak in the emulator, the TensorBoard writer or the checkpoint code. The warm-up lets the first
evaluation, the first checkpoints and the allocators' pools settle before the first sample.

    python -m benchmarks.soak --minutes 30                  # Pong, one worker per core + evaluator
    python -m benchmarks.soak --minutes 3 -- --env-id ALE/Breakout-v5 --num-processes 2

Arguments after `--` go to train.py (they override the defaults below). The run directory is a
temporary folder, deleted at the end, unless --runs-dir is given. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRAIN_ARGS = ["--env-id", "ALE/Pong-v5", "--num-processes", str(os.cpu_count() or 1), "--eval-interval", "30", "--eval-episodes", "2", "--checkpoint-interval", "30", "--log-interval", "30"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="measured time, after the warm-up")
    parser.add_argument("--warmup-seconds", type=float, default=90.0, help="time before the first sample")
    parser.add_argument("--sample-seconds", type=float, default=30.0, help="time between two samples")
    parser.add_argument("--max-growth-mib", type=float, default=50.0, help="fail if a process grew by more than this")
    parser.add_argument("--runs-dir", help="keep the run here instead of a deleted temporary folder")
    parser.add_argument("train_args", nargs="*", help="extra train.py arguments (after --)")
    return parser.parse_args(argv)


# --- /proc ------------------------------------------------------------------------------------
def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def label(pid: int, trainer_pid: int) -> str:
    if pid == trainer_pid:
        return "trainer"
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    if comm.startswith("a3c-"):  # workers and the evaluator name themselves (processes.py)
        return comm[len("a3c-"):]
    return "resource-tracker" if b"resource_tracker" in cmdline else comm


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def sample(trainer_pid: int) -> dict[int, tuple[str, float]]:
    """pid -> (label, RSS MiB) for the trainer and all its descendants alive now."""
    result = {}
    for pid in [trainer_pid, *descendants(trainer_pid)]:
        rss = rss_mib(pid)
        if rss is not None:
            result[pid] = (label(pid, trainer_pid), rss)
    return result


# --- the run ----------------------------------------------------------------------------------
def start_training(runs_dir: Path, train_args: list[str], log) -> subprocess.Popen:
    command = [sys.executable, str(REPO / "train.py"), *DEFAULT_TRAIN_ARGS, "--max-steps", str(10**12), "--runs-dir", str(runs_dir), *train_args]
    print("running:", " ".join(command[1:]), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Output to a file, not a pipe: a pipe nobody reads for 30 minutes could fill up and block it.
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def sleep_while_alive(process: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    return process.poll() is None


def watch(process: subprocess.Popen, args) -> tuple[dict, dict, dict]:
    """First sample, peaks, last sample (pid -> (label, MiB)). Empty first sample if it died early."""
    if not sleep_while_alive(process, args.warmup_seconds):
        return {}, {}, {}
    first = sample(process.pid)
    peak = dict(first)
    last = first
    end = time.monotonic() + args.minutes * 60
    while time.monotonic() < end:
        if not sleep_while_alive(process, min(args.sample_seconds, max(0.0, end - time.monotonic()))):
            break
        last = sample(process.pid)
        for pid, (name, rss) in last.items():
            if pid in peak and rss > peak[pid][1]:
                peak[pid] = (name, rss)
        total = sum(rss for _, rss in last.values())
        print(f"  {time.strftime('%H:%M:%S')}  {len(last)} processes, {total:,.0f} MiB in all", flush=True)
    return first, peak, last


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait()


def last_step(log_text: str) -> str:
    """The global step of the last progress line (`step X/Y ...`) or of the final message."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(("step ", "stopped at step ")):
            return line.split()[1 if line.startswith("step ") else 3].split("/")[0].rstrip(";")
    return "?"


def report(first: dict, peak: dict, last: dict, max_growth: float) -> list[str]:
    """Print the table; return the problems found."""
    problems = []
    print(f"\n{'process':<18}{'pid':>8}{'start MiB':>12}{'end MiB':>10}{'peak MiB':>10}{'growth MiB':>12}{'growth %':>10}")
    for pid, (name, start) in sorted(first.items(), key=lambda item: item[1][0]):
        if pid not in last:
            print(f"{name:<18}{pid:>8}{start:>12.1f}{'gone':>10}")
            problems.append(f"{name} (pid {pid}) died during the soak")
            continue
        end, growth = last[pid][1], last[pid][1] - start
        print(f"{name:<18}{pid:>8}{start:>12.1f}{end:>10.1f}{peak[pid][1]:>10.1f}{growth:>+12.1f}{100 * growth / start:>+9.1f}%")
        if growth > max_growth:
            problems.append(f"{name} (pid {pid}) grew by {growth:.1f} MiB > {max_growth:g} MiB")
    for pid, (name, rss) in sorted(last.items()):
        if pid not in first:
            print(f"{name:<18}{pid:>8}{'new':>12}{rss:>10.1f}")
    return problems


def main(argv=None) -> int:
    args = parse_args(argv)
    runs_dir = Path(args.runs_dir) if args.runs_dir else Path(tempfile.mkdtemp(prefix="a3c-soak-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    log_path = runs_dir / "soak-train.log"
    started = time.monotonic()
    try:
        with open(log_path, "w") as log:
            process = start_training(runs_dir, args.train_args, log)
            try:
                first, peak, last = watch(process, args)
            finally:
                code = stop(process)
        output = log_path.read_text()
    finally:
        if not args.runs_dir:
            shutil.rmtree(runs_dir, ignore_errors=True)
    if not first:
        print(f"the training run ended during the warm-up (exit code {code}):\n{output[-3000:]}", file=sys.stderr)
        return 1
    minutes = (time.monotonic() - started - args.warmup_seconds) / 60
    print(f"\nsoak: {minutes:.1f} min measured after a {args.warmup_seconds:g} s warm-up, {last_step(output)} agent steps in all; RSS = VmRSS")
    problems = report(first, peak, last, args.max_growth_mib)
    if code != 130:
        problems.append(f"train.py exited with {code}, not 130 (a clean stop after SIGINT):\n{output[-3000:]}")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print(f"PASS: no process grew by more than {args.max_growth_mib:g} MiB")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
