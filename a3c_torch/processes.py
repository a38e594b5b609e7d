"""What every child process (worker or evaluator) does first, and how it reports a crash.

Children leave shutdown to the main process: they ignore SIGINT, SIGTERM and SIGHUP (a Ctrl-C in
the terminal, `timeout` or a job scheduler, a closed terminal signal the whole process group) and watch the stop flag
instead, so the trainer can stop them in order and write its final checkpoint. If the trainer is
killed outright, a parent-death signal (Linux, SIGKILL) and a parent-pid check in their loops end
them, so no orphan keeps burning CPU.

Both must hold from a child's first moment, not from its entry point: a spawned child spends
seconds unpickling its arguments, which imports torch, gymnasium and the worker module, before
its target runs. So:
- the trainer starts its children with those signals blocked (`start_children`): the mask
  survives fork and exec, so a Ctrl-C during a child's interpreter start-up waits, and is then
  dropped when the child ignores it;
- every child's target is `child_main`, from this module (which imports nothing heavy), and its
  first argument a `ChildStart`, whose unpickling calls `arm_child`: ignore the signals, set the
  parent-death signal, check the trainer is still there. Pickle rebuilds arguments in order, so
  this runs before the other arguments (the model's tensors, the worker's function) import torch.

The trainer is named by its pid: under the forkserver start method a child's parent is the fork
server (a child of the trainer), so "my parent, or my parent's parent, is the trainer" is the check.
The server exits when the trainer dies, and its children then get their parent-death signal.

Each child also names itself (`a3c-worker-0`, `a3c-evaluator`) so `ps`, `top` and
benchmarks/soak.py can tell the processes apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import sys
import time
import traceback

from a3c_torch.errors import UsageError
from a3c_torch.messages import ChildFailed

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
# What a terminal (Ctrl-C; SIGHUP when it is closed), `timeout` or a scheduler sends the whole
# process group; the trainer handles them.
CHILD_IGNORES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_trainer_pid = None  # set in a child by arm_child


def _prctl(option: int, value) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, value)
        except OSError:
            pass  # no libc by that name: the parent-pid check still applies


def set_process_name(name: str) -> None:
    """The name `ps -o comm` and /proc/<pid>/comm show (Linux keeps 15 bytes)."""
    _prctl(_PR_SET_NAME, ("a3c-" + name.replace(" ", "-")).encode()[:15])


class ChildStart:
    """The first argument of every child process. Unpickling it in the child arms the child
    (`arm_child`) before the arguments after it are unpickled, and so before torch is imported."""

    def __init__(self, trainer_pid: int):
        self.trainer_pid = trainer_pid

    def __reduce__(self):
        return (arm_child, (self.trainer_pid,))


def arm_child(trainer_pid: int) -> ChildStart:
    """Ignore the group's signals, die with the trainer, and exit now if it is gone already."""
    global _trainer_pid
    for signum in CHILD_IGNORES:
        signal.signal(signum, signal.SIG_IGN)  # also drops one that arrived while they were blocked
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_IGNORES)  # blocked by start_children
    # SIGKILL, not SIGTERM: children ignore SIGTERM, and an orphan has nobody to report to anyway.
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _let_the_forkserver_go()
    if not parent_alive(trainer_pid):  # the trainer died before the signal was armed
        os._exit(1)
    _trainer_pid = trainer_pid
    return ChildStart(trainer_pid)


def _let_the_forkserver_go() -> None:
    """Under forkserver: close our copy of the server's "alive" pipe. The server exits when every
    holder of that pipe has closed it; children of ours start no processes, so with only the
    trainer holding it the server dies with the trainer, and we with the server (parent-death signal)."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None and getattr(server, "_forkserver_pid", None) is None:  # set only in the trainer
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def child_main(start: ChildStart, body, *args) -> None:
    """Every child's process target: `body(*args)` (a context object: child_context.py), once the child is armed."""
    arm_child(start.trainer_pid)  # again: with the fork start method nothing was unpickled
    body(*args)


@contextlib.contextmanager
def group_signals_blocked():
    """CHILD_IGNORES blocked while processes are started: they inherit the mask."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_IGNORES) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a signal that came meanwhile is handled now


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (it unlinks the semaphores of the queues and shared
    counters) before anything needs it, with the group's signals blocked. It ignores SIGINT and
    SIGTERM itself but not SIGHUP: a closed terminal would kill it, and the next semaphore freed
    prints a relaunch warning and KeyError tracebacks. It only unblocks the two it ignores, so
    SIGHUP stays blocked in it; it exits when the trainer does (its pipe closes)."""
    from multiprocessing import resource_tracker

    with group_signals_blocked(), tracker_leak_warning_off():
        resource_tracker.ensure_running()


def start_children(processes: dict) -> None:
    """Start the trainer's children (name -> Process), with the signals they ignore blocked until
    each has armed itself; a process the OS refuses (a pid limit) is a one-line UsageError."""
    with group_signals_blocked():
        for name, process in processes.items():
            try:
                process.start()
            except OSError as exc:  # BlockingIOError (EAGAIN) under a pid limit, ENOMEM, ...
                workers = sum(key.startswith("worker") for key in processes)
                raise UsageError(f"--num-processes {workers}: the system refused to start {name} ({exc.strerror or exc}); use fewer processes") from None


def setup_child(trainer_pid: int) -> None:
    """At the start of a child's body: armed (again), and one intra-op thread."""
    arm_child(trainer_pid)
    import torch  # here, not at the top: this module is what a child imports first

    # N workers on N cores: more than one intra-op thread each only makes them fight.
    torch.set_num_threads(1)


