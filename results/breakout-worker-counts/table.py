"""Per-0.1M training-game means to 0.6M steps and the mean of the last 100 games at 600k, per run.

    python results/breakout-worker-counts/table.py NAME=PATH ...   (PATH: a run directory or a curve.csv)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a results folder is not a package

from a3c_torch.storage.curves import curve_from_events, read_curve  # noqa: E402

print("| run | " + " | ".join(f"{lo / 10:.1f}-{(lo + 1) / 10:.1f}M" for lo in range(6)) + " | last 100 at 600k |")
print("|---" * 8 + "|")
for argument in sys.argv[1:]:
    name, path = argument.split("=", 1)
    curve = read_curve(path) if path.endswith(".csv") else curve_from_events(path)
    bins = [curve.returns[(curve.steps >= lo * 100_000) & (curve.steps < (lo + 1) * 100_000)].mean() for lo in range(6)]
    last = curve.returns[curve.steps <= 600_000][-100:].mean()
    print(f"| {name} | " + " | ".join(f"{b:.2f}" for b in bins) + f" | {last:.2f} |")
