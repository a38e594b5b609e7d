"""The run's single TensorBoard writer and progress display, fed by the children's messages.

Only the main process writes event files. The x axis of every curve is the global agent step
count (Atari frames = steps x frame-skip).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections import deque
from typing import Callable

import numpy as np
from torch.utils.tensorboard.summary import hparams
from tqdm import tqdm

from a3c_torch import console
from a3c_torch.events import open_event_writer
from a3c_torch.messages import Episode, Evaluation, Losses

# The tag of each Losses field (messages.py); losses/staleness: other workers' updates that landed
# between a worker's copy of the shared weights and its own update to them (about N - 1 with N workers).
LOSS_TAGS = {"losses/policy_loss": "policy_loss", "losses/value_loss": "value_loss", "losses/entropy": "entropy",
             "losses/grad_norm": "grad_norm", "losses/staleness": "staleness"}
BEST_EVAL_TAG = "eval/best_episodic_return"  # written at each evaluation the evaluator calls a new best
HPARAMS_METRICS = ("eval/episodic_return", BEST_EVAL_TAG)
# Settings that say where and how a run is kept, not how it learns: not HParams columns.
NOT_HYPERPARAMETERS = ("runs_dir", "resume", "log_interval", "checkpoint_interval")


class Metrics:
    def __init__(self, run_dir, config: dict, start_step: int, max_steps: int, learning_rate: Callable[[int], float], log_interval: float, resumed: bool, sps_window: float = 1.0):
        # purge_step drops events a killed run wrote after its last checkpoint, so resumed
        # curves continue from the checkpoint instead of doubling back.
        # No run directory (a distributed node other than rank 0): progress only, no event files.
        # A full disk under the event files stops the curves with one line, not the run (events.py).
        self.writer = open_event_writer(run_dir, purge_step=start_step if resumed else None) if run_dir is not None else _NoEvents()
        self.learning_rate = learning_rate  # of the global step (a schedule may change it)
        self.recent_returns: deque = deque(maxlen=100)
        self.episodes = 0
        self.skipped_updates = 0
        self.log_interval = log_interval
        self.sps_window = sps_window
        self.start_step = start_step
        self.max_steps = max_steps
        self._last_time, self._last_step = time.monotonic(), start_step
        self._last_log = time.monotonic()
        self.progress = Progress(start_step, max_steps)
        if not resumed:
            self.writer.add_text("hyperparameters", hyperparameter_table(config), global_step=start_step)
            self._write_hparams(config)

    def handle(self, message: Episode | Losses | Evaluation) -> None:
        step = message.step
        if isinstance(message, Episode):
            self.episodes += 1
            self.recent_returns.append(message.episode_return)
            self.writer.add_scalar("charts/episodic_return", message.episode_return, step)
            self.writer.add_scalar("charts/episodic_length", message.length, step)
        elif isinstance(message, Losses):
            for tag, name in LOSS_TAGS.items():
                self.writer.add_scalar(tag, getattr(message, name), step)
            self.skipped_updates += message.skipped
            self.writer.add_scalar("losses/skipped_updates", self.skipped_updates, step)
        elif isinstance(message, Evaluation):
            self.writer.add_scalar("eval/episodic_return", message.mean, step)
            self.writer.add_scalar("eval/episodic_return_std", message.std, step)
            self.writer.add_scalar("eval/episodic_length", message.mean_length, step)
            if message.new_best:
                self.writer.add_scalar(BEST_EVAL_TAG, message.mean, step)
            self.say(f"eval at step {step:,}: return {message.mean:.2f} +/- {message.std:.2f}, mean length {message.mean_length:.0f}")
        else:
            raise TypeError(f"not a metrics message: {message!r}")

    @property
    def interactive(self) -> bool:
        return self.progress.interactive

    def _write_hparams(self, config: dict) -> None:
        """TensorBoard's HParams tab: this run's hyperparameters in one row, with its last and best
        evaluation returns as the metrics (the dashboard shows each tag's last value in the run)."""
        if isinstance(self.writer, _NoEvents):
            return
        try:
            for summary in hparams(hparams_of(config), {tag: 0.0 for tag in HPARAMS_METRICS}):
                self.writer.file_writer.add_summary(summary)
        except OSError:
            pass  # a full disk: the guarded writer says so in one line at its next write

    def say(self, line: str) -> None:
        """A line of its own, without breaking the progress bar."""
        self.progress.say(line)

    def tick(self, global_step: int) -> None:
        """Steps/s, learning rate and the progress display; call it a few times a second."""
        now = time.monotonic()
        elapsed = now - self._last_time
        if elapsed < self.sps_window:
            return
        sps = (global_step - self._last_step) / elapsed
        self._last_time, self._last_step = now, global_step
        self.writer.add_scalar("charts/SPS", sps, global_step)
        self.writer.add_scalar("charts/learning_rate", self.learning_rate(global_step), global_step)
        mean_return = float(np.mean(self.recent_returns)) if self.recent_returns else None
        if self.interactive:
            self.progress.draw(global_step, sps, self.episodes, mean_return)
        elif now - self._last_log >= self.log_interval:
            self._last_log = now
            self.progress.line(global_step, sps, self.episodes, mean_return)

    def flush(self) -> None:
        """Put the buffered events on disk (SummaryWriter holds them up to 2 minutes)."""
        self.writer.flush()

    def close(self, global_step: int) -> None:
        # What the run ended with: a short run can finish between two ticks, and the games its
        # workers reported last are only counted after the shutdown drained the queue.
        elapsed = time.monotonic() - self._last_time
        sps = (global_step - self._last_step) / elapsed if global_step > self._last_step and elapsed > 0 else None
        mean_return = float(np.mean(self.recent_returns)) if self.recent_returns else None
        self.progress.close(global_step, sps, self.episodes, mean_return)
        self.writer.flush()
        self.writer.close()


class Progress:
    """What a person watching the console sees: a progress bar in a terminal, else a plain line
    every --log-interval seconds (benchmarks/throughput.py reads its `step X/Y  S steps/s`).

    The bar is drawn from the first tick on, so it comes after the run's first lines; before the
    workers have stepped it says so instead of showing zeros. Steps past --max-steps (workers
    finish their rollout) fill the bar to 100%, and the exact count is in the run's last line.
    The size follows the terminal, and is 80x24 in a terminal that reports none.
    """

    BAR_FORMAT = "{percentage:3.0f}%|{bar}| {n:,}/{total:,} [{elapsed}{postfix}]"

    def __init__(self, start_step: int, max_steps: int):
        self.start_step, self.max_steps = start_step, max_steps
        self.started = time.time()
        self.interactive = sys.stdout.isatty()
        self.bar = None  # created by the first draw()
        self.sps_average = None
        self._last = None  # what the last draw showed
        self._drawn_at = console.writes

    def _open_bar(self) -> None:
        self.bar = tqdm(total=self.max_steps, initial=min(self.start_step, self.max_steps), unit="step",
                        ncols=terminal_size().columns, nrows=terminal_size().lines, bar_format=self.BAR_FORMAT, file=sys.stdout, mininterval=0, miniters=1)
        self.bar.start_t = self.started  # the elapsed time is the run's, not the bar's
        self.bar.last_print_t = self.started

    def draw(self, step: int, sps: float, episodes: int, mean_return) -> None:
        if self.bar is None:
            self._open_bar()
        self.bar.ncols, self.bar.nrows = terminal_size()  # follows a resized window
        self._last = (sps, episodes, mean_return)
        self.bar.set_postfix_str(self.postfix(step, sps, episodes, mean_return), refresh=False)
        moved = min(step, self.max_steps) - self.bar.n
        if moved:
            self.bar.update(moved)  # draws it (mininterval=0)
        else:
            self.bar.refresh()
        self._drawn_at = console.writes

    def postfix(self, step: int, sps: float, episodes: int, mean_return) -> str:
        """E.g. `2:41 left, 1,496 steps/s, 165 games, return 23.57 (last 100)`."""
        if step == self.start_step and sps == 0:
            return "starting the workers"
        # Time left from the steps/s shown, smoothed over about 10 s (one value a second).
        self.sps_average = sps if self.sps_average is None else 0.9 * self.sps_average + 0.1 * sps
        left = f"{tqdm.format_interval((self.max_steps - step) / self.sps_average)} left, " if self.sps_average > 0 and step < self.max_steps else ""
        games = "no finished game yet" if mean_return is None else f"{episodes:,} games, return {mean_return:.2f} (last 100)"
        return f"{left}{sps:,.0f} steps/s, {games}"

    def line(self, step: int, sps: float, episodes: int, mean_return) -> None:
        games = "no finished game yet" if mean_return is None else f"episodes {episodes}  mean return (last 100) {mean_return:.2f}"
        print(f"step {step:,}/{self.max_steps:,}  {sps:.0f} steps/s  {games}", flush=True)

    def say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)  # clears the bar, prints the line, draws it again
            self._drawn_at = console.writes
        else:
            print(line, flush=True)

    def close(self, step: int, sps: float | None = None, episodes: int = 0, mean_return=None) -> None:
        """The last state of the bar, left on screen once, and the cursor on the next line; `sps`
        is the rate since the last draw (None: keep the one shown), the games are the run's.

        If something else was printed after the bar (the Ctrl-C message, a warning), the bar
        above it stays as it was last drawn rather than being drawn a second time below it."""
        if self.bar is None:
            return
        if console.writes != self._drawn_at:
            self.bar.leave = False  # only clears the (empty) line the cursor is on
        else:
            if self._last is not None:  # the time left is gone at the end
                shown_sps = self._last[0] if sps is None else sps
                self.bar.set_postfix_str(self.postfix(step, shown_sps, episodes, mean_return), refresh=False)
            self.bar.update(min(step, self.max_steps) - self.bar.n)
        self.bar.close()
        self.bar = None


def terminal_size() -> os.terminal_size:
    """Of the terminal; 80x24 where it reports none (a pty without a size: tqdm then draws nothing)."""
    return shutil.get_terminal_size((80, 24))


def hparams_of(config: dict) -> dict:
    """The settings as HParams values: numbers and strings (a switch reads "True"/"False" rather
    than 1.0/0.0); an unset one is left out."""
    return {key: str(value) if isinstance(value, bool) else value for key, value in config.items()
            if key not in NOT_HYPERPARAMETERS and value is not None and isinstance(value, (bool, int, float, str))}


def hyperparameter_table(config: dict) -> str:
    rows = "\n".join(f"|{key}|{value}|" for key, value in config.items())
    return f"|setting|value|\n|-|-|\n{rows}"


class _NoEvents:
    """Stands in for the SummaryWriter where this process must not write event files."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
