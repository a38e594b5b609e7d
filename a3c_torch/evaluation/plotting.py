"""Learning curves: a run's TensorBoard scalars drawn to a PNG.

Training returns (`charts/episodic_return`) are noisy, one point per finished episode from any
worker, so they are drawn faint with a moving average on top. Evaluation returns
(`eval/episodic_return`, full games) are drawn as a line, with a +-1 std band when the run logged
`eval/episodic_return_std`. The x axis is the global agent step, as in TensorBoard.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from a3c_torch.errors import UsageError
from a3c_torch.storage.files import NotDurable, write_atomically
from a3c_torch.storage.scalars import EVAL_RETURN, EVAL_RETURN_STD, TRAIN_RETURN, Series, read_scalars

PLOTTED_TAGS = (TRAIN_RETURN, EVAL_RETURN, EVAL_RETURN_STD)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean over a window centred on each point (narrower at the ends, so no point is lost).

    Centred rather than trailing: a trailing mean lags, and would draw the improvement later
    than it happened.
    """
    if len(values) == 0:
        return values.astype(np.float64)
    half = max(1, int(window)) // 2
    sums = np.cumsum(np.insert(values.astype(np.float64), 0, 0.0))
    index = np.arange(len(values))
    starts = np.maximum(0, index - half)
    ends = np.minimum(len(values), index + half + 1)
    return (sums[ends] - sums[starts]) / (ends - starts)


def smoothing_window(num_points: int) -> int:
    """About a twentieth of the curve, so the trend shows without hiding real changes."""
    return int(np.clip(num_points // 20, 1, 200))


def plot_learning_curve(run_dir: str | os.PathLike, out_path: str | os.PathLike, title: str | None = None) -> Path:
    """Write the run's learning curve to `out_path` (PNG); returns the path written."""
    run_dir, out_path = Path(run_dir), Path(out_path)
    series = read_scalars(run_dir, PLOTTED_TAGS)
    if TRAIN_RETURN not in series and EVAL_RETURN not in series:
        raise UsageError(f"{run_dir}: nothing to plot yet (no {TRAIN_RETURN} or {EVAL_RETURN} logged)")
    figure = draw(series, title or run_dir.name)
    save_png(figure, out_path)
    return out_path


def draw(series: dict[str, Series], title: str) -> Figure:
    # A bare Figure with the Agg canvas: no pyplot, so no GUI backend and no global state.
    figure = Figure(figsize=(9, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if TRAIN_RETURN in series:
        draw_training(axes, *series[TRAIN_RETURN])
    if EVAL_RETURN in series:
        draw_evaluation(axes, *series[EVAL_RETURN], series.get(EVAL_RETURN_STD))
    axes.set_title(title, fontsize=10)
    axes.set_xlabel("global step (agent steps)")
    axes.set_ylabel("episodic return")
    axes.xaxis.set_major_formatter(EngFormatter())
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=9)
    return figure


def draw_training(axes, steps: np.ndarray, returns: np.ndarray) -> None:
    axes.scatter(steps, returns, s=4, alpha=0.25, color="tab:blue", linewidths=0, label="training episodes")
    window = smoothing_window(len(returns))
    label = f"training, moving mean of {window}" if window > 1 else "training"
    axes.plot(steps, moving_average(returns, window), color="tab:blue", linewidth=1.8, label=label)


def draw_evaluation(axes, steps: np.ndarray, means: np.ndarray, std: Series | None) -> None:
    axes.plot(steps, means, color="tab:orange", marker="o", markersize=3, linewidth=1.8, label="evaluation (full games)")
    band = std_at(steps, std) if std is not None else None
    if band is not None:
        axes.fill_between(steps, means - band, means + band, color="tab:orange", alpha=0.2, linewidth=0, label="evaluation +-1 std")


def std_at(steps: np.ndarray, std: Series) -> np.ndarray | None:
    """The logged std for each evaluation step, or None when they were not logged together."""
    std_steps, std_values = std
    by_step = dict(zip(std_steps.tolist(), std_values.tolist()))
    if not all(step in by_step for step in steps.tolist()):
        return None
    return np.array([by_step[step] for step in steps.tolist()])


def save_png(figure: Figure, out_path: Path) -> None:
    """Drawn in memory, then written whole or not at all: a full disk leaves no 0-byte PNG."""
    png = io.BytesIO()
    figure.savefig(png, format="png")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out_path, png.getvalue())
    except NotDurable as exc:
        print(f"warning: {out_path} is written, but its folder could not be synced to disk ({exc.strerror}): a power cut may lose it", file=sys.stderr, flush=True)
    except OSError as exc:
        raise UsageError(f"{out_path}: cannot write the plot: {exc.strerror or exc}") from None
