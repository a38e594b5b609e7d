"""What a person sees in a terminal: train.py run in a real pseudo-terminal, its output replayed
on a small screen model (carriage returns overwrite, lines wrap at the terminal's width), and the
final screen read as text. Also: training goes on when its console goes away (`| head -1`,
`> /dev/full`)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from a3c_torch.metrics import Progress
from helpers import REPO

BAR = re.compile(r"^\s*\d+%\|")


class Screen:
    """Enough of a terminal for tqdm's output: printable characters, \\r, \\n, erase-line."""

    def __init__(self, columns: int):
        self.columns = columns
        self.lines, self.row, self.col = [[]], 0, 0
        self.continued = set()  # rows that go on from the row above (wrapped, not a new line)

    def feed(self, text: str) -> None:
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)  # tqdm uses none with a single bar
        for char in text:
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row += 1
                self.col = 0
                if self.row == len(self.lines):
                    self.lines.append([])
            elif char >= " ":
                if self.col == self.columns:  # wraps to the next line
                    self.feed("\n")
                    self.continued.add(self.row)
                line = self.lines[self.row]
                line.extend(" " * (self.col + 1 - len(line)))
                line[self.col] = char
                self.col += 1

    def rows(self) -> list[str]:
        """The screen's rows as they look."""
        return ["".join(chars).rstrip() for chars in self.lines]

    def text_lines(self) -> list[str]:
        """The non-empty lines, a wrapped line joined again."""
        lines = []
        for number, row in enumerate(self.rows()):
            if number in self.continued and lines:
                lines[-1] += row
            elif row:
                lines.append(row)
        return lines


def run_in_pty(command: list, size: tuple[int, int] | None, timeout: float = 240, interrupt_when=None) -> tuple[int, str]:
    """Run a command with a pty as its controlling terminal (stdin, stdout and stderr), as in a
    terminal window of `size` (rows, columns), or None: a pty that reports 0 x 0. If
    `interrupt_when(output so far)` turns true, type one Ctrl-C."""
    master, slave = os.openpty()
    rows, columns = size or (0, 0)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "MAKEFLAGS", "MAKELEVEL")}
    process = subprocess.Popen([str(part) for part in command], cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env,
                               start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(slave)
    chunks, deadline, interrupted = [], time.monotonic() + timeout, False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer has closed the pty
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
            if interrupt_when is not None and not interrupted and interrupt_when(b"".join(chunks).decode("utf-8", "replace")):
                os.write(master, b"\x03")  # the terminal turns it into SIGINT for the foreground process group
                interrupted = True
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def train_command(*args) -> list:
    return [sys.executable, REPO / "train.py", *args]


def quick_run(runs_dir, max_steps=3000) -> list:
    return ["--env-id", "CartPole-v1", "--num-processes", "1", "--no-evaluator", "--max-steps", max_steps, "--runs-dir", runs_dir]


# --- in process: what the bar says ----------------------------------------------------------
def test_postfix_says_what_is_known_and_nothing_else():
    progress = Progress(0, 10_000)
    assert progress.postfix(0, 0.0, 0, None) == "starting the workers"
    first = progress.postfix(2_000, 500.0, 0, None)
    assert first == "00:16 left, 500 steps/s, no finished game yet", first  # 8,000 steps at 500/s
    later = progress.postfix(4_000, 500.0, 12, 21.5)
    assert later.endswith("500 steps/s, 12 games, return 21.50 (last 100)") and "nan" not in later


# --- in a real pty --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("size", [(30, 100), None], ids=["100 columns", "a pty without a size"])
def test_progress_bar_in_a_terminal(tmp_path, size):
    # Rollouts of 4 envs x 20 steps by one worker: --max-steps 3,010 ends past it, at 3,040.
    code, output = run_in_pty(train_command(*quick_run(tmp_path / "runs", max_steps=3010)), size)
    assert code == 0, output
    columns = size[1] if size else 80  # tqdm would draw nothing at all in a 0 x 0 terminal
    screen = Screen(columns)
    screen.feed(output)
    lines = screen.text_lines()
    assert "Traceback" not in output, output
    assert lines[0].startswith("run directory: ") and lines[1].startswith("training CartPole-v1 with 1 worker process x 4 envs, "), lines
    bars = [line for line in lines if BAR.match(line)]
    assert len(bars) == 1, lines  # drawn over itself: once on screen, after the first lines
    assert lines.index(bars[0]) == 2 and lines[3].startswith("done: 3,040 steps"), lines
    bar = bars[0]
    # Past --max-steps the bar is full, with the total (the exact count is on the done line).
    assert bar.lstrip().startswith("100%|") and "| 3,010/3,010 [" in bar, bar
    assert re.search(r"\d[\d,]* steps/s, \d+ games, return -?\d+\.\d\d \(last 100\)\]$", bar), bar
    assert " left" not in bar
    assert all(len(row) <= columns for row in screen.rows()) and len(bar) <= columns
    for stale in ("nan", "eps=", "sps=", "?"):
        assert stale not in output, (stale, output)


@pytest.mark.slow
def test_make_train_stopped_with_ctrl_c_ends_clean(tmp_path):
    """make adds no "Error 130" (or "Interrupt") to the trainer's own last line after a Ctrl-C."""
    venv = Path(sys.executable).parent.parent
    command = ["make", "--no-print-directory", "-o", venv / ".installed", "train", f"VENV={venv}", "NUM_PROCESSES=1",
               f"TRAIN_ARGS=--env-id CartPole-v1 --no-evaluator --runs-dir {tmp_path / 'runs'}"]
    trained = lambda output: " steps/s, " in output  # noqa: E731 - the bar shows the workers stepping
    code, output = run_in_pty(command, (30, 200), interrupt_when=trained)
    screen = Screen(200)
    screen.feed(output)
    lines = screen.text_lines()
    assert lines[-1].startswith("stopped at step ") and "resume with: python train.py --resume " in lines[-1], lines
    assert "make: ***" not in output and "Error 130" not in output, lines
    assert code in (-2, 130)  # make, like any command, ends by the Ctrl-C itself
