"""The learning rate over a run: one schedule object that the workers step with, the metrics plot
(charts/learning_rate) and the checkpoints record.

It follows the global step, so a run resumed with a larger --max-steps goes on along the new line.
The base rate is the run's resolved --lr (config.with_resolved_lr).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("linear", "constant")


@dataclass(frozen=True)
class LrSchedule:
    base: float  # the rate at step 0
    kind: str  # linear: from base down to 0 at max_steps (the A3C paper's annealing); constant
    max_steps: int

    def __post_init__(self):
        if self.kind not in SCHEDULES:
            raise ValueError(f"unknown learning-rate schedule {self.kind!r}")

    @classmethod
    def of(cls, cfg) -> "LrSchedule":
        return cls(cfg.learning_rate, cfg.lr_schedule, cfg.max_steps)

    @property
    def varies(self) -> bool:
        return self.kind != "constant"

    def at(self, global_step: int) -> float:
        if self.kind == "constant":
            return self.base
        return self.base * max(0.0, 1.0 - global_step / self.max_steps)  # past max_steps: 0, not negative

    def set(self, optimizer, global_step: int) -> None:
        """Step `optimizer` with the rate at `global_step`. Each worker holds its own copy of the
        param_groups (only the state tensors are shared), so every worker sets the rate it uses."""
        for group in optimizer.param_groups:
            group["lr"] = self.at(global_step)

    def in_saved_state(self, optimizer_state: dict, global_step: int) -> dict:
        """A saved optimizer state that shows the rate in use at its step: the trainer's own
        param_groups keep the base rate (the workers set theirs in their private copies)."""
        for group in optimizer_state["param_groups"]:
            group["lr"] = self.at(global_step)
        return optimizer_state


def rate_change_on_resume(saved, resumed, global_step: int) -> list[str]:
    """'learning rate at step N: old -> new' when the flags given with --resume move the rate in use
    (under a linear schedule a larger --max-steps raises it again); empty if it stays. saved and
    resumed are the two Configs."""
    old, new = (LrSchedule.of(cfg).at(global_step) for cfg in (saved, resumed))
    return [] if old == new else [f"learning rate at step {global_step:,}: {old:.3g} -> {new:.3g}"]
