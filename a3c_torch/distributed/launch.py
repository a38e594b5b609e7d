"""`python -m a3c_torch.distributed.launch`: torchrun, with the same flags and command line, that
reports the world's failures in one line each instead of torchrun's tracebacks and C++ frames.

    python -m a3c_torch.distributed.launch --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d \\
        --rdzv-endpoint=10.0.0.1:29400 --rdzv-id=pong-1 -m a3c_torch.distributed --env-id ALE/Pong-v5

What it adds to torchrun (which runs in this process, unchanged):
- while no node process runs (the rendezvous has not completed), a line every WAIT_NOTICE_S
  seconds names the endpoint it waits for; torchrun gives up after the rendezvous timeouts, and
  that is one line and exit code 1;
- a rendezvous that breaks while training (its store lives in rank 0's launcher: rank 0's
  machine is gone) is one line and exit code 1;
- a node process that fails has said why itself: the launcher exits with its exit code (a
  signal that killed it is named), and Ctrl-C or SIGTERM exits 130 or 143 like train.py, after
  the node processes stopped cleanly.
Set LOGLEVEL=INFO (torchrun's Python logs) or TORCH_CPP_LOG_LEVEL=INFO (its C++ logs) to see
what torchrun says.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

# Before torch is imported: its loggers read these once. Left at their defaults they print pages
# of C++ frames for a refused connection, and tracebacks for conditions reported here in one line.
os.environ.setdefault("LOGLEVEL", "CRITICAL")
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # torchrun warns when it sets it for the nodes itself

WAIT_NOTICE_S = 30.0  # a launcher with no node process running says what it waits for this often
PROG = "a3c_torch.distributed.launch"
EXIT_BARRIER_S = 300  # torchrun's agents wait this long for each other after a run (not a torchrun flag)


def has_child_process() -> bool:
    """Whether torchrun has started a node process (Linux: this process's children)."""
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as children:
                if children.read().strip():
                    return True
        except OSError:
            continue
    return False


class RendezvousWatch(threading.Thread):
    """Says what this launcher waits for while no node process runs (a wrong endpoint, a node
    not started yet, a port that a firewall drops), where torchrun says nothing; and remembers
    whether a node process ever ran, which tells a lost rendezvous from one never reached."""

    def __init__(self, endpoint: str, nnodes: str, rdzv_id: str):
        super().__init__(name="rendezvous-watch", daemon=True)
        self.endpoint, self.nnodes, self.rdzv_id = endpoint, nnodes, rdzv_id
        self.node_started = False
        self.done = threading.Event()

    def run(self) -> None:
        waiting_since = time.monotonic()
        while not self.done.wait(0.5):
            if has_child_process():
                self.node_started = True
                waiting_since = time.monotonic()
                continue
            waited = time.monotonic() - waiting_since
            if waited < WAIT_NOTICE_S:
                continue
            if not self.node_started:
                print(f"{PROG}: waiting {waited:.0f} s for the rendezvous at {self.endpoint} ({self.nnodes} nodes, --rdzv-id {self.rdzv_id}): "
                      "is every node started with this --rdzv-endpoint and --rdzv-id, and is the port reachable?", file=sys.stderr, flush=True)
            else:  # after a run: torchrun's exit barrier waits for every launcher, 300 s at most
                print(f"{PROG}: the node process ended {waited:.0f} s ago; torchrun waits for the other nodes' launchers at {self.endpoint} "
                      f"(its exit barrier, {EXIT_BARRIER_S} s or more after a run when a node left; Ctrl-C ends the wait)", file=sys.stderr, flush=True)
            waiting_since = time.monotonic()


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def rendezvous_failure(exc: BaseException, endpoint: str, started: bool) -> str:
    from torch.distributed.elastic.rendezvous.api import RendezvousClosedError, RendezvousConnectionError, RendezvousTimeoutError

    if isinstance(exc, RendezvousConnectionError) and started:
        return f"lost the rendezvous at {endpoint}: rank 0's launcher holds it, so rank 0's machine is gone or unreachable"
    if isinstance(exc, RendezvousConnectionError):
        cause = f" ({first_line(exc.__cause__).rstrip('.')})" if exc.__cause__ is not None else ""
        return f"cannot reach the rendezvous at {endpoint}{cause}: check --rdzv-endpoint and that rank 0's launcher runs"
    if isinstance(exc, RendezvousTimeoutError):
        return f"gave up waiting for the rendezvous at {endpoint}: not every node came within its join_timeout (--rdzv-conf join_timeout=SECONDS, 600 by default)"
    if isinstance(exc, RendezvousClosedError):
        return f"the rendezvous at {endpoint} is closed: the run has ended, or another node gave up"
    return f"the rendezvous at {endpoint} failed: {first_line(exc)}"


def exit_code_of(failure) -> int:
    """A node process's exit code as a shell reports it: 128 + the signal that killed it."""
    return 128 - failure.exitcode if failure.exitcode < 0 else failure.exitcode


def main(argv=None) -> int:
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError

    # torchrun's error lines come from loggers without a level of their own: quiet them too.
    logging.getLogger("torch.distributed.elastic").setLevel(os.environ["LOGLEVEL"])
    args = torchrun.parse_args(sys.argv[1:] if argv is None else argv)
    endpoint = "this machine (--standalone)" if args.standalone else torchrun.get_rdzv_endpoint(args)
    watch = RendezvousWatch(endpoint, args.nnodes, args.rdzv_id)
    watch.start()
    try:
        torchrun.run(args)
        return 0
    except ChildFailedError as failed:
        rank, failure = failed.get_first_failure()
        if failure.exitcode < 0:  # killed: the node could not say so itself
            name = signal.Signals(-failure.exitcode).name
            print(f"{PROG}: node process of global rank {rank} (pid {failure.pid}) was killed by {name}", file=sys.stderr, flush=True)
        return exit_code_of(failure)
    except SignalException as stopped:
        # torchrun passed the signal on and waited for the node processes: they stopped as
        # train.py does (final checkpoint, resume hint), and said so.
        return 128 + int(stopped.sigval)
    except RendezvousError as exc:
        print(f"{PROG}: error: {rendezvous_failure(exc, endpoint, watch.node_started)}", file=sys.stderr, flush=True)
        return 1
    finally:
        watch.done.set()


if __name__ == "__main__":
    sys.exit(main())
