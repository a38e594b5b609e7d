"""A run directory (RUNS_DIR/<env>__<exp-name>__<seed>__<date-time>): its name and creation, the
run a checkpoint file belongs to, and whether a resume may continue in it."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from a3c_torch.checkpoint import load_checkpoint
from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.run_name import check_exp_name, run_dir_name


def create_run_dir(cfg: Config) -> Path:
    """A new run directory with its config.json; any failure (unwritable, disk full) is a UsageError."""
    check_exp_name(cfg)  # train.py checked it already; a resume to a new directory or a distributed node had not
    runs = Path(cfg.runs_dir)
    try:
        runs.mkdir(parents=True, exist_ok=True)
        base = runs / run_dir_name(cfg)
        run_dir, suffix = base, 1
        while run_dir.exists():
            suffix += 1
            run_dir = base.with_name(f"{base.name}-{suffix}")
        (run_dir / "checkpoints").mkdir(parents=True)
        write_config(run_dir, cfg)
    except OSError as exc:
        raise UsageError(f"--runs-dir {cfg.runs_dir}: cannot create a run directory there ({exc.strerror})") from None
    return run_dir


def resume_command(run_dir: Path) -> str:
    """The command that continues a run, ready to paste: the path shell-quoted (spaces, quotes)."""
    return f"python train.py --resume {shlex.quote(str(run_dir))}"


def write_config(run_dir: Path, cfg: Config) -> None:
    """config.json: the run's settings as they are now (a resume that changes flags rewrites it);
    written whole or not at all."""
    temp = run_dir / "config.json.tmp"
    temp.write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    os.replace(temp, run_dir / "config.json")


def update_config(run_dir: Path, cfg: Config) -> None:
    """Rewrite a resumed run's config.json with the settings it goes on with; a failure only warns."""
    try:
        write_config(run_dir, cfg)
    except OSError as exc:
        print(f"warning: {run_dir / 'config.json'} still shows the old settings: {exc.strerror or exc}", file=sys.stderr, flush=True)


def run_dir_of(checkpoint: Path) -> Path | None:
    """The run directory a checkpoint file belongs to (RUN/checkpoints/NAME.pt), or None."""
    folder = checkpoint.parent
    if folder.name == "checkpoints" and (folder.parent / "config.json").is_file():
        return folder.parent
    return None


def step_of(path: Path) -> int | None:
    """The global step of a checkpoint file; None if there is none (or it is unreadable)."""
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
