"""Paths and names a hostile (or unlucky) user gives (issue 38): each is refused in one line,
exit 2, before any work, never a hang or a traceback.

Every command runs with a timeout: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, checkpointed_steps, only_run_dir, run_command, start_command, stop, wait_for_progress

pytestmark = pytest.mark.slow

REFUSAL_TIMEOUT_S = 90  # the start-up imports on a loaded machine; a hang runs past it


def assert_one_line_refusal(result, script: str, *expected: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{script}: error: "), result.stderr
    for text in expected:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"
    return lines[0]


# --- special files as a checkpoint --------------------------------------------------------------
def special_file(kind: str, folder: Path) -> Path:
    if kind == "fifo":
        path = folder / "latest.pt"
        os.mkfifo(path)  # opening it for reading would block until someone writes
        return path
    return Path("/dev/zero")  # a character device that never ends


@pytest.mark.parametrize("kind, described", [("fifo", "is a FIFO (named pipe), not a checkpoint file"), ("device", "is a character device, not a checkpoint file")])
@pytest.mark.parametrize("script, flag", [("train.py", "--resume"), ("evaluate.py", "--checkpoint")])
def test_a_fifo_or_a_device_as_the_checkpoint_is_refused_at_once(tmp_path, kind, described, script, flag):
    path = special_file(kind, tmp_path)
    result = run_command(script, flag, path, "--runs-dir", tmp_path / "runs", timeout=REFUSAL_TIMEOUT_S)
    assert_one_line_refusal(result, script, f"{path}: {described}")
    assert not (tmp_path / "runs").exists(), "no run directory was made"


# --- --exp-name: it names a directory -----------------------------------------------------------
@pytest.mark.parametrize("exp_name, expected", [
    (os.fsdecode(b"caf\xe9"), "--exp-name must be valid UTF-8 text"),  # Latin-1 bytes, as a terminal set to Latin-1 sends them
    ("two\nlines", "--exp-name must not hold a newline"),
    ("x" * 300, "--exp-name is too long: 300 bytes"),
])
def test_an_exp_name_that_cannot_name_a_directory_is_refused_up_front(tmp_path, exp_name, expected):
    result = run_command("train.py", "--env-id", "CartPole-v1", "--exp-name", exp_name, "--runs-dir", tmp_path / "runs", timeout=REFUSAL_TIMEOUT_S)
    line = assert_one_line_refusal(result, "train.py", expected)
    assert "--runs-dir" not in line
    assert not (tmp_path / "runs").exists(), "no half-made run directory"


def test_the_resume_hint_works_when_pasted_with_spaces_and_quotes_in_the_path(tmp_path):
    runs_dir = tmp_path / "my runs"
    trainer = start_command("train.py", "--env-id", "CartPole-v1", "--exp-name", "Bob's exp", "--num-processes", 1, "--no-evaluator", "--max-steps", 10**8, "--checkpoint-interval", 1, "--runs-dir", runs_dir)
    try:
        wait_for_progress(runs_dir)
        code, out, err = stop(trainer, signal.SIGINT, timeout=60)
    finally:
        trainer.kill()
    assert code == 130, err
    hint = out.strip().splitlines()[-1].split("resume with: ", 1)[1]
    assert hint.startswith("python train.py --resume ")
    run_dir, step = only_run_dir(runs_dir), checkpointed_steps(runs_dir)
    pasted = shlex.quote(sys.executable) + hint.removeprefix("python") + f" --max-steps {step + 200}"
    resumed = subprocess.run(["bash", "-c", pasted], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run directory: {run_dir}" in resumed.stdout and f"resuming at step {step:,}" in resumed.stdout, resumed.stdout


# --- --num-steps: a rollout is held in memory ---------------------------------------------------
def test_a_rollout_too_long_to_hold_is_refused_in_one_line(tmp_path):
    result = run_command("train.py", "--env-id", "ALE/Pong-v5", "--num-steps", 100_000, "--runs-dir", tmp_path / "runs", timeout=REFUSAL_TIMEOUT_S)
    assert_one_line_refusal(result, "train.py", "--num-steps must be at most 1000, got 100000")
    assert not (tmp_path / "runs").exists()
