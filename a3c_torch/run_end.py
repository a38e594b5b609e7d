"""How a training run ends: the signals that stop it, its exit codes and its last lines."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from a3c_torch.storage.checkpoint_files import CheckpointFiles
from a3c_torch.storage.run_dir import resume_command

EXIT_OK, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM, EXIT_SIGHUP = 0, 1, 130, 143, 129
# Each stops the run the same way (final checkpoint with the workers' states, the resume hint):
# Ctrl-C, `kill`/`timeout`/a scheduler, and a closed terminal or a dropped SSH session.
STOP_SIGNALS = {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM, signal.SIGHUP: EXIT_SIGHUP}
# A failure is (what failed, the detail: a traceback or a sentence).
DIVERGED = ("training", "the shared model's weights are no longer finite (NaN or inf): the run diverged; try a lower --lr. "
            "Checkpoints are only written with finite weights, so latest.pt (if any) holds the last good ones.")


@contextlib.contextmanager
def stop_signals_handled(handler):
    """`handler` for the STOP_SIGNALS while the block runs (final checkpoint included, so a second
    Ctrl-C always works). Under `nohup` SIGHUP is ignored on purpose, so that the run outlives its
    terminal: it stays so."""
    handled = [s for s in STOP_SIGNALS if not (s == signal.SIGHUP and signal.getsignal(s) is signal.SIG_IGN)]
    previous = {s: signal.signal(s, handler) for s in handled}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def say_stopping(signum: int) -> None:
    print(f"\n{signal.Signals(signum).name}: stopping workers and writing a final checkpoint (Ctrl-C again to exit at once)", file=sys.stderr, flush=True)


def exit_at_once(children) -> None:
    """A second Ctrl-C: kill the children (they would die with us anyway) and exit, no checkpoint."""
    print("\nsecond Ctrl-C: exiting now without a final checkpoint", file=sys.stderr, flush=True)
    children.kill_now()
    os._exit(EXIT_SIGINT)


def with_divergence(failure, model_is_finite: bool):
    """The failure to report, DIVERGED said once (also when the watch loop found it already)."""
    if failure == DIVERGED or model_is_finite:
        return failure
    return DIVERGED if failure is None else (failure[0], f"{failure[1]}\n{DIVERGED[1]}")


def report(failure, step: int, saved: bool, run_dir: Path, checkpoints: CheckpointFiles, stop_signal: int | None) -> int:
    """The last lines of a run, and its exit code; an unwritten final checkpoint is an error, said last."""
    folder = run_dir / "checkpoints"
    if failure:
        name, detail = failure
        kept = f"its checkpoint is in {folder}" if saved else "its final checkpoint was not written (see the last line)"
        print(f"error: {name} failed; the run stopped at step {step:,} and {kept}\n{detail}", file=sys.stderr, flush=True)
    if not saved:
        print(checkpoints.last_good(step), file=sys.stderr, flush=True)
    if failure or not saved:
        return EXIT_FAILED
    if stop_signal is not None:
        print(f"stopped at step {step:,}; resume with: {resume_command(run_dir)}", flush=True)
        return STOP_SIGNALS[stop_signal]
    print(f"done: {step:,} steps; checkpoints in {folder}", flush=True)
    return EXIT_OK
