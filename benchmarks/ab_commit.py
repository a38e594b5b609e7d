"""A/B of train.py's speed: an older commit's defaults against this tree's, at the same time.

    python -m benchmarks.ab_commit [--commit f4202bc] [--env-id ALE/Pong-v5] [--repeat 3] [--seconds 40]

Both trainers run at once, one worker each, each pinned to its own core (taskset), so that the
machine's speed on the day, which moves by 4x between days here, cancels out of their ratio; the
cores are swapped between repeats so that a faster core favours neither. The older commit is
checked out into a temporary git worktree and run with this interpreter. Each side's steps/s is
the least-squares slope of its global step counter over the measurement window (as
benchmarks/throughput.py measures it). Only meaningful on an otherwise idle machine with at least
two cores: run it under benchmarks/run_idle.sh on a shared one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.throughput import STEP_LINE, slope

ROOT = Path(__file__).resolve().parent.parent
# The commit the issue measures against: the default train.py before the lean stack (2026-12-05).
BASELINE = "f4202bc"


def start_trainer(tree: Path, core: int, env_id: str, runs_dir: str) -> tuple[subprocess.Popen, list]:
    """train.py of `tree` at its defaults, 1 worker, pinned to `core`; returns it and its (time, step) samples."""
    cmd = ["taskset", "-c", str(core), sys.executable, str(tree / "train.py"), "--env-id", env_id, "--num-processes", "1",
           "--no-evaluator", "--max-steps", str(10**12), "--runs-dir", runs_dir, "--log-interval", "1",
           "--checkpoint-interval", "86400"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(tree)})  # fmt: skip
    samples: list[tuple[float, int]] = []

    def read():
        for line in proc.stdout:
            match = STEP_LINE.match(line)
            if match:
                samples.append((time.monotonic(), int(match.group(1).replace(",", ""))))

    threading.Thread(target=read, daemon=True).start()
    return proc, samples


def measure_pair(trees: dict[str, Path], cores: dict[str, int], env_id: str, warmup: float, seconds: float) -> dict[str, float]:
    runs_dir = tempfile.mkdtemp(prefix="a3c-ab-")
    started = {name: start_trainer(tree, cores[name], env_id, os.path.join(runs_dir, name)) for name, tree in trees.items()}
    try:
        deadline = time.monotonic() + 300
        while not all(any(step > 0 for _, step in samples) for _, samples in started.values()):
            if time.monotonic() > deadline or any(proc.poll() is not None for proc, _ in started.values()):
                raise RuntimeError("a trainer did not start stepping: " + ", ".join(f"{n} exit {p.poll()}" for n, (p, _) in started.items()))
            time.sleep(0.2)
        time.sleep(warmup)
        begin = time.monotonic()
        time.sleep(seconds)
        end = time.monotonic()
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _ in started.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(runs_dir, ignore_errors=True)
    return {name: slope([(t, s) for t, s in samples if begin <= t <= end]) for name, (_, samples) in started.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_commit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default=BASELINE, help="the older commit (default: %(default)s, before the lean Atari stack)")
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds after both started stepping")
    parser.add_argument("--seconds", type=float, default=40.0, help="measurement window")
    args = parser.parse_args(argv)
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        parser.exit(2, "ab_commit: needs two cores and taskset\n")
    old_tree = Path(tempfile.mkdtemp(prefix="a3c-ab-tree-"))
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_tree), args.commit], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as error:
        parser.exit(2, f"ab_commit: cannot check out {args.commit}: {error.stderr.strip().splitlines()[-1]}\n")
    trees = {"new": ROOT, "old": old_tree}
    rows = []
    try:
        for repeat in range(args.repeat):
            cores = {"new": repeat % 2, "old": 1 - repeat % 2}
            sps = measure_pair(trees, cores, args.env_id, args.warmup, args.seconds)
            rows.append(sps)
            print(f"repeat {repeat + 1}: new {sps['new']:,.0f} (core {cores['new']})  old {sps['old']:,.0f} (core {cores['old']})  new/old {sps['new'] / sps['old']:.2f}", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)], capture_output=True)
    ratios = [row["new"] / row["old"] for row in rows]
    print(f"\n{args.env_id}, 1 worker each, train.py defaults: this tree against {args.commit}")
    print("| | new | old | new/old |\n|---|---|---|---|")
    for index, (row, ratio) in enumerate(zip(rows, ratios), 1):
        print(f"| repeat {index} | {row['new']:,.0f} | {row['old']:,.0f} | {ratio:.2f} |")
    print(f"| median | {statistics.median(r['new'] for r in rows):,.0f} | {statistics.median(r['old'] for r in rows):,.0f} | **{statistics.median(ratios):.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
