"""policy.pt (weights, config, step; no optimizer or worker state) and curve.csv (a run's training
games): the light files a published run keeps instead of its checkpoints and event files."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import load_checkpoint, save_checkpoint
from a3c_torch.storage.curves import Curve, curve_from_events, read_curve, write_curve
from a3c_torch.storage.policy_file import export_policy
from helpers import load, run_command


def write_checkpoint(path, hidden_size=16):
    torch.manual_seed(0)
    model = ActorCritic((4,), 2, hidden_size=hidden_size)
    optimizer = make_optimizer("adam", model.parameters(), 1e-3)
    config = Config(env_id="CartPole-v1", hidden_size=hidden_size, max_steps=1000, evaluator=False).to_dict()
    worker_states = {0: {"rngs": {"numpy": torch.zeros(3)}}}
    save_checkpoint(path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "global_step": 1234, "config": config,
                           "best_eval_return": None, "wall_time": 5.0, "worker_states": worker_states})
    return model


def test_a_policy_keeps_weights_config_and_step_only(tmp_path):
    model = write_checkpoint(tmp_path / "latest.pt")
    assert export_policy(tmp_path / "latest.pt", tmp_path / "policy.pt") == 1234
    policy = load(tmp_path / "policy.pt")
    assert set(policy) == {"format_version", "kind", "model", "config", "global_step"}
    assert policy["global_step"] == 1234 and policy["config"]["env_id"] == "CartPole-v1"
    for name, tensor in model.state_dict().items():
        assert torch.equal(policy["model"][name], tensor), name
    # It is the small file: the checkpoint also holds Adam's two moments per weight.
    assert (tmp_path / "policy.pt").stat().st_size < (tmp_path / "latest.pt").stat().st_size / 2


def test_a_policy_loads_to_play_but_not_to_resume(tmp_path):
    write_checkpoint(tmp_path / "latest.pt")
    export_policy(tmp_path / "latest.pt", tmp_path / "policy.pt")
    assert load_checkpoint(tmp_path / "policy.pt")["global_step"] == 1234
    with pytest.raises(UsageError, match="is a policy file .* cannot go on from it"):
        load_checkpoint(tmp_path / "policy.pt", resumable=True)


def test_a_policy_is_checked_like_a_checkpoint(tmp_path):
    write_checkpoint(tmp_path / "latest.pt")
    export_policy(tmp_path / "latest.pt", tmp_path / "policy.pt")
    policy = load(tmp_path / "policy.pt")
    broken = {**policy, "model": {name: torch.full_like(t, math.nan) for name, t in policy["model"].items()}}
    torch.save(broken, tmp_path / "nan.pt")
    with pytest.raises(UsageError, match="its model weights hold NaN"):
        load_checkpoint(tmp_path / "nan.pt")
    no_config = {key: value for key, value in policy.items() if key != "config"}
    torch.save(no_config, tmp_path / "no-config.pt")
    with pytest.raises(UsageError, match=r"missing config\)"):
        load_checkpoint(tmp_path / "no-config.pt")
    # Without its kind, a file without an optimizer is a damaged checkpoint, as before.
    torch.save({key: value for key, value in policy.items() if key != "kind"}, tmp_path / "no-kind.pt")
    with pytest.raises(UsageError, match=r"missing optimizer\)"):
        load_checkpoint(tmp_path / "no-kind.pt")


@pytest.mark.slow
def test_evaluate_plays_a_policy_and_train_refuses_it(tmp_path):
    write_checkpoint(tmp_path / "latest.pt")
    export_policy(tmp_path / "latest.pt", tmp_path / "policy.pt")
    played = run_command("evaluate.py", "--checkpoint", tmp_path / "policy.pt", "--episodes", "2", "--json", tmp_path / "eval.json")
    assert played.returncode == 0, played.stderr
    assert '"global_step": 1234' in (tmp_path / "eval.json").read_text()
    resumed = run_command("train.py", "--resume", tmp_path / "policy.pt")
    assert resumed.returncode == 2
    assert resumed.stderr.count("\n") == 1 and "is a policy file" in resumed.stderr


def test_a_curve_round_trips_through_its_csv(tmp_path):
    curve = Curve(np.array([80, 80, 200]), np.array([1.7e9, 1.7e9 + 0.25, 1.7e9 + 3]), np.array([17.0, -21.0, 0.5]), np.array([17, 900, 3]))
    write_curve(curve, tmp_path / "curve.csv")
    assert (tmp_path / "curve.csv").read_text().splitlines()[:2] == ["step,wall_time,return,length", "80,1700000000.000,17.0,17"]
    back = read_curve(tmp_path / "curve.csv")
    for name in ("steps", "wall_times", "returns", "lengths"):
        assert np.array_equal(getattr(back, name), getattr(curve, name)), name
    assert back.last_games_mean(2) == pytest.approx(-10.25)
    assert back.last_games_mean(100) == pytest.approx((17 - 21 + 0.5) / 3)


def test_a_bad_curve_file_is_one_line(tmp_path):
    (tmp_path / "a.csv").write_text("steps,return\n1,2\n")
    (tmp_path / "b.csv").write_text("step,wall_time,return,length\n1,2,x,4\n")
    for name, words in (("a.csv", "not a curve file"), ("b.csv", "a row is not 4 numbers"), ("missing.csv", "cannot read it")):
        with pytest.raises(UsageError, match=words) as caught:
            read_curve(tmp_path / name)
        assert "\n" not in str(caught.value)


def test_the_curve_pairs_each_game_s_return_and_length_from_the_events(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    # Two games ending at one step (two workers), written as the trainer does: return, then length.
    for step, ret, length in ((40, 9.0, 9), (40, 12.0, 12), (90, 30.0, 30)):
        writer.add_scalar("charts/episodic_return", ret, step, walltime=1000.0 + step)
        writer.add_scalar("charts/episodic_length", length, step, walltime=1000.0 + step)
    writer.close()
    curve = curve_from_events(tmp_path)
    assert curve.steps.tolist() == [40, 40, 90]
    assert curve.returns.tolist() == [9.0, 12.0, 30.0] and curve.lengths.tolist() == [9, 12, 30]
    assert curve.wall_times.tolist() == [1040.0, 1040.0, 1090.0]
