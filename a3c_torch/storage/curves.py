"""A run's training games as a small CSV: what a published run keeps of its TensorBoard events.

Event files grow with every logged scalar (losses, SPS, ...) and need tensorboard to read; the
curve of a finished run is only its training games. `curve.csv` holds one row per finished
training game, from `charts/episodic_return` and `charts/episodic_length` (the raw game score
and length in agent steps):

    step,wall_time,return,length

`step` is the global agent step when the game ended, `wall_time` the Unix time (seconds) at
which the trainer logged it: a resumed run shows its pause as a gap there.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from a3c_torch.errors import UsageError
from a3c_torch.storage.files import write_atomically
from a3c_torch.storage.scalars import TRAIN_LENGTH, TRAIN_RETURN, read_scalar_events

COLUMNS = ("step", "wall_time", "return", "length")


@dataclass(frozen=True)
class Curve:
    """The training games of a run, in the order they ended."""

    steps: np.ndarray  # int64
    wall_times: np.ndarray  # float64, Unix seconds
    returns: np.ndarray  # float64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.steps)

    def last_games_mean(self, games: int = 100) -> float:
        """The mean return of the last `games` games (fewer if the run played fewer)."""
        if len(self) == 0:
            raise ValueError("no training game in the curve")
        return float(self.returns[-games:].mean())


def curve_from_events(run_dir: str | os.PathLike) -> Curve:
    """The training games logged in a run directory's event files."""
    events = read_scalar_events(run_dir, tags=(TRAIN_RETURN, TRAIN_LENGTH))
    returns, lengths = events.get(TRAIN_RETURN, []), events.get(TRAIN_LENGTH, [])
    # The trainer logs a game's return and length together, at one step: both sorted by step
    # (stably), they pair one to one. Anything else is not a run of ours, or a damaged one.
    if [e.step for e in returns] != [e.step for e in lengths]:
        raise UsageError(f"{run_dir}: its {TRAIN_RETURN} and {TRAIN_LENGTH} points do not pair up ({len(returns)} and {len(lengths)} points)")
    return Curve(
        steps=np.array([e.step for e in returns], dtype=np.int64),
        wall_times=np.array([e.wall_time for e in returns], dtype=np.float64),
        returns=np.array([e.value for e in returns], dtype=np.float64),
        lengths=np.array([round(e.value) for e in lengths], dtype=np.int64),
    )


def write_curve(curve: Curve, path: str | os.PathLike) -> None:
    """curve.csv, whole or not at all."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for step, wall, ret, length in zip(curve.steps, curve.wall_times, curve.returns, curve.lengths):
        writer.writerow((int(step), f"{wall:.3f}", repr(float(ret)), int(length)))
    write_atomically(path, text.getvalue().encode())


def read_curve(path: str | os.PathLike) -> Curve:
    """A curve.csv written by write_curve; a UsageError naming the file if it is not one."""
    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if not rows or tuple(rows[0]) != COLUMNS:
        raise UsageError(f"{path}: not a curve file (its first line must be {','.join(COLUMNS)})")
    try:
        columns = list(zip(*rows[1:])) or [(), (), (), ()]
        if any(len(row) != len(COLUMNS) for row in rows[1:]):
            raise ValueError
        steps, walls, returns, lengths = columns
        return Curve(np.array(steps, dtype=np.int64), np.array(walls, dtype=np.float64), np.array(returns, dtype=np.float64), np.array(lengths, dtype=np.int64))
    except ValueError:
        raise UsageError(f"{path}: a row is not {len(COLUMNS)} numbers ({','.join(COLUMNS)})") from None
