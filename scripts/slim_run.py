"""Slim a finished run folder under results/ to what a published run keeps (docs/results.md).

A run directory holds TensorBoard event files (every scalar the trainer logged) and checkpoints
(the optimizer's state and every worker's state, for a resume): tens of MB that every clone of the
repository carries. What a finished run needs to stay checkable is smaller: its training games as
`curve.csv` (a3c_torch/storage/curves.py; analysis/compare_curves.py reads it in place of the events) and,
with --policy, its final policy as `policy.pt` (the weights, the config and the step of the run's
last checkpoint, never one picked by its score; evaluate.py --checkpoint plays it).

    python -m scripts.slim_run results/<run folder>/<run directory> [--policy] [--delete]

Without --delete it only writes and checks the light files. With --delete it then removes the run
directory; the removed files stay reachable in git history (docs/results.md names the commit).
The light files are written next to the run directory, named after it when the folder holds more
than one run directory (`<run directory>.curve.csv`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads

import numpy as np  # noqa: E402

from a3c_torch.errors import UsageError  # noqa: E402
from a3c_torch.storage.checkpoint import load_checkpoint  # noqa: E402
from a3c_torch.storage.checks import check_checkpoint  # noqa: E402
from a3c_torch.storage.curves import curve_from_events, read_curve, write_curve  # noqa: E402
from a3c_torch.storage.policy_file import export_policy  # noqa: E402


def light_file_paths(run_dir: Path) -> tuple[Path, Path]:
    """Where the curve and the policy of run_dir go: next to it, named after it if it has siblings."""
    siblings = [p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir and any(p.glob("events.out.tfevents.*"))]
    prefix = f"{run_dir.name}." if siblings else ""
    return run_dir.parent / f"{prefix}curve.csv", run_dir.parent / f"{prefix}policy.pt"


def slim(run_dir: Path, with_policy: bool, delete: bool) -> list[str]:
    """Write (and check) the light files of run_dir, then remove it if asked; what was done, as lines."""
    if not run_dir.is_dir() or not any(run_dir.glob("events.out.tfevents.*")):
        raise UsageError(f"{run_dir}: not a run directory (no TensorBoard event file in it)")
    curve_path, policy_path = light_file_paths(run_dir)
    done = []
    curve = curve_from_events(run_dir)
    write_curve(curve, curve_path)
    again = read_curve(curve_path)
    if not (np.array_equal(again.steps, curve.steps) and np.array_equal(again.returns, curve.returns) and np.array_equal(again.lengths, curve.lengths)):
        raise RuntimeError(f"{curve_path}: reads back differently from the events; nothing removed")
    done.append(f"{curve_path}: {len(curve)} training games, to step {int(curve.steps[-1]) if len(curve) else 0:,}")
    if with_policy:
        latest = run_dir / "checkpoints" / "latest.pt"
        if not latest.is_file():
            raise UsageError(f"{latest}: no final checkpoint to take the policy from")
        step = export_policy(latest, policy_path)
        check_checkpoint(load_checkpoint(policy_path), str(policy_path))  # plays as evaluate.py would load it
        done.append(f"{policy_path}: the policy of {latest.name} at step {step:,} ({policy_path.stat().st_size / 1e6:.1f} MB)")
    if delete:
        size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
        shutil.rmtree(run_dir)
        done.append(f"removed {run_dir} ({size / 1e6:.1f} MB)")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.slim_run", description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories (with their event files) to slim")
    parser.add_argument("--policy", action="store_true", help="also keep the final policy as policy.pt (from checkpoints/latest.pt)")
    parser.add_argument("--delete", action="store_true", help="remove each run directory once its light files are written and checked")
    args = parser.parse_args(argv)
    try:
        for run_dir in args.run_dirs:
            for line in slim(run_dir, args.policy, args.delete):
                print(line)
    except UsageError as exc:
        print(f"python -m scripts.slim_run: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
