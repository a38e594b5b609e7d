"""Errors that are the user's to fix: the entry points print them as one line and exit 2."""

import os
from pathlib import Path


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
