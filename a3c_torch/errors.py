"""Errors that are the user's to fix: the entry points print them as one line and exit 2."""

import os
import sys
from pathlib import Path

# The commands as `pip install .` names them (pyproject.toml's [project.scripts]).
INSTALLED_NAMES = {"train.py": "a3c-train", "evaluate.py": "a3c-evaluate"}


def program_name(script: str) -> str:
    """The command as the user ran it, for its messages: `a3c-train` once installed, else `train.py`."""
    installed = INSTALLED_NAMES[script]
    return installed if os.path.basename(sys.argv[0] or "") == installed else script


def command_line(script: str) -> str:
    """What to type to run the command again: `a3c-train` once installed, else `python train.py`."""
    name = program_name(script)
    return name if name != script else f"python {script}"


class UsageError(Exception):
    """A bad flag, path, env id or checkpoint. The message names what is wrong."""


def require_writable(folder: Path, what: str) -> None:
    """Raise a UsageError "FOLDER: WHAT (reason)" unless a file can be created in the folder.

    Tried up front, so a read-only or foreign folder is reported before any work is done, not
    when the first checkpoint or video is written.
    """
    probe = Path(folder) / f".write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{folder}: {what} ({exc.strerror or exc})") from None
