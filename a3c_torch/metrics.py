"""The run's single TensorBoard writer and progress display, fed by the workers' stats queue.

Only the main process writes event files. The x axis of every curve is the global agent step
count (Atari frames = steps x frame-skip).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Callable

import numpy as np
from tqdm import tqdm

from a3c_torch.events import open_event_writer

LOSS_TAGS = ("losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/grad_norm")


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
        self.best_eval = None
        self.log_interval = log_interval
        self.sps_window = sps_window
        self.start_step = start_step
        self.max_steps = max_steps
        self._last_time, self._last_step = time.monotonic(), start_step
        self._last_log = time.monotonic()
        self.interactive = sys.stdout.isatty()
        self.bar = tqdm(total=max_steps, initial=start_step, unit="step", dynamic_ncols=True, disable=not self.interactive)
        if not resumed:
            self.writer.add_text("hyperparameters", hyperparameter_table(config), global_step=start_step)

    def handle(self, message: tuple) -> None:
        kind, step = message[0], message[1]
        if kind == "episode":
            _, _, episode_return, length = message
            self.episodes += 1
            self.recent_returns.append(episode_return)
            self.writer.add_scalar("charts/episodic_return", episode_return, step)
            self.writer.add_scalar("charts/episodic_length", length, step)
        elif kind == "losses":
            values, skipped = message[2:6], message[6]
            for tag, value in zip(LOSS_TAGS, values):
                self.writer.add_scalar(tag, value, step)
            self.skipped_updates += skipped
            self.writer.add_scalar("losses/skipped_updates", self.skipped_updates, step)
        elif kind == "eval":
            _, _, mean, std, mean_length = message
            self.writer.add_scalar("eval/episodic_return", mean, step)
            self.writer.add_scalar("eval/episodic_return_std", std, step)
            self.writer.add_scalar("eval/episodic_length", mean_length, step)
            self.say(f"eval at step {step:,}: return {mean:.2f} +/- {std:.2f}, mean length {mean_length:.0f}")

    def say(self, line: str) -> None:
        """A line of its own, without breaking the progress bar."""
        if self.interactive:
            tqdm.write(line)
        else:
            print(line, flush=True)

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
        mean_return = float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")
        if self.interactive:
            self.bar.update(global_step - self.bar.n)
            self.bar.set_postfix(sps=f"{sps:.0f}", ret=f"{mean_return:.2f}", eps=self.episodes, refresh=False)
        elif now - self._last_log >= self.log_interval:
            self._last_log = now
            print(f"step {global_step:,}/{self.max_steps:,}  {sps:.0f} steps/s  episodes {self.episodes}  mean return (last 100) {mean_return:.2f}", flush=True)

    def flush(self) -> None:
        """Put the buffered events on disk (SummaryWriter holds them up to 2 minutes)."""
        self.writer.flush()

    def close(self, global_step: int) -> None:
        if self.interactive:
            self.bar.update(global_step - self.bar.n)
        self.bar.close()
        self.writer.flush()
        self.writer.close()


def hyperparameter_table(config: dict) -> str:
    rows = "\n".join(f"|{key}|{value}|" for key, value in config.items())
    return f"|setting|value|\n|-|-|\n{rows}"


class _NoEvents:
    """Stands in for the SummaryWriter where this process must not write event files."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
