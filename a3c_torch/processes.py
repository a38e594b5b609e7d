"""What every child process (worker or evaluator) does first, and how it reports a crash.

Children leave shutdown to the main process: they ignore SIGINT (a Ctrl-C in the terminal reaches
the whole process group) and watch the stop Event instead. If the trainer is killed outright, a
parent-death signal (Linux) and a parent-pid check in their loops end them, so no orphan keeps
burning CPU.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import traceback

import torch

_PR_SET_PDEATHSIG = 1


def setup_child(parent_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass  # no libc by that name: the parent-pid check still applies
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        sys.exit(1)
    # N workers on N cores: more than one intra-op thread each only makes them fight.
    torch.set_num_threads(1)


def parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid


def run_child(name: str, stats_queue, body, *args) -> None:
    """Run `body(*args)`; on any exception send its traceback to the trainer and exit 1."""
    try:
        body(*args)
    except BaseException as exc:  # noqa: BLE001 - report everything, then die non-zero
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        stats_queue.put(("error", name, traceback.format_exc()))
        stats_queue.close()
        stats_queue.join_thread()
        sys.exit(1)
