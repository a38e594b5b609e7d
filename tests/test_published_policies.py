"""Every policy.pt published under results/ loads the way evaluate.py loads it, and plays."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.evaluation.games import play_one_game
from a3c_torch.evaluation.loading import load, load_model, saved_config
from a3c_torch.storage.checks import check_checkpoint

REPO = Path(__file__).resolve().parent.parent
POLICIES = sorted(str(path.relative_to(REPO)) for path in (REPO / "results").rglob("policy.pt"))


@pytest.mark.parametrize("relative_path", POLICIES)
def test_a_published_policy_plays(relative_path):
    path = REPO / relative_path
    data = load(path)  # as evaluate.py --checkpoint loads it
    check_checkpoint(data, relative_path)
    assert "optimizer" not in data and "worker_states" not in data  # light: the weights, the config, the step
    cfg = saved_config(data, path)
    env = make_env(EnvSettings.from_config(cfg), seed=0, train=False)
    model = load_model(data, path, cfg, env, torch.device("cpu"))
    # Asked to stop at its first check (every STOP_CHECK_STEPS steps): it plays that far, or to a game's end.
    result = play_one_game(model, env, seed=0, should_stop=lambda: True)
    assert result is None or result.length > 0
    env.close()


def test_there_are_published_policies():
    assert len(POLICIES) >= 2, POLICIES