def _parent_of(pid: int) -> int | None:
    """The parent pid of process `pid` (Linux /proc), None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def parent_alive(trainer_pid: int) -> bool:
    """Is the process that started us (the trainer, or evaluate.py's main process) still there: our
    parent (spawn, fork), or our parent's parent (forkserver: the server is the trainer's child). An
    orphan has been reparented, so neither."""
    parent = os.getppid()
    return parent == trainer_pid or _parent_of(parent) == trainer_pid


def run_child(name: str, to_main, body, *args) -> None:
    """Run `body(*args)`; on any exception send its traceback to the main process (a ChildFailed on
    the queue `to_main`) and exit 1."""
    set_process_name(name)
    trainer_pid = _trainer_pid if _trainer_pid is not None else os.getppid()
    try:
        body(*args)
    except BaseException as exc:  # noqa: BLE001 - report everything, then die non-zero
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        to_main.put(ChildFailed(name, traceback.format_exc()))
        if parent_alive(trainer_pid):
            to_main.close()
            to_main.join_thread()  # the traceback must be in the pipe before we exit
        sys.exit(1)
    finally:
        if not parent_alive(trainer_pid):
            # Nobody reads the queue any more: flushing it at exit could block forever.
            to_main.cancel_join_thread()


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
    """The global agent-step count, and the count of updates applied to the shared model (int64s
    in shared memory). The update count measures staleness: a worker that copied the weights when
    it stood at n, and whose own update makes it m, stepped on weights m - 1 - n updates old.

    Increments take the lock (unlocked `+=` from several processes loses updates); reads do
    not, so the trainer can never block on a lock that a killed worker died holding.
    """

    def __init__(self, ctx, start: int = 0):
        self._value = ctx.Value(ctypes.c_int64, start)
        self._updates = ctx.Value(ctypes.c_int64, 0)

    def add(self, steps: int) -> int:
        with self._value.get_lock():
            self._value.value += steps
            return self._value.value

    @property
    def value(self) -> int:
        return self._value.get_obj().value

    def add_update(self) -> int:
        """Count one update of the shared model; returns the count including it."""
        with self._updates.get_lock():
            self._updates.value += 1
            return self._updates.value

    @property
    def updates(self) -> int:
        return self._updates.get_obj().value


class Children:
    """The trainer's child processes by name ("worker 0", "evaluator"): started with the group's
    signals blocked, watched for a death, read, and stopped within a bounded time, whatever happens."""

    def __init__(self):
        self.processes: dict = {}

    def read(self, inbox, timeout: float):
        """The messages on the queue `inbox` for up to `timeout` seconds (none left: sooner)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                yield inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            except Exception as exc:  # noqa: BLE001 - e.g. tensors from a child that has exited since
                print(f"warning: lost a message from a child process ({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)

    def add(self, ctx, body, context) -> None:
        """A child (not started yet) that runs `body(context)` once armed; context.name names it."""
        process_name = "a3c-" + context.name.replace(" ", "-")
        self.processes[context.name] = ctx.Process(target=child_main, args=(ChildStart(os.getpid()), body, context), name=process_name, daemon=True)

    def start(self) -> None:
        start_children(self.processes)

    def first_dead(self) -> tuple[str, str] | None:
        """(name, how it died) of a child that exited non-zero, else None."""
        for name, process in self.processes.items():
            code = process.exitcode
            if code not in (None, 0):
                how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                return name, f"{name} died ({how}) without a traceback"
        return None

    def workers_finished(self) -> bool:
        """Every worker has exited (each stops on its own at --max-steps)."""
        workers = [p for name, p in self.processes.items() if name.startswith("worker")]
        return bool(workers) and not any(p.is_alive() for p in workers)

    def kill_now(self) -> None:
        """SIGKILL every running child (they would die with the trainer anyway: parent-death signal)."""
        for process in self.processes.values():
            if process.pid is not None and process.exitcode is None:
                os.kill(process.pid, signal.SIGKILL)

    def stop(self, stop_flag: "StopFlag", drain, timeout: float) -> None:
        """Set the stop flag and wait up to `timeout` seconds for the children to exit, reading
        their messages meanwhile (`drain(seconds)`: a child cannot exit before its queue is
        flushed); then kill the stragglers."""
        stop_flag.set()
        deadline = time.monotonic() + timeout
        started = [p for p in self.processes.values() if p.pid is not None]
        while any(p.is_alive() for p in started) and time.monotonic() < deadline:
            drain(0.1)
        for process in started:
            if process.is_alive():  # children ignore SIGTERM: a straggler is killed
                process.kill()
            process.join()
        drain(0.1)  # what the children flushed just before exiting (worker states)


@contextlib.contextmanager
def tracker_leak_warning_off():
    """Start multiprocessing's resource tracker without its "leaked semaphore objects" warning.
    A trainer that exits at once (a second Ctrl-C) or is killed leaves its semaphores to the
    tracker, which removes them, as designed, and then warns as if that were a bug. The tracker
    takes its warning filters from PYTHONWARNINGS when it starts, so the filter is set only then."""
    previous = os.environ.get("PYTHONWARNINGS")
    ours = "ignore::UserWarning:multiprocessing.resource_tracker"
    os.environ["PYTHONWARNINGS"] = f"{previous},{ours}" if previous else ours
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = previous
