"""A run directory (RUNS_DIR/<env>__<exp-name>__<seed>__<date-time>): its name and creation, the
run a checkpoint file belongs to, and whether a resume may continue in it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from a3c_torch.config import Config
from a3c_torch.errors import UsageError, command_line
from a3c_torch.storage.checkpoint import load_checkpoint
from a3c_torch.storage.files import NotDurable, fsync_dir, write_atomically
from a3c_torch.storage.run_lock import LOCK_NAME
from a3c_torch.storage.run_name import check_exp_name, run_dir_name


def create_run_dir(cfg: Config) -> Path:
    """A new run directory with its config.json, synced to disk; any failure (unwritable, disk
    full) is a UsageError, and leaves no half-made directory."""
    check_exp_name(cfg)  # train.py checked it already; a resume to a new directory or a distributed node had not
    runs = Path(cfg.runs_dir)
    # Every folder made here must be synced into its parent: from runs up to the first that exists.
    to_sync = [runs.absolute()]
    while not to_sync[-1].exists() and to_sync[-1] != to_sync[-1].parent:
        to_sync.append(to_sync[-1].parent)
    made = None
    try:
        runs.mkdir(parents=True, exist_ok=True)
        base = runs / run_dir_name(cfg)
        suffix = 1
        while made is None:
            run_dir = base if suffix == 1 else base.with_name(f"{base.name}-{suffix}")
            try:
                run_dir.mkdir()
                made = run_dir
            except FileExistsError:  # another run started in the same second
                suffix += 1
        (run_dir / "checkpoints").mkdir()
        write_config(run_dir, cfg)  # also syncs run_dir: config.json's and checkpoints/'s entries
    except OSError as exc:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise UsageError(f"--runs-dir {cfg.runs_dir}: cannot create a run directory there ({exc.strerror})") from None
    try:
        # A new directory's entry lives in its parent: without this a power cut can lose the
        # whole run, checkpoints fsynced inside it included.
        for folder in to_sync:
            fsync_dir(folder)
    except OSError as exc:
        print(f"warning: {run_dir} could not be synced to disk ({exc.strerror or exc}); training goes on, but a power cut may lose the run directory", file=sys.stderr, flush=True)
    return run_dir


def resume_command(run_dir: Path) -> str:
    """The command that continues a run, ready to paste: the path shell-quoted (spaces, quotes)."""
    return f"{command_line('train.py')} --resume {shlex.quote(str(run_dir))}"


def write_config(run_dir: Path, cfg: Config) -> None:
    """config.json: the run's settings as they are now (a resume that changes flags rewrites it);
    written whole or not at all, and synced (files.write_atomically)."""
    try:
        write_atomically(run_dir / "config.json", (json.dumps(cfg.to_dict(), indent=2) + "\n").encode())
    except NotDurable as exc:  # written; only the sync of the folder failed
        print(f"warning: {run_dir / 'config.json'} is written but could not be synced to disk ({exc.strerror or exc})", file=sys.stderr, flush=True)


def update_config(run_dir: Path, cfg: Config) -> None:
    """Rewrite a resumed run's config.json with the settings it goes on with; a failure only warns."""
    try:
        write_config(run_dir, cfg)
    except OSError as exc:
        print(f"warning: {run_dir / 'config.json'} still shows the old settings: {exc.strerror or exc}", file=sys.stderr, flush=True)


def run_dir_of(checkpoint: Path) -> Path | None:
    """The run directory a checkpoint file belongs to (RUN/checkpoints/NAME.pt), or None. A run
    directory that lost its config.json is a UsageError: resuming it would quietly start a new run
    elsewhere (in ./runs) instead of continuing this one."""
    folder = checkpoint.parent
    if folder.name != "checkpoints":
        return None
    run = folder.parent
    if (run / "config.json").is_file():
        return run
    if (run / LOCK_NAME).exists() or any(run.glob("events.out.tfevents.*")):  # a run's, not any folder named checkpoints
        raise UsageError(f"{run}: this run directory has no config.json (deleted, or not copied with the run), so it cannot be continued; put config.json back, or copy the checkpoint out of checkpoints/ to start a new run from it")
    return None


def step_of(path: str | os.PathLike) -> int | None:
    """The global step of a checkpoint file; None if there is none (or it is unreadable)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return int(load_checkpoint(path)["global_step"])
    except (UsageError, TypeError, ValueError):
        return None


def why_resume_elsewhere(checkpoint_path: Path, home: Path | None, step: int) -> str | None:
    """None if a resume from this checkpoint (at `step`) may continue in its own run directory
    `home`; else why it goes to a new one: the file is not in a run directory, or continuing
    there would overwrite a newer latest.pt (a resume in place drops the events after its step)."""
    if home is None:
        return "it is not in a run directory (RUN/checkpoints/)"
    latest = home / "checkpoints" / "latest.pt"
    if latest.exists() and latest.samefile(checkpoint_path):
        return None
    newer = step_of(latest)
    if newer is not None and newer >= step:
        return f"the run's latest.pt is newer (step {newer:,}) and is kept, with the run's curves"
    return None
