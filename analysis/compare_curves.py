"""Learning curves of two or more runs side by side, per step bin or per minute bin, as a table.

For each run directory it reads the training games' returns (`charts/episodic_return`, one point
per finished game of any worker, raw game score) and prints, per bin of --bin million agent steps,
how many games ended in the bin and their mean. Binned means rather than a plot: runs at
different speeds compare per agent step, and a table is easy to quote in a results note.

With --minutes the bins are minutes of training time instead (time to score): a game's time is
read off the run's own `charts/SPS` points (each covers the steps since the one before at the
measured rate), so pauses between a run and its resumes do not count, and neither does start-up.

A published run that kept only its training games (`curve.csv`, written by scripts/slim_run.py or
the Atari suite) is read in place of a run directory: name the file, or its folder.

    .venv/bin/python -m analysis.compare_curves runs/<run a> runs/<run b> --bin 0.5
    .venv/bin/python -m analysis.compare_curves runs/<a> runs/<b> --bin 1 --up-to 10 --json out.json
    .venv/bin/python -m analysis.compare_curves runs/<a> runs/<b> --minutes --bin 15

Bins run from 0 to --up-to (default: the last step or minute the shortest run reached, so every
run covers every bin; a run that stops inside a bin has fewer games there).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from a3c_torch.errors import UsageError
from a3c_torch.storage.curves import read_curve
from a3c_torch.storage.scalars import TRAIN_RETURN, read_scalars

SPS = "charts/SPS"


def binned_means(steps: np.ndarray, values: np.ndarray, width: float, top: float) -> list[tuple[int, float | None]]:
    """(games, mean return) per bin [k * width, (k + 1) * width) below top; mean None for an empty bin."""
    rows = []
    for lo in np.arange(0.0, top, width):
        inside = values[(steps >= lo) & (steps < lo + width)]
        rows.append((len(inside), float(inside.mean()) if len(inside) else None))
    return rows


def training_minutes(sps_steps: np.ndarray, sps_values: np.ndarray) -> np.ndarray:
    """Minutes of training at each `charts/SPS` point: every point covers the steps since the one
    before it (since step 0 for the first) at its own rate. A resume's first point covers only the
    steps since the checkpoint, as the points logged after that checkpoint were purged. A rate of
    0 (the trainer's first reading after a start, before any rollout ended) covers no time."""
    covered = np.diff(sps_steps, prepend=0)
    seconds = np.divide(covered, sps_values, out=np.zeros(len(covered)), where=sps_values > 0)
    return np.cumsum(seconds) / 60.0


def published_curve(path: Path) -> Path | None:
    """The curve.csv to read for `path`: the file itself, or the one in a folder that has no event
    files of its own (a slimmed run, scripts/slim_run.py); None for a run directory."""
    if path.suffix == ".csv":
        return path
    if path.is_dir() and not any(path.glob("events.out.tfevents.*")) and (path / "curve.csv").is_file():
        return path / "curve.csv"
    return None


def compare(run_dirs: list[str], bin_width: float, up_to: float | None, minutes: bool = False) -> dict:
    """Binned training-return means per run: bins of bin_width million agent steps, or of bin_width
    minutes of training time with minutes=True; up_to is the last bin edge in the same unit."""
    scale = 1.0 if minutes else 1e6  # bins are counted in minutes, or in steps
    curves = {}
    for run_dir in run_dirs:
        curve_file = published_curve(Path(run_dir))
        if curve_file is not None:
            if minutes:  # its wall times include the pauses between a run and its resumes
                raise UsageError(f"{run_dir}: a curve.csv has no training time to bin by (--minutes needs the run's event files)")
            curve = read_curve(curve_file)
            curves[run_dir] = (curve.steps.astype(np.float64), curve.returns)
            continue
        series = read_scalars(run_dir, tags=(TRAIN_RETURN, SPS))
        if TRAIN_RETURN not in series:
            raise UsageError(f"{run_dir}: no {TRAIN_RETURN} points (no training game has ended yet)")
        steps, values = series[TRAIN_RETURN]
        if minutes:
            if SPS not in series:
                raise UsageError(f"{run_dir}: no {SPS} points, so no training time to bin by")
            sps_steps, sps_values = series[SPS]
            steps = np.interp(steps, sps_steps, training_minutes(sps_steps, sps_values))
        curves[run_dir] = (steps, values)
    width = bin_width * scale
    top = up_to * scale if up_to else min(float(x[-1]) for x, _ in curves.values()) + (1e-6 if minutes else 1)
    return {
        "unit": "minutes" if minutes else "steps",
        "bin_width": width,
        "bin_starts": [float(lo) for lo in np.arange(0.0, top, width)],
        "runs": {run: binned_means(x, values, width, top) for run, (x, values) in curves.items()},
    }


def print_table(result: dict) -> None:
    runs = list(result["runs"])
    for index, run in enumerate(runs):
        print(f"run {chr(65 + index)}: {run}")
    minutes = result["unit"] == "minutes"
    scale, unit = (1.0, "min") if minutes else (1e6, "M")
    header = f"{'minutes' if minutes else 'steps':>16}" + "".join(f" {chr(65 + i) + ' games':>9} {chr(65 + i) + ' mean':>7}" for i in range(len(runs)))
    print(header)
    width = result["bin_width"]
    for row, lo in enumerate(result["bin_starts"]):
        cells = ""
        for run in runs:
            games, mean = result["runs"][run][row]
            cells += f" {games:9d} {mean:7.2f}" if mean is not None else f" {games:9d} {'-':>7}"
        print(f"{lo / scale:6.2f}-{(lo + width) / scale:6.2f}{unit:<3}{cells}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.compare_curves", description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (with events.out.tfevents.* files), or a published curve.csv (or a folder holding one)")
    parser.add_argument("--bin", type=float, default=0.5, help="bin width in millions of agent steps, or in minutes with --minutes (default 0.5)")
    parser.add_argument("--up-to", type=float, default=None, help="last bin edge, in the bins' unit (default: where the shortest run ends)")
    parser.add_argument("--minutes", action="store_true", help="bin by minutes of training time (from charts/SPS) instead of agent steps")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    args = parser.parse_args()
    try:
        if args.bin <= 0 or (args.up_to is not None and args.up_to <= 0):
            raise UsageError("--bin and --up-to must be positive")
        result = compare(args.run_dirs, args.bin, args.up_to, minutes=args.minutes)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
