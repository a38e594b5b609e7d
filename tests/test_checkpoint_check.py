"""Foreign or corrupt checkpoints: every part of the file is checked when it is loaded, so train.py
--resume and evaluate.py say in one line what is wrong, before any work, instead of a traceback
(or, for a bad global_step, after evaluate.py had played every game)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import load_checkpoint
from a3c_torch.storage.checks import accepted_types
from helpers import run_command


def good_payload() -> dict:
    torch.manual_seed(0)
    model = ActorCritic((4,), 2, hidden_size=16)
    optimizer = make_optimizer("adam", model.parameters(), 1e-3)
    config = Config(env_id="CartPole-v1", hidden_size=16, max_steps=1000, evaluator=False).to_dict()
    return {"format_version": 1, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "global_step": 100, "config": config, "best_eval_return": None, "wall_time": 1.0}


def write(path, payload):
    torch.save(payload, path)  # not save_checkpoint: it would refuse some of these
    return path


def with_config(**changes):
    payload = good_payload()
    payload["config"] = {**payload["config"], **changes}
    return payload


def nan_weights():
    payload = good_payload()
    payload["model"] = {name: torch.full_like(t, math.nan) for name, t in payload["model"].items()}
    return payload


BAD = {  # name: (payload, words in the one line)
    "config-is-a-string": ({**good_payload(), "config": "CartPole-v1"}, "its config is a str, not a dict"),
    "config-is-a-list": ({**good_payload(), "config": ["CartPole-v1"]}, "its config is a list, not a dict"),
    "no-env-id": ({**good_payload(), "config": {"hidden_size": 16}}, "its config has no env id"),
    "env-id-not-a-string": (with_config(env_id=3), "its config's env_id is 3"),
    "hidden-size-negative": (with_config(hidden_size=-16), "--hidden-size must be a positive integer, got -16"),
    "hidden-size-a-string": (with_config(hidden_size="16"), "its config's hidden_size is '16' (str), expected int"),
    "hidden-size-a-bool": (with_config(hidden_size=True), "its config's hidden_size is True (bool), expected int"),
    "unknown-optimizer": (with_config(optimizer="sgd"), "its config's optimizer is 'sgd', expected one of adam, rmsprop"),
    "evaluator-an-int": (with_config(evaluator=1), "its config's evaluator is 1 (int), expected bool"),
    "global-step-a-float": ({**good_payload(), "global_step": 1.5}, "its global_step is 1.5 (float), expected an integer >= 0"),
    "global-step-a-string": ({**good_payload(), "global_step": "100"}, "its global_step is '100' (str)"),
    "global-step-negative": ({**good_payload(), "global_step": -5}, "its global_step is -5"),
    "model-a-list": ({**good_payload(), "model": [torch.zeros(3)]}, "its model is a list, not a dict of tensors"),
    "model-of-numbers": ({**good_payload(), "model": {"w": 3}}, "its model holds 'w': int, expected named tensors"),
    "optimizer-a-string": ({**good_payload(), "optimizer": "adam"}, "its optimizer state is a str"),
    "optimizer-without-groups": ({**good_payload(), "optimizer": {"state": {}}}, "no 'state' dict and 'param_groups' list"),
    "optimizer-state-of-strings": ({**good_payload(), "optimizer": {"state": {0: "x"}, "param_groups": []}}, "its optimizer state for 0 is a str"),
    "worker-states-a-list": ({**good_payload(), "worker_states": [1, 2]}, "its worker_states is a list"),
    "worker-states-of-strings": ({**good_payload(), "worker_states": {0: "state"}}, "its worker_states[0] is a str"),
    "best-a-string": ({**good_payload(), "best_eval_return": "high"}, "its best_eval_return is 'high'"),
    "nan-weights": (nan_weights(), "its model weights hold NaN or inf ("),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_part_is_one_line_naming_it(tmp_path, kind):
    payload, expected = BAD[kind]
    path = write(tmp_path / "bad.pt", payload)
    with pytest.raises(UsageError) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: not a usable a3c_torch checkpoint: ")
    assert expected in message


def test_a_good_checkpoint_loads(tmp_path):
    assert load_checkpoint(write(tmp_path / "good.pt", good_payload()))["global_step"] == 100


def test_a_checkpoint_of_an_older_version_without_newer_settings_loads(tmp_path):
    """Settings a version did not save take their Config default; unknown ones are ignored."""
    payload = good_payload()
    for newer in ("lr_schedule", "eval_device", "repeat_action_probability"):
        del payload["config"][newer]
    payload["config"]["a_setting_from_the_future"] = 3
    assert load_checkpoint(write(tmp_path / "old.pt", payload))["global_step"] == 100


def test_every_config_field_is_checked_from_its_annotation():
    """A new Config field is covered without touching the checker, as long as its type is one the
    command line supports too (this test says so when it is not)."""
    for f in dataclasses.fields(Config):
        assert accepted_types(f.type), f.name
        assert isinstance(getattr(Config(), f.name), accepted_types(f.type))


# --- the commands, as a user runs them -----------------------------------------------------------
@pytest.mark.slow
def test_evaluate_refuses_a_bad_global_step_before_playing(tmp_path):
    path = write(tmp_path / "bad.pt", {**good_payload(), "global_step": "lots"})
    result = run_command("evaluate.py", "--checkpoint", path, "--episodes", "2", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "episode " not in result.stdout, "it played before it looked at the file"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "its global_step is 'lots'" in lines[0] and "Traceback" not in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate.py", "train.py"])
def test_nan_weights_are_refused_by_both_commands(tmp_path, command):
    path = write(tmp_path / "nan.pt", nan_weights())
    args = ["--checkpoint", path, "--episodes", "1"] if command == "evaluate.py" else ["--resume", path, "--runs-dir", tmp_path / "runs", "--max-steps", "2000"]
    result = run_command(command, *args, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "model weights hold NaN or inf" in lines[0], result.stderr
    assert "episode " not in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("part, value, expected", [
    ("config", "CartPole-v1", "its config is a str"),
    ("optimizer", [1, 2], "its optimizer state is a list"),
    ("worker_states", "abc", "its worker_states is a str"),
], ids=["config", "optimizer", "worker_states"])
def test_resume_of_a_corrupt_checkpoint_is_one_line(tmp_path, part, value, expected):
    path = write(tmp_path / "bad.pt", {**good_payload(), part: value})
    result = run_command("train.py", "--resume", path, "--runs-dir", tmp_path / "runs", "--max-steps", "2000", timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in result.stderr, result.stderr
