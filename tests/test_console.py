"""Training does not depend on its console: a closed pipe (`train.py | head -1`) or a full device
(`> /dev/full`) on stdout leaves the run training and checkpointing to the end, exit code 0."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from a3c_torch.console import GuardedStream
from helpers import REPO, load, only_run_dir


class Breaks(io.StringIO):
    """A stream whose writes fail from the `after`-th on, like a pipe whose reader has gone."""

    def __init__(self, after: int):
        super().__init__()
        self.after, self.calls = after, 0

    def write(self, text):
        self.calls += 1
        if self.calls > self.after:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)

    def fileno(self):
        raise io.UnsupportedOperation("no file descriptor")


def test_a_stream_that_breaks_is_dropped_and_reported_once():
    lost = []
    stream = GuardedStream(Breaks(after=1), "stdout", on_lost=lambda s, exc: lost.append(exc))
    print("first line", file=stream)  # print writes the text and the newline: the newline breaks
    print("second line", file=stream, flush=True)
    stream.flush()
    assert stream._stream.getvalue() == "first line"
    assert len(lost) == 1 and isinstance(lost[0], BrokenPipeError)
    assert not stream.isatty()


def train_args(runs_dir) -> list[str]:
    return [sys.executable, str(REPO / "train.py"), "--env-id", "CartPole-v1", "--num-processes", "1", "--no-evaluator",
            "--max-steps", "3040", "--log-interval", "0.5", "--runs-dir", str(runs_dir)]


def assert_trained_to_the_end(runs_dir, code: int, stderr: str) -> None:
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert load(only_run_dir(runs_dir) / "checkpoints" / "latest.pt")["global_step"] == 3040


@pytest.mark.slow
def test_a_closed_pipe_on_stdout_does_not_stop_training(tmp_path):
    # As `python train.py ... | head -1`: read the first line, then close the pipe.
    process = subprocess.Popen(train_args(tmp_path / "runs"), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read()
    code = process.wait(timeout=240)
    assert first.startswith("run directory: ")
    assert_trained_to_the_end(tmp_path / "runs", code, stderr)
    assert "warning: stdout is gone (Broken pipe); training goes on without printing to it" in stderr


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_on_stdout_does_not_stop_training(tmp_path):
    with open("/dev/full", "w") as full:
        result = subprocess.run(train_args(tmp_path / "runs"), cwd=REPO, stdout=full, stderr=subprocess.PIPE, text=True, timeout=240)
    assert_trained_to_the_end(tmp_path / "runs", result.returncode, result.stderr)
    assert "stdout is gone (No space left on device)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
