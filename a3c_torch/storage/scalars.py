"""A run's TensorBoard scalars, read back: the series behind the plots, curve.csv and the analysis
tools. The tags are the names the trainer logs them under (metrics.py).

tensorboard's reader is imported only when a run is read: it is slow to import.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from a3c_torch.errors import UsageError

TRAIN_RETURN = "charts/episodic_return"  # one point per finished training game
TRAIN_LENGTH = "charts/episodic_length"
EVAL_RETURN = "eval/episodic_return"  # one point per evaluation: the mean of its full games
EVAL_RETURN_STD = "eval/episodic_return_std"

Series = tuple[np.ndarray, np.ndarray]  # (global steps, values)


def read_scalars(run_dir: str | os.PathLike, tags) -> dict[str, Series]:
    """The wanted scalar series of a run directory, sorted by step; tags never logged are absent."""
    return {tag: (np.array([e.step for e in events], dtype=np.int64), np.array([e.value for e in events], dtype=np.float64))
            for tag, events in read_scalar_events(run_dir, tags).items()}


def read_scalar_events(run_dir: str | os.PathLike, tags) -> dict:
    """The wanted tags' events (each with .step, .wall_time and .value), sorted by step; points
    logged at the same step keep the order they were written in. Tags never logged are absent."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    if not any(run_dir.glob("events.out.tfevents.*")):
        raise UsageError(f"{run_dir}: no TensorBoard event files (events.out.tfevents.*) in this directory")
    # size_guidance 0 keeps every point; the default keeps a random sample of long series.
    accumulator = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})
    # A resumed run's events carry a purge step (metrics.py), so the points that a killed run
    # logged after its last checkpoint are dropped. That is intended, but tensorboard warns about
    # it on stderr as if something were wrong, once per resume.
    tensorboard_logger = logging.getLogger("tensorboard")
    level = tensorboard_logger.level
    tensorboard_logger.setLevel(logging.ERROR)
    try:
        accumulator.Reload()
    finally:
        tensorboard_logger.setLevel(level)
    logged = set(accumulator.Tags().get("scalars", []))
    return {tag: sorted(accumulator.Scalars(tag), key=lambda e: e.step) for tag in tags if tag in logged}
