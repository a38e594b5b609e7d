"""Files written whole or not at all, and paths that are not regular files.

A plain `open(path, "w").write(...)` truncates the file first: on a full disk (or a kill) that
leaves a 0-byte or cut file where a good one was. `write_atomically` writes a temporary file in
the same folder, fsyncs it, renames it over the target and fsyncs the folder, so the target is
the old file or the new one, whole, even after a power cut.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from a3c_torch.errors import UsageError, require_writable


def special_file_kind(path: Path) -> str | None:
    """What an existing path is when it is neither a regular file nor a directory ("a FIFO",
    "a character device", ...), else None. Opening a FIFO blocks until someone writes to it, and
    a device may never end."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), None)


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable (the entry lives in the folder's data)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class NotDurable(OSError):
    """The new file is in place, but its folder could not be fsynced: a power cut before the
    system writes the folder back could still bring the old file back."""


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data`, whole or not at all; an OSError leaves the old file as it was,
    except NotDurable, raised when only the final fsync of the folder failed.

    A pipe or a device (`--json /dev/stdout`, a shell's `>(...)`) cannot be replaced: it is
    written to directly. A symlink is followed: its target is replaced, the link stays.
    """
    path = Path(path)
    if special_file_kind(path) is not None:
        with open(path, "wb") as f:
            f.write(data)
        return
    if path.is_symlink():
        path = path.resolve()
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # a full disk can fail here too, not only in write
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    try:
        fsync_dir(path.parent)
    except OSError as exc:
        raise NotDurable(exc.errno, exc.strerror) from exc


def check_destination(path: str | os.PathLike, flag: str) -> None:
    """Before any work: `path` can be written by write_atomically (its folder exists, or is made
    now, and takes new files), or is a pipe or device that is written directly. Else a UsageError
    naming `flag`, so that a read-only folder is not found out after every game was played."""
    path = Path(path)
    if special_file_kind(path) is not None:
        return
    if path.is_dir():
        raise UsageError(f"{path}: {flag} needs a file name, and this is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path}: cannot create the folder for {flag} ({exc.strerror or exc})") from None
    require_writable(path.parent, f"{flag} cannot write there")  # the temp file is made in this folder
