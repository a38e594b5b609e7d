"""What every child process (worker or evaluator) does first, and how it reports a crash.

Children leave shutdown to the main process: they ignore SIGINT and SIGTERM (a Ctrl-C in the
terminal, `timeout`, or a job scheduler signal the whole process group) and watch the stop flag
instead, so the trainer can stop them in order and write its final checkpoint. If the trainer is
killed outright, a parent-death signal (Linux, SIGKILL) and a parent-pid check in their loops end
them, so no orphan keeps burning CPU.

Each child also names itself (`a3c-worker-0`, `a3c-evaluator`) so `ps`, `top` and
benchmarks/soak.py can tell the processes apart.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback

import torch

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def _prctl(option: int, value) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value)
        except OSError:
            pass  # no libc by that name: the parent-pid check still applies


def set_process_name(name: str) -> None:
    """The name `ps -o comm` and /proc/<pid>/comm show (Linux keeps 15 bytes)."""
    _prctl(_PR_SET_NAME, ("a3c-" + name.replace(" ", "-")).encode()[:15])


def setup_child(parent_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # SIGKILL, not SIGTERM: children ignore SIGTERM, and an orphan has nobody to report to anyway.
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        sys.exit(1)
    # N workers on N cores: more than one intra-op thread each only makes them fight.
    torch.set_num_threads(1)


def parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid


def run_child(name: str, stats_queue, body, *args) -> None:
    """Run `body(*args)`; on any exception send its traceback to the trainer and exit 1."""
    set_process_name(name)
    parent_pid = os.getppid()
    try:
        body(*args)
    except BaseException as exc:  # noqa: BLE001 - report everything, then die non-zero
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        stats_queue.put(("error", name, traceback.format_exc()))
        if parent_alive(parent_pid):
            stats_queue.close()
            stats_queue.join_thread()  # the traceback must be in the pipe before we exit
        sys.exit(1)
    finally:
        if not parent_alive(parent_pid):
            # Nobody reads the queue any more: flushing it at exit could block forever.
            stats_queue.cancel_join_thread()


class StopFlag:
    """A lock-free stop signal shared by all processes.

    Not a multiprocessing Event on purpose: Event.set() waits for every process sleeping in
    Event.wait() to acknowledge, so a child killed while waiting (a SIGTERM sent to the whole
    process group does that) would hang the trainer forever. A shared bool cannot deadlock.
    """

    def __init__(self, ctx):
        self._flag = ctx.RawValue(ctypes.c_bool, False)

    def set(self) -> None:
        self._flag.value = True

    def is_set(self) -> bool:
        return self._flag.value

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._flag.value and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        return self._flag.value


class StepCounter:
    """The global agent-step count (int64 in shared memory).

    Increments take the lock (unlocked `+=` from several processes loses updates); reads do
    not, so the trainer can never block on a lock that a killed worker died holding.
    """

    def __init__(self, ctx, start: int = 0):
        self._value = ctx.Value(ctypes.c_int64, start)

    def add(self, steps: int) -> int:
        with self._value.get_lock():
            self._value.value += steps
            return self._value.value

    @property
    def value(self) -> int:
        return self._value.get_obj().value
