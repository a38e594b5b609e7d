"""Learning curves of two or more runs side by side, per step bin, as a table.

For each run directory it reads the training games' returns (`charts/episodic_return`, one point
per finished game of any worker, raw game score) and prints, per bin of --bin million agent steps,
how many games ended in the bin and their mean. Binned means rather than a plot: runs at
different speeds compare per agent step, and a table is easy to quote in a results note.

    .venv/bin/python benchmarks/compare_curves.py runs/<run a> runs/<run b> --bin 0.5
    .venv/bin/python benchmarks/compare_curves.py runs/<a> runs/<b> --bin 1 --up-to 10 --json out.json

Bins run from 0 to --up-to (default: the last step the shortest run reached, so every run covers
every bin; a run that stops inside a bin has fewer games there).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a3c_torch.errors import UsageError  # noqa: E402
from a3c_torch.plotting import TRAIN_RETURN, read_scalars  # noqa: E402


def binned_means(steps: np.ndarray, values: np.ndarray, width: float, top: float) -> list[tuple[int, float | None]]:
    """(games, mean return) per bin [k * width, (k + 1) * width) below top; mean None for an empty bin."""
    rows = []
    for lo in np.arange(0.0, top, width):
        inside = values[(steps >= lo) & (steps < lo + width)]
        rows.append((len(inside), float(inside.mean()) if len(inside) else None))
    return rows


def compare(run_dirs: list[str], bin_millions: float, up_to_millions: float | None) -> dict:
    curves = {}
    for run_dir in run_dirs:
        series = read_scalars(run_dir, tags=(TRAIN_RETURN,))
        if TRAIN_RETURN not in series:
            raise UsageError(f"{run_dir}: no {TRAIN_RETURN} points (no training game has ended yet)")
        curves[run_dir] = series[TRAIN_RETURN]
    width = bin_millions * 1e6
    top = up_to_millions * 1e6 if up_to_millions else min(int(steps[-1]) + 1 for steps, _ in curves.values())
    return {
        "bin_steps": width,
        "bin_starts": [float(lo) for lo in np.arange(0.0, top, width)],
        "runs": {run: binned_means(steps, values, width, top) for run, (steps, values) in curves.items()},
    }


def print_table(result: dict) -> None:
    runs = list(result["runs"])
    for index, run in enumerate(runs):
        print(f"run {chr(65 + index)}: {run}")
    header = f"{'steps':>15}" + "".join(f" {chr(65 + i) + ' games':>9} {chr(65 + i) + ' mean':>7}" for i in range(len(runs)))
    print(header)
    width = result["bin_steps"]
    for row, lo in enumerate(result["bin_starts"]):
        cells = ""
        for run in runs:
            games, mean = result["runs"][run][row]
            cells += f" {games:9d} {mean:7.2f}" if mean is not None else f" {games:9d} {'-':>7}"
        print(f"{lo / 1e6:6.2f}-{(lo + width) / 1e6:6.2f}M{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (with events.out.tfevents.* files)")
    parser.add_argument("--bin", type=float, default=0.5, help="bin width in millions of agent steps (default 0.5)")
    parser.add_argument("--up-to", type=float, default=None, help="last bin edge in millions of steps (default: the shortest run's last step)")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    args = parser.parse_args()
    try:
        if args.bin <= 0 or (args.up_to is not None and args.up_to <= 0):
            raise UsageError("--bin and --up-to must be positive")
        result = compare(args.run_dirs, args.bin, args.up_to)
    except UsageError as error:
        print(f"compare_curves.py: error: {error}", file=sys.stderr)
        return 2
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
