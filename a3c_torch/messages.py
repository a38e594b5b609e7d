"""What the child processes tell the main process: one small frozen dataclass per kind of message.

They travel on a queue named for where they go (`to_trainer`, `from_players`), are read by
attribute and told apart by type, never by position in a tuple. This module imports nothing heavy:
a child imports it before torch (processes.py reports a crash with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a3c_torch.evaluation.games import EpisodeResult


@dataclass(frozen=True)
class Episode:
    """A training game that ended (a worker's), scored on the raw game score."""

    step: int  # global agent step when the worker reported it
    episode_return: float
    length: int


@dataclass(frozen=True)
class Losses:
    """A worker's losses per agent step, averaged over its last few updates."""

    step: int
    policy_loss: float
    value_loss: float
    entropy: float
    grad_norm: float
    # Other workers' updates that landed between this worker's copy of the shared weights and its
    # own update to them (about N - 1 with N Hogwild workers).
    staleness: float
    skipped: int  # updates skipped since the last report (a non-finite loss or gradient)

    @classmethod
    def mean_of(cls, step: int, sums, updates: int, skipped: int) -> "Losses":
        """From the sums of (policy, value, entropy, grad norm, staleness) over `updates` updates."""
        return cls(step, *(float(total) / updates for total in sums), skipped)


@dataclass(frozen=True)
class WorkerState:
    """A stopped worker's RNG, env and LSTM state (worker_state.pack), for the final checkpoint."""

    rank: int
    packed: Any


@dataclass(frozen=True)
class ChildFailed:
    """A child process crashed; it exits non-zero after sending this."""

    name: str  # "worker 0", "evaluator", "player-1"
    traceback: str


@dataclass(frozen=True)
class Evaluation:
    """The evaluator's summary of one evaluation (full games with the shared weights of `step`).

    The evaluator alone decides whether it is a new best (it starts from the run's saved best): then,
    and only then, the weights that earned the score travel with it, so best.pt holds exactly them."""

    step: int
    mean: float
    std: float
    mean_length: float
    new_best: bool = False
    weights: dict | None = None  # set when new_best


@dataclass(frozen=True)
class GamePlayed:
    """evaluate.py --num-processes: a player finished game `index`."""

    index: int
    result: "EpisodeResult"
