"""Console output that training does not depend on.

`python train.py | head -1` closes the pipe after one line; `> /dev/full` fails every write. Either
would raise in whatever print() came next (the progress bar, a checkpoint message) and stop the
run. `protect_console()` wraps stdout and stderr so that a failed write drops that stream's output
from then on and the run goes on (training, checkpoints and TensorBoard do not need a console).
"""

from __future__ import annotations

import io
import os
import sys


writes = 0  # every write through a guarded stream: the progress bar can tell whether it still is the last thing on screen


class GuardedStream(io.TextIOBase):
    """A text stream that forwards to `stream` until a write or flush fails, then drops output."""

    def __init__(self, stream, name: str, on_lost=None):
        self._stream = stream
        self.name = name
        self.lost = None  # the OSError that took the stream away
        self._on_lost = on_lost

    def write(self, text):
        global writes
        writes += 1
        if self.lost is None:
            try:
                self._stream.write(text)
                if "\n" in text or "\r" in text:  # line by line, also under a pipe: a lost line is noticed now
                    self._stream.flush()
            except (OSError, ValueError) as exc:  # ValueError: the stream was closed
                self._lose(exc)
        return len(text)

    def flush(self):
        if self.lost is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._lose(exc)

    def isatty(self):
        if self.lost is not None:
            return False
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self):
        return self._stream.fileno()

    def writable(self):
        return True

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self):
        return getattr(self._stream, "errors", "strict")

    def _lose(self, exc: BaseException) -> None:
        self.lost = exc
        # What is still buffered in the real stream would fail again when Python flushes it at
        # exit ("Exception ignored ... BrokenPipeError"): point its file descriptor at /dev/null.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
        if self._on_lost is not None:
            self._on_lost(self, exc)


_what_goes_on = "training"


def _tell_the_other_stream(stream: GuardedStream, exc: BaseException) -> None:
    other = sys.stderr if stream.name == "stdout" else sys.stdout
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    if other is not stream:
        print(f"warning: {stream.name} is gone ({reason}); {_what_goes_on} goes on without printing to it", file=other, flush=True)


def protect_console(what: str = "training") -> None:
    """Replace sys.stdout and sys.stderr with guarded streams (idempotent); `what` goes on."""
    global _what_goes_on
    _what_goes_on = what
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, GuardedStream):
            setattr(sys, name, GuardedStream(stream, name, on_lost=_tell_the_other_stream))
