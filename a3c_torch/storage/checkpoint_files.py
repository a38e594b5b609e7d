"""The run's checkpoint files as the trainer knows them: the step each one holds, and why its
last write failed.

A failed write (a full disk, NaN weights) must not stop training and must never be reported as
saved: every message names the file that is kept and its step, read from disk when this trainer
did not write that file itself (a resumed run's).
"""

from __future__ import annotations

import sys
from pathlib import Path

from a3c_torch.storage.checkpoint import CheckpointNotDurable, NonFiniteWeights, save_checkpoint
from a3c_torch.storage.run_dir import resume_command, step_of


class CheckpointFiles:
    def __init__(self, run_dir: Path | None):
        self.run_dir = run_dir  # None on a distributed node that keeps no checkpoints
        self.steps_on_disk: dict[str, int | None] = {}
        self.failed_writes: dict[str, str] = {}  # name -> why its last write failed

    def write(self, name: str, global_step: int, payload: dict) -> bool:
        """Write one checkpoint; on failure say why and which one is kept. True if written."""
        try:
            save_checkpoint(self.run_dir / "checkpoints" / name, payload)
        except CheckpointNotDurable as exc:
            # Not "the previous one is kept": the new file is in place, only its rename may not survive a power cut.
            print(f"warning: {name} written at step {global_step:,}, but its folder could not be synced to disk ({exc.reason}): a power cut may bring back the previous {name}", file=sys.stderr, flush=True)
        except (OSError, NonFiniteWeights) as exc:
            # Disk full, NaN weights: the previous checkpoint is untouched; say so and go on.
            reason = getattr(exc, "reason", None) or str(exc).removeprefix(f"{name} not written: ")
            self.failed_writes[name] = reason
            print(f"warning: {name} not written at step {global_step:,}: {reason}; {self.kept(name)}", file=sys.stderr, flush=True)
            return False
        self.steps_on_disk[name] = int(global_step)
        if self.failed_writes.pop(name, None) is not None:
            print(f"{name} written again, at step {global_step:,}", file=sys.stderr, flush=True)
        return True

    def step_on_disk(self, name: str) -> int | None:
        if name not in self.steps_on_disk:  # a file this trainer did not write (a resumed run's)
            self.steps_on_disk[name] = step_of(self.run_dir / "checkpoints" / name) if self.run_dir is not None else None
        return self.steps_on_disk[name]

    def kept(self, name: str) -> str:
        step = self.step_on_disk(name)
        return f"the previous {name} is kept, at step {step:,}" if step is not None else f"there is no earlier {name}"

    def last_good(self, step: int) -> str:
        """The last line of a run whose final checkpoint could not be written."""
        why = self.failed_writes.get("latest.pt", "unknown error")
        folder = self.run_dir / "checkpoints"
        kept, best = self.step_on_disk("latest.pt"), self.step_on_disk("best.pt")
        if kept is not None:
            where = f"the last good checkpoint is {folder / 'latest.pt'}, at step {kept:,} (resume with: {resume_command(self.run_dir)})"
        elif best is not None:
            where = f"this run has no latest.pt; its only checkpoint is {folder / 'best.pt'}, at step {best:,}"
        else:
            where = "this run has no checkpoint at all: its training is lost"
        return f"error: the final checkpoint (step {step:,}) was not written: {why}; {where}"
