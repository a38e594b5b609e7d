"""Paths and names a hostile (or unlucky) user gives (issue 38): each is refused in one line,
exit 2, before any work, never a hang or a traceback.

Every command runs with a timeout: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import run_command

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
