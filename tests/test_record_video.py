"""evaluate.py --record-video: a CartPole game is filmed (its frames are drawn with pygame-ce, off
screen), and what would make the recording fail (a missing renderer, a directory that takes no
files) is one line before any game is played, not a traceback after all of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from a3c_torch.config import Config
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import save_checkpoint
from helpers import run_command


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("run") / "checkpoints" / "latest.pt"
    model = ActorCritic((4,), 2, 16)
    save_checkpoint(path, {"model": model.state_dict(), "optimizer": make_optimizer("adam", model.parameters(), 1e-3).state_dict(), "global_step": 10, "config": Config(env_id="CartPole-v1", hidden_size=16).to_dict()})
    return path


def assert_refused_before_playing(result, *words):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert "episode " not in result.stdout, "it played before it checked"


@pytest.mark.slow
def test_a_cartpole_game_is_recorded_headless(cartpole_checkpoint, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    result = run_command("evaluate.py", "--checkpoint", cartpole_checkpoint, "--episodes", "1", "--record-video", tmp_path / "videos", "--json", "-", timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.lstrip().startswith("{"), "stdout must hold only the JSON (no pygame banner)"
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000, videos


@pytest.mark.slow
def test_a_missing_pygame_is_one_line_before_playing(cartpole_checkpoint, tmp_path):
    shadow = tmp_path / "no-pygame" / "pygame"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named pygame')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    result = run_command("evaluate.py", "--checkpoint", cartpole_checkpoint, "--episodes", "1", "--record-video", tmp_path / "videos", timeout=180, env=env)
    assert_refused_before_playing(result, "--record-video: CartPole-v1 cannot draw its frames here", "pygame-ce")


@pytest.mark.slow
def test_an_existing_read_only_directory_is_refused_before_playing(cartpole_checkpoint, read_only_dir):
    result = run_command("evaluate.py", "--checkpoint", cartpole_checkpoint, "--episodes", "1", "--record-video", read_only_dir, timeout=180)
    assert_refused_before_playing(result, str(read_only_dir), "--record-video cannot write there (Read-only file system")
