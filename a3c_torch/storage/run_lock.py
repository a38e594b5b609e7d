"""One trainer per run directory: an exclusive advisory lock (flock) on RUN/.lock while it trains.

Two trainers in one run directory would both write latest.pt and interleave their event files.
The kernel drops a flock when its holder exits, however it exits (kill -9 and the OOM killer
included), so a lock never outlives its trainer and never needs cleaning up by hand. The file
itself stays: deleting it would let a third trainer lock a fresh file while the second holds the
old one. It holds the holder's pid and host, for the message that refuses a second trainer.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from a3c_torch.errors import UsageError

LOCK_NAME = ".lock"


class RunDirInUse(UsageError):
    """Another process holds the run directory's lock."""


class RunLock:
    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None

    __del__ = release  # a trainer that failed to start (a bad flag after the lock) lets go too


def lock_run_dir(run_dir: str | os.PathLike) -> RunLock:
    """Lock a run directory for this process, or raise RunDirInUse naming the holder."""
    path = Path(run_dir) / LOCK_NAME
    try:
        # O_CLOEXEC: spawned children and subprocesses do not inherit it (they must not hold the
        # run after the trainer is gone). Forked children do, until they exit (with the trainer).
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"{run_dir}: not writable, cannot lock the run directory ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunDirInUse(f"{run_dir}: the run directory is in use by another train.py{f' ({holder})' if holder else ''}; stop that one first, or wait for it to finish") from None
    except OSError as exc:  # e.g. ENOLCK: a file system without locks
        os.close(fd)
        raise UsageError(f"{run_dir}: cannot lock the run directory ({exc.strerror})") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same, only the message will name no holder
    return RunLock(fd, path)


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""
