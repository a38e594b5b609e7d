"""python -m scripts.slim_run: a finished run directory slimmed to curve.csv (and policy.pt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import SharedAdam
from a3c_torch.storage.checkpoint import load_checkpoint, save_checkpoint
from a3c_torch.storage.curves import read_curve
from a3c_torch.storage.scalars import TRAIN_RETURN
from scripts import slim_run

from helpers import run_module


def make_run(run_dir: Path, games: int = 5) -> Path:
    """A tiny finished run: its training games in an event file and a CartPole checkpoint."""
    with SummaryWriter(str(run_dir)) as writer:
        for i in range(games):
            writer.add_scalar(TRAIN_RETURN, float(10 * i), 1000 * i, walltime=1_800_000_000.0 + i)
            writer.add_scalar("charts/episodic_length", float(20 + i), 1000 * i, walltime=1_800_000_000.0 + i)
    cfg = Config(env_id="CartPole-v1", num_processes=1, evaluator=False)
    model = ActorCritic((4,), 2, cfg.hidden_size)
    optimizer = SharedAdam(model.parameters(), lr=1e-3)
    save_checkpoint(run_dir / "checkpoints" / "latest.pt", {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "global_step": 4321, "config": cfg.to_dict()})
    return run_dir


def test_slimming_keeps_the_games_and_the_final_policy_then_removes_the_run_directory(tmp_path):
    run = make_run(tmp_path / "published" / "ALE_x__run__1__20261206-000000")
    weights = load_checkpoint(run / "checkpoints" / "latest.pt")["model"]
    lines = slim_run.slim(run, with_policy=True, delete=True)
    assert not run.exists() and any(line.startswith("removed") for line in lines)
    curve = read_curve(tmp_path / "published" / "curve.csv")
    np.testing.assert_array_equal(curve.returns, [0.0, 10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(curve.lengths, [20, 21, 22, 23, 24])
    policy = load_checkpoint(tmp_path / "published" / "policy.pt")
    assert policy["global_step"] == 4321 and "optimizer" not in policy
    for name, tensor in weights.items():
        assert policy["model"][name].equal(tensor)


def test_without_delete_nothing_is_removed_and_siblings_get_named_files(tmp_path):
    first, second = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    slim_run.slim(first, with_policy=False, delete=False)
    assert first.is_dir() and (tmp_path / "a.curve.csv").is_file() and not (tmp_path / "a.policy.pt").exists()
    assert second.is_dir()


def test_a_folder_that_is_not_a_run_is_one_line_and_exit_2(tmp_path):
    with pytest.raises(UsageError, match="not a run directory"):
        slim_run.slim(tmp_path, with_policy=False, delete=True)
    result = run_module("scripts.slim_run", str(tmp_path / "missing"), "--delete")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a run directory" in result.stderr
