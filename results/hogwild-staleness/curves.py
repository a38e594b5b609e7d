"""Per-0.1M-step means of a run's training scalars, for the staleness study (one CSV row per run and bin).

    python curves.py RUN_DIR [RUN_DIR ...] > curves.csv

Columns: run, bin start (M steps), games ended in the bin, their mean raw return, and the means of
losses/entropy, losses/grad_norm, losses/value_loss and losses/staleness over the bin.
"""

import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from a3c_torch.storage.scalars import read_scalars  # noqa: E402

TAGS = ("charts/episodic_return", "losses/entropy", "losses/grad_norm", "losses/value_loss", "losses/staleness")
WIDTH = 100_000


def main(run_dirs):
    out = csv.writer(sys.stdout)
    out.writerow(["run", "bin_start_M", "games", "mean_return", "entropy", "grad_norm", "value_loss", "staleness"])
    for run_dir in run_dirs:
        series = read_scalars(run_dir, TAGS)
        name = Path(run_dir).name.split("__")[1]
        top = max(float(np.max(steps)) for steps, _ in series.values())
        for lo in np.arange(0, top, WIDTH):
            row = [name, f"{lo / 1e6:.1f}"]
            for tag in TAGS:
                steps, values = (np.asarray(a) for a in series.get(tag, ([], [])))
                inside = (steps >= lo) & (steps < lo + WIDTH)
                if tag == TAGS[0]:
                    row.append(int(inside.sum()))
                row.append(f"{values[inside].mean():.4f}" if inside.any() else "")
            out.writerow(row)


if __name__ == "__main__":
    main(sys.argv[1:])
