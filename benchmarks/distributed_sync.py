"""The distributed dry run against a single-machine run with the same number of workers.

In one run, on this machine, for --seconds each after a --warmup:
  (a) `train.py --num-processes W` (one machine, Hogwild, no RPC);
  (b) `torchrun --standalone --nproc-per-node=W+1 -m a3c_torch.distributed --num-processes 1
      --ps-workers 0`: a dedicated parameter server (rank 0) and W nodes of one worker each,
      syncing over loopback RPC.
Training steps/s is the least-squares slope of the global step that rank 0 (or train.py) prints
about once a second (rank 0's count moves at each sync, so the slope needs a window of many
syncs). Each node prints its sync round trips when it stops; they are collected here. Both
runs stop with SIGINT, as a user would stop them.

    .venv/bin/python -m benchmarks.distributed_sync                     # Pong, 2 workers, 60 s each
    .venv/bin/python -m benchmarks.distributed_sync --env-id CartPole-v1 --seconds 30 --json out.json

On a machine with fewer cores than W + 2 the dry run also pays for the extra processes (the
server, the torchrun agent): compare the two on the same machine only, which is why they are
measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import throughput  # its least-squares slope and progress-line pattern

ROOT = Path(__file__).resolve().parent.parent

RANK0_PREFIX = re.compile(r"^\[default0\]:")
ROUND_TRIP = re.compile(r"node (\d+): (\d+) syncs; RPC round trips: median ([\d.]+) ms, max ([\d.]+) ms")


def measure(cmd: list[str], seconds: float, warmup: float, startup_timeout: float, rank0_only: bool) -> dict:
    samples, lines = [], []
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})

    def read():
        for line in proc.stdout:
            now = time.monotonic()
            lines.append(line.rstrip())
            if rank0_only:
                if not RANK0_PREFIX.match(line):
                    continue
                line = RANK0_PREFIX.sub("", line)
            match = throughput.STEP_LINE.match(line)
            if match:
                samples.append((now, int(match.group(1).replace(",", ""))))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not any(step > 0 for _, step in samples):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("never started stepping:\n" + "\n".join(lines[-30:]))
            time.sleep(0.1)
        start = time.monotonic() + warmup
        time.sleep(warmup + seconds)
        end = time.monotonic()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
    window = [(t, s) for t, s in samples if start <= t <= end]
    if len(window) < 3:
        raise RuntimeError(f"only {len(window)} progress lines in the window; use a longer --seconds")
    trips = [dict(node=int(m[1]), syncs=int(m[2]), median_ms=float(m[3]), max_ms=float(m[4])) for m in map(ROUND_TRIP.search, lines) if m]
    return {"sps": throughput.slope(window), "points": len(window), "round_trips": sorted(trips, key=lambda t: t["node"])}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.distributed_sync", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--workers", type=int, default=2, help="total worker processes in both runs")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--sync-interval", type=float, default=2.0)
    parser.add_argument("--startup-timeout", type=float, default=180.0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    runs_dir = tempfile.mkdtemp(prefix="a3c-distributed-bench-")
    common = ["--env-id", args.env_id, "--no-evaluator", "--max-steps", str(10**12), "--log-interval", "1", "--checkpoint-interval", "86400", "--runs-dir", runs_dir]
    try:
        single = measure([sys.executable, str(ROOT / "train.py"), "--num-processes", str(args.workers), *common], args.seconds, args.warmup, args.startup_timeout, rank0_only=False)
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.workers + 1}", "--tee", "3"]
        dry = measure([*launcher, "-m", "a3c_torch.distributed", "--num-processes", "1", "--ps-workers", "0", "--sync-interval", str(args.sync_interval), *common],
                      args.seconds, args.warmup, args.startup_timeout, rank0_only=True)
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)
    result = {"env_id": args.env_id, "workers": args.workers, "seconds": args.seconds, "cpu_count": os.cpu_count(), "single_machine": single, "distributed_dry_run": dry,
              "ratio": dry["sps"] / single["sps"]}
    print(f"{args.env_id}, {args.workers} workers in all, {args.seconds:.0f} s each, {os.cpu_count()} CPUs")
    print(f"| run | steps/s |\n|---|---|\n| train.py --num-processes {args.workers} | {single['sps']:.0f} |")
    print(f"| torchrun dry run: server + {args.workers} nodes x 1 worker | {dry['sps']:.0f} |\n| ratio dry run / single | {result['ratio']:.2f} |")
    for trip in dry["round_trips"]:
        print(f"node {trip['node']}: {trip['syncs']} syncs, RPC round trip median {trip['median_ms']:.1f} ms, max {trip['max_ms']:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
