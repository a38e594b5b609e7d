"""`--resume PATH`: what a resumed run continues from, with which settings, and where.

`plan_resume` reads the checkpoint, applies the flags given now to its saved config (those that
fix the model and its optimizer must match: config.IDENTITY_FIELDS), and decides where the run
goes on: in the checkpoint's own run directory (locked for it), or in a new run directory beside it
when continuing there would overwrite a newer latest.pt, or when the file is not in a run
directory. Every refusal is raised here, as a UsageError that names the problem.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from a3c_torch.config import Config, changed_settings, config_for_resume
from a3c_torch.errors import UsageError, require_writable
from a3c_torch.lr_schedule import rate_change_on_resume
from a3c_torch.storage.checkpoint import load_checkpoint, remove_stale_temp_files, resolve_checkpoint
from a3c_torch.storage.run_dir import run_dir_of, update_config, why_resume_elsewhere
from a3c_torch.storage.run_lock import RunLock, lock_run_dir


@dataclass
class ResumePlan:
    cfg: Config  # the saved config with the flags given now (a new run directory's RUNS_DIR included)
    checkpoint: dict  # loaded and checked (checkpoint.load_checkpoint)
    path: Path  # the checkpoint file
    run_dir: Path | None  # the run directory to continue in; None: a new one (why_elsewhere says why)
    lock: RunLock | None  # held on run_dir
    why_elsewhere: str | None
    changed_settings: list[str]  # 'name old -> new' for what the flags given now change

    @property
    def in_place(self) -> bool:
        return self.run_dir is not None

    @property
    def step(self) -> int:
        return int(self.checkpoint["global_step"])

    def announce(self, cfg: Config, start_step: int, num_workers: int) -> None:
        """The run's first lines about the resume; a run resumed in place gets its config.json
        rewritten with the settings `cfg` it goes on with (a new run directory was made with them)."""
        exact = sorted(rank for rank in self.checkpoint.get("worker_states") or {} if rank < num_workers)
        print(f"resuming at step {start_step:,}; workers continuing from their saved state: {exact or 'none (new seeds)'}", flush=True)
        if self.changed_settings:
            print(f"settings changed from step {start_step:,} on: {', '.join(self.changed_settings)}", flush=True)
            if self.in_place:
                update_config(self.run_dir, cfg)


def plan_resume(cfg: Config, explicit: set[str]) -> ResumePlan:
    path = resolve_checkpoint(cfg.resume)
    home = run_dir_of(path)
    # Locked before anything is read: the run's latest.pt must not change under us. A refusal (in
    # use, read-only) only counts if we continue there: a resume from an older checkpoint goes to
    # a new run directory and only reads this one.
    lock, refused = _try_lock(home)
    try:
        checkpoint = load_checkpoint(path, resumable=True)  # a policy file has no optimizer state to go on with
        resumed = config_for_resume(cfg, explicit, checkpoint)
        saved, step = Config.from_dict(checkpoint["config"]), int(checkpoint["global_step"])
        changed = changed_settings(saved, resumed) + rate_change_on_resume(saved, resumed, step)
        why_elsewhere = why_resume_elsewhere(path, home, step)
        if why_elsewhere is None:
            if refused is not None:
                raise refused
            require_writable(home / "checkpoints", "not writable")
            remove_stale_temp_files(home / "checkpoints")  # left by a kill during a write
            return ResumePlan(resumed, checkpoint, path, home, lock, None, changed)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if lock is not None:
        lock.release()  # the old run is only read: its checkpoints and curves stay as they are
    if home is not None and "runs_dir" not in explicit:
        resumed = dataclasses.replace(resumed, runs_dir=str(home.parent))  # beside the old run
    return ResumePlan(resumed, checkpoint, path, None, None, why_elsewhere, changed)


def _try_lock(run_dir: Path | None) -> tuple[RunLock | None, UsageError | None]:
    if run_dir is None:
        return None, None
    try:
        return lock_run_dir(run_dir), None
    except UsageError as refused:
        return None, refused


def restore_weights(checkpoint: dict, model, optimizer, path: str) -> None:
    """Load the checkpoint's model and optimizer state; one that does not fit is a UsageError."""
    try:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as exc:  # the layout itself was checked at load
        raise UsageError(f"--resume {path}: checkpoint does not fit this model: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}") from None
