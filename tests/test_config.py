"""Bad input: every mistake a user can make on the command line is one line on stderr and exit
code 2, never a traceback. tests/test_train_e2e.py covers a first few; these are the rest."""

import math
import os
import random
from pathlib import Path

import pytest
import torch

from a3c_torch.config import STALENESS_BUDGET, Config, changed_settings, parse_args, validate
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import save_checkpoint
from helpers import run_command


# --- validate(), in process: cheap enough to cover every setting ---------------------------------
@pytest.mark.parametrize("changes, flag", [
    ({"num_processes": -2}, "--num-processes"),
    ({"num_steps": 0}, "--num-steps"),
    ({"max_steps": 0}, "--max-steps"),
    ({"hidden_size": 0}, "--hidden-size"),
    ({"screen_size": -42}, "--screen-size"),
    ({"eval_episodes": 0}, "--eval-episodes"),
    ({"lr": -1e-4}, "--lr"),
    ({"lr": math.nan}, "--lr"),
    ({"lr": math.inf}, "--lr"),
    ({"gamma": 1.5}, "--gamma"),
    ({"gamma": math.nan}, "--gamma"),
    ({"gae_lambda": -0.1}, "--gae-lambda"),
    ({"entropy_coef": math.nan}, "--entropy-coef"),
    ({"value_loss_coef": -1.0}, "--value-loss-coef"),
    ({"repeat_action_probability": 1.0}, "--repeat-action-probability"),
    ({"checkpoint_interval": 0.0}, "--checkpoint-interval"),
    ({"max_grad_norm": math.nan}, "--max-grad-norm"),
    ({"seed": -1}, "--seed"),
    ({"seed": 2**32}, "--seed"),
    ({"exp_name": "a/b"}, "--exp-name"),
])
def test_validate_names_the_flag(changes, flag):
    with pytest.raises(UsageError, match=flag) as caught:
        validate(Config(**changes))
    assert "\n" not in str(caught.value)


def test_the_defaults_are_valid_and_explicit_flags_are_tracked():
    validate(Config())
    cfg, explicit = parse_args(["--env-id", "CartPole-v1", "--seed=1"])
    assert cfg.env_id == "CartPole-v1" and explicit == {"env_id", "seed"}


def test_a_config_from_before_a_default_changed_keeps_what_it_meant_then():
    """Runs written before --model and --lr-schedule existed trained the universe trunk at a
    constant lr; the defaults are a3c-centred and linear now, and a resume must not switch them."""
    old = {k: v for k, v in Config(env_id="ALE/Pong-v5").to_dict().items() if k not in ("model", "lr_schedule", "envs_per_process")}
    cfg = Config.from_dict(old)
    assert (cfg.model, cfg.lr_schedule, cfg.envs_per_process) == ("universe", "constant", 1)
    assert (Config().model, Config().lr_schedule) == ("a3c-centred", "linear")


def test_changed_settings_lists_what_a_resume_changed_and_nothing_else():
    before = Config(max_steps=20_000_000, lr=4e-4, lr_schedule="constant")
    after = Config(max_steps=24_000_000, lr=4e-4, lr_schedule="linear", resume="runs/x")
    assert changed_settings(before, after) == ["max_steps 20000000 -> 24000000", "lr_schedule constant -> linear"]
    assert changed_settings(before, Config(max_steps=20_000_000, lr=4e-4, lr_schedule="constant", resume="runs/x")) == []


@pytest.mark.parametrize("optimizer, lr_of", [("adam", lambda k: 2e-4 * k**0.5), ("rmsprop", lambda k: 7e-4 * k)])
def test_the_default_learning_rate_scales_with_the_envs_per_worker(optimizer, lr_of):
    """Adam: as sqrt(K) (tests/test_lr_scaling.py says why); RMSProp: as K."""
    for envs in (1, 4, 16):
        assert Config(optimizer=optimizer, num_processes=1, envs_per_process=envs).learning_rate == pytest.approx(lr_of(envs))
    assert Config(num_processes=2).learning_rate == pytest.approx(4e-4)  # the documented default
    assert Config(lr=3e-4, num_processes=2, envs_per_process=16).learning_rate == 3e-4  # an explicit --lr is kept as given


