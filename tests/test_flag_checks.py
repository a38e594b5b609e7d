"""Sizes that cannot work are one line, not a 16 TB allocation; resume flags mean what they say:
no abbreviation is silently taken for a flag, and the evaluator can be turned back on."""

from __future__ import annotations

import pytest

from a3c_torch.config import Config, parse_args, validate
from a3c_torch.config import config_for_resume
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import load_checkpoint, resolve_checkpoint, save_checkpoint
from helpers import run_command


# --- item 11: sizes ------------------------------------------------------------------------------
@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 1_000_000}, "--hidden-size must be at most 4096, got 1000000"),
    ({"screen_size": 1_000_000}, "--screen-size must be at most 256, got 1000000"),
])
def test_sizes_beyond_any_machine_are_refused(changes, message):
    with pytest.raises(UsageError, match=message):
        validate(Config(**changes))
    validate(Config(hidden_size=4096, screen_size=256))  # the bounds themselves are fine


@pytest.mark.slow
@pytest.mark.parametrize("command, args, message", [
    ("train.py", ["--env-id", "CartPole-v1", "--hidden-size", "1000000"], "--hidden-size must be at most 4096"),
    ("train.py", ["--env-id", "ALE/Pong-v5", "--screen-size", "1000000"], "--screen-size must be at most 256"),
    ("evaluate.py", ["--seed", "-1"], "--seed must be in [0, 2**31), got -1"),
])
def test_the_commands_refuse_them_in_one_line(tmp_path, command, args, message):
    result = run_command(command, *args, "--runs-dir", tmp_path / "runs", timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


# --- item 12: resume flags -----------------------------------------------------------------------
def test_an_abbreviated_flag_is_refused_not_ignored(capsys):
    with pytest.raises(SystemExit) as caught:
        parse_args(["--max-step=10000000"])
    assert caught.value.code == 2
    assert "unrecognized arguments: --max-step=10000000" in capsys.readouterr().err


@pytest.mark.parametrize("argv, name", [
    (["--max-steps", str(Config().max_steps)], "max_steps"),  # the default value, still given
    ([f"--max-steps={Config().max_steps}"], "max_steps"),
    (["--evaluator"], "evaluator"),
    (["--no-evaluator"], "evaluator"),
    (["--no-full-action-space"], "full_action_space"),
])
def test_a_flag_given_with_its_default_value_counts_as_given(argv, name):
    assert parse_args(argv)[1] == {name}


def test_the_evaluator_flag_pair():
    assert parse_args([])[0].evaluator and parse_args(["--evaluator"])[0].evaluator
    assert not parse_args(["--no-evaluator"])[0].evaluator
    assert parse_args(["--no-evaluator", "--evaluator"])[0].evaluator  # the last one wins


@pytest.fixture
def no_evaluator_run(tmp_path):
    """A CartPole run trained with --no-evaluator and --max-steps 5000, at step 100."""
    model = ActorCritic((4,), 2, 16)
    path = tmp_path / "run" / "checkpoints" / "latest.pt"
    config = Config(env_id="CartPole-v1", hidden_size=16, max_steps=5000, evaluator=False).to_dict()
    save_checkpoint(path, {"model": model.state_dict(), "optimizer": make_optimizer("adam", model.parameters(), 1e-3).state_dict(), "global_step": 100, "config": config})
    return tmp_path / "run"


def resume(run_dir, *argv):
    cfg, explicit = parse_args(["--resume", str(run_dir), *argv])
    return config_for_resume(cfg, explicit, load_checkpoint(resolve_checkpoint(cfg.resume)))


def test_resume_with_the_default_max_steps_goes_on_to_it(no_evaluator_run):
    default = Config().max_steps
    assert resume(no_evaluator_run, "--max-steps", str(default)).max_steps == default
    assert resume(no_evaluator_run).max_steps == 5000


def test_resume_of_a_run_without_evaluator_says_how_to_turn_it_on(no_evaluator_run):
    with pytest.raises(UsageError) as caught:
        resume(no_evaluator_run, "--target-eval-return", "100")
    assert "trained with --no-evaluator" in str(caught.value) and "add --evaluator" in str(caught.value)
    assert "drop --no-evaluator" not in str(caught.value)
    merged = resume(no_evaluator_run, "--evaluator", "--target-eval-return", "100")
    assert merged.evaluator and merged.target_eval_return == 100
