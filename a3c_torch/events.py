"""The TensorBoard event writer, guarded: a disk that fills up stops the curves, never the run.

SummaryWriter writes from a background thread. When a write fails (ENOSPC, EIO, a quota) that
thread dies with a traceback on stderr, and every later call of the writer raises the same
OSError in the caller: inside the trainer's loop, that would end training over a log file.
Here the first failure prints one line, the writer goes quiet and training (and checkpointing,
which reports its own failures) goes on. The thread's traceback is not printed: its error is
the one reported.
"""

from __future__ import annotations

import sys
import threading

from torch.utils.tensorboard import SummaryWriter

try:  # the writer thread's class, to recognise its errors (a private name: degrade gracefully)
    from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread
except ImportError:  # pragma: no cover - another tensorboard layout
    _AsyncWriterThread = None


def open_event_writer(run_dir, purge_step=None) -> "GuardedWriter":
    """A SummaryWriter for run_dir. At start-up a failure is the caller's to report (OSError)."""
    _quiet_writer_threads()
    return GuardedWriter(SummaryWriter(str(run_dir), purge_step=purge_step), run_dir)


class GuardedWriter:
    """SummaryWriter's methods, each of which turns an OSError into one warning, once."""

    def __init__(self, writer: SummaryWriter, run_dir):
        self._writer, self._run_dir = writer, run_dir
        self.failed = False
        self.last_step = None  # the last step an event was written for

    def __getattr__(self, name):
        method = getattr(self._writer, name)
        if not callable(method):
            return method

        def guarded(*args, **kwargs):
            if self.failed:
                return None
            try:
                result = method(*args, **kwargs)
            except OSError as exc:
                self._fail(exc)
                return None
            step = kwargs.get("global_step", args[2] if len(args) > 2 else None)
            if isinstance(step, int):
                self.last_step = step
            return result

        return guarded

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        reason = exc.strerror or str(exc) or type(exc).__name__
        reason = reason[:1].lower() + reason[1:]
        # Events are written asynchronously: the last few before the failure may be lost too.
        near = f" near step {self.last_step:,}" if self.last_step is not None else ""
        print(f"warning: TensorBoard events are no longer written to {self._run_dir} ({reason}); the curves end{near}, training and checkpoints go on", file=sys.stderr, flush=True)
        try:  # let the dead writer thread go; its file may be unwritable too
            self._writer.close()
        except Exception:  # noqa: BLE001 - it failed once already: nothing more to say
            pass


def _quiet_writer_threads() -> None:
    """Drop the traceback of a dying event-writer thread (its error reaches the writer's caller).
    Installed again whenever someone else replaced the hook since (pytest does, per test)."""
    if _AsyncWriterThread is None or getattr(threading.excepthook, "quiets_event_writers", False):
        return
    previous = threading.excepthook

    def hook(args):
        if isinstance(args.thread, _AsyncWriterThread) and issubclass(args.exc_type, OSError):
            return
        previous(args)

    hook.quiets_event_writers = True
    threading.excepthook = hook