@pytest.mark.parametrize("workers, envs, lr", [(1, 4, 4e-4), (2, 4, 4e-4), (3, 3, 2e-4 * 3**0.5), (4, 2, 2e-4 * 2**0.5), (8, 1, 2e-4), (12, 1, 5.3e-4 / 11**0.5), (16, 1, 5.3e-4 / 15**0.5), (64, 1, 5.3e-4 / 63**0.5)])
def test_the_defaults_keep_the_hogwild_staleness_within_its_budget(workers, envs, lr):
    """8 workers at 4e-4 never learned Breakout: about N - 1 stale updates of about lr each land
    inside every rollout. The defaults take fewer envs per worker, then a lower lr, to keep
    lr x sqrt(N - 1) within the budget that learned (results/hogwild-staleness)."""
    cfg = Config(num_processes=workers)
    assert (cfg.envs_per_process, cfg.learning_rate) == (envs, pytest.approx(lr))
    assert cfg.learning_rate * max(1, workers - 1) ** 0.5 <= STALENESS_BUDGET * (1 + 1e-9)
    # Envs given explicitly keep their own K; the default lr still keeps the budget.
    assert Config(num_processes=8, envs_per_process=4).learning_rate == pytest.approx(STALENESS_BUDGET / 7**0.5)
    assert Config(num_processes=8, envs_per_process=4, lr=4e-4).learning_rate == 4e-4  # as the user asked


# --- the command line, run as a user would ------------------------------------------------------
@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of a CartPole run with a 256 LSTM (the default), made without training."""
    folder = tmp_path_factory.mktemp("run") / "checkpoints"
    model = ActorCritic((4,), 2, 256)
    optimizer = make_optimizer("adam", model.parameters(), 1e-4)
    save_checkpoint(folder / "latest.pt", {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "global_step": 100, "config": Config(env_id="CartPole-v1", max_steps=1000).to_dict()})
    return folder / "latest.pt"


def bad_files(folder: Path) -> dict[str, Path]:
    files = {"random_bytes": folder / "random.pt", "foreign_torch_file": folder / "foreign.pt", "plain_file": folder / "plain.txt", "empty_run_dir": folder / "empty_run"}
    files["random_bytes"].write_bytes(random.Random(1).randbytes(4096))
    torch.save({"state_dict": {"weight": torch.zeros(3)}, "epoch": 3}, files["foreign_torch_file"])
    files["plain_file"].write_text("not a folder\n")
    files["empty_run_dir"].mkdir()
    return files


CASES = [  # (arguments; {placeholders} are filled in by the test, expected words in the one line)
    (["--num-processes", "-3"], "--num-processes must be a positive integer"),
    (["--num-steps", "0"], "--num-steps must be a positive integer"),
    (["--max-steps", "0"], "--max-steps must be a positive integer"),
    (["--lr", "-0.001"], "--lr must be positive"),
    (["--lr", "nan"], "--lr must be positive"),
    (["--env-id", "Pong"], "did you mean ALE/Pong-v5"),
    (["--env-id", "ALE/Breakout-v9"], "did you mean ALE/Breakout-v5"),
    (["--env-id", "FrozenLake-v1"], "vector or grayscale-image observations"),
    (["--env-id", "Blackjack-v1"], "vector or grayscale-image observations"),
    (["--env-id", "CarRacing-v3"], "CarRacing-v3"),
    (["--max-steps", "1.5"], "invalid int value: '1.5'"),
    (["--lr", "fast"], "invalid float value: 'fast'"),
    (["--num-processes", ""], "invalid int value"),
    (["--optimizer", "sgd"], "invalid choice: 'sgd'"),
    (["--seed", "-1"], "--seed must be in"),
    (["--no-evaluator=yes"], "ignored explicit argument"),
    (["--runs-dir", "{plain_file}/runs"], "cannot create a run directory there (Not a directory)"),
    (["--resume", "{random_bytes}"], "not an a3c_torch checkpoint (unreadable"),
    (["--resume", "{foreign_torch_file}"], "not an a3c_torch checkpoint (missing format_version"),
    (["--resume", "{empty_run_dir}"], "no checkpoint found"),
    (["--resume", "{checkpoint}", "--env-id", "Acrobot-v1"], "trained with --env-id CartPole-v1, not Acrobot-v1"),
    (["--resume", "{checkpoint}", "--hidden-size", "64"], "trained with --hidden-size 256, not 64"),
    (["--resume", "{checkpoint}", "--max-steps", "50"], "already at step 100"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(tmp_path, cartpole_checkpoint, args, message):
    places = {**bad_files(tmp_path), "checkpoint": cartpole_checkpoint}
    args = [a.format(**places) for a in args]
    if "--runs-dir" not in args:
        args += ["--runs-dir", tmp_path / "runs"]
    quick_env = [] if {"--env-id", "--resume"} & set(args) else ["--env-id", "CartPole-v1"]
    result = run_command("train.py", *quick_env, *args, timeout=120)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "no run directory for a refused run"


class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_resume_refuses_a_checkpoint_that_would_run_code(tmp_path, cartpole_checkpoint):
    marker, evil = tmp_path / "code-ran", tmp_path / "evil.pt"
    data = torch.load(cartpole_checkpoint, weights_only=True)
    torch.save({**data, "payload": RunsCode(marker)}, evil)
    result = run_command("train.py", "--resume", evil, "--max-steps", "2000", "--runs-dir", tmp_path / "runs", timeout=120)
    assert result.returncode == 2
    assert "refused: loading it could run code" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not marker.exists()
