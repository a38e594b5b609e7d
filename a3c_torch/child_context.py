"""What a child process is handed: one object, instead of a list of positional arguments (the
trainer's workers and evaluator; evaluate.py's game players).

A context is pickled to a spawned child after the ChildStart that arms it (processes.py), and this
module imports nothing heavy, so unpickling it imports no torch before the child is armed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a3c_torch.config import Config
    from a3c_torch.processes import StepCounter, StopFlag


@dataclass(frozen=True, kw_only=True)
class _Shared:
    """What every child of the trainer shares with it."""

    cfg: "Config"
    shared_model: Any  # ActorCritic in shared memory
    global_steps: "StepCounter"
    stop_flag: "StopFlag"  # set by the trainer: finish what you are doing and exit
    to_trainer: Any  # the queue of messages.* to the trainer
    trainer_pid: int  # children die with it (processes.parent_alive)


@dataclass(frozen=True, kw_only=True)
class WorkerContext(_Shared):
    rank: int
    optimizer: Any  # the shared optimizer (its state in shared memory)
    seed: int | None = None  # None: cfg.seed + rank
    saved_state: dict | None = None  # from the checkpoint (worker_state.py): continue exactly

    @property
    def name(self) -> str:
        return f"worker {self.rank}"


@dataclass(frozen=True, kw_only=True)
class EvaluatorContext(_Shared):
    device: str
    best_so_far: float | None = None  # the run's best evaluation mean (None: the first one is a best)

    name = "evaluator"


@dataclass(frozen=True, kw_only=True)
class PlayerContext:
    """evaluate.py --num-processes: one of the processes that play games (evaluation/parallel.py)."""

    index: int
    model: Any  # the policy, on the cpu in shared memory
    settings: Any  # envs.EnvSettings
    device: str
    greedy: bool
    seed: int  # game i is played with seed + i
    tasks: Any  # the queue of game numbers to play; None: no more
    from_players: Any  # the queue of messages.GamePlayed to evaluate.py's main process
    main_pid: int  # that process: players die with it

    @property
    def name(self) -> str:
        return f"player-{self.index}"
