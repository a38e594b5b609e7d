"""It learns: CartPole to the solved threshold with the real workers, and Pong's learner moving.

These run the real train.py (2 worker processes, SharedAdam, the LSTM model) with fixed step
budgets. They are the slowest tests of the suite.
"""

import math

import pytest
import torch

from a3c_torch.envs import EnvSettings, random_policy_frames
from a3c_torch.model import ActorCritic

from helpers import load, only_run_dir, run_command, scalar_tags

pytestmark = pytest.mark.slow

CARTPOLE_SOLVED = 195.0


def test_cartpole_reaches_the_solved_threshold(tmp_path):
    """The evaluator's mean over 10 full episodes reaches 195 within 300k agent steps.

    lr 1e-3 instead of the Atari default 1e-4: CartPole's rewards and horizon differ; held
    constant, as in the runs that measured this budget (the default linear schedule would tie the
    rate to a budget this test ends early); everything else is the project's default algorithm.
    With one env per worker the runs we measured needed about half of 150k steps; with the
    default 4 envs (a quarter of the updates per step) a distributed run reached only 160 within
    150k, so the budget is 300k. --target-eval-return ends the run at the first evaluation that
    gets there, so a fast run stays fast.
    """
    result = run_command(
        "train.py", "--env-id", "CartPole-v1", "--num-processes", "2", "--max-steps", "300000", "--lr", "1e-3", "--lr-schedule", "constant",
        "--eval-interval", "3", "--eval-episodes", "10", "--target-eval-return", str(CARTPOLE_SOLVED),
        "--runs-dir", tmp_path, "--seed", "1", timeout=420,
    )
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path)
    evals = [event.value for event in scalar_tags(run_dir)["eval/episodic_return"]]
    best = load(run_dir / "checkpoints" / "best.pt")
    print(f"CartPole eval means: {[round(v) for v in evals]}")
    assert best["best_eval_return"] >= CARTPOLE_SOLVED, f"best evaluation mean {best['best_eval_return']:.1f} < {CARTPOLE_SOLVED}"


def random_play_frames(count: int = 600):
    """Pong frames of the training stack under a fixed random policy: a fixed probe set."""
    return torch.as_tensor(random_policy_frames(EnvSettings("ALE/Pong-v5"), count))


def value_and_entropy(model: ActorCritic, frames: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        logits, values, _ = model.forward_sequence(frames[:, None], model.initial_state(1), torch.zeros(len(frames), 1, dtype=torch.bool))
    probs = torch.softmax(logits, -1)
    return float(values.mean()), float(-(probs * probs.log()).sum(-1).mean())


def test_pong_learner_moves(tmp_path):
    """40k agent steps (500 updates of 2 workers x 4 envs x 20 steps) of Pong move the critic and
    the policy the right way.

    Measured on a fixed set of frames, not on the noisy training curves, against the exact
    weights the run started from (train.py seeds the initial model with --seed):
    - the critic learns that early Pong is a losing game. The starting model's mean value is
      -0.41 (at 84x84 a fresh critic's mean lies within about +-0.5 of 0, depending on the seed);
      after training it was -1.5 to -2.3 in five runs (a point lost every ~100 steps at
      gamma 0.99). The assertion, at least 0.5 below the start, leaves a wide margin, and fails
      for a learner whose gradients do not reach the shared model or have the wrong sign;
    - the policy becomes less random: entropy at least 0.0005 below the start (which is within
      1e-4 of ln 6). A model that does not learn stays within 1e-4 of its start (5x below the
      threshold). With one env per worker, 20k steps (1,000 updates) measured 0.0047 to 0.0176
      below ln 6 in five runs; with the default 4 envs, 20k steps (250 updates) measured 0.0010
      in one run, hence the 40k steps here. The size of this early move varies from run to run
      (Hogwild is nondeterministic); its direction does not.
    At a constant lr, as measured: the default linear schedule would halve the mean rate over so
    short a budget.
    """
    result = run_command(
        "train.py", "--env-id", "ALE/Pong-v5", "--num-processes", "2", "--max-steps", "40000", "--lr-schedule", "constant",
        "--no-evaluator", "--runs-dir", tmp_path, "--seed", "1", timeout=420,
    )
    assert result.returncode == 0, result.stderr
    checkpoint = load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")
    frames = random_play_frames()
    size = checkpoint["config"]["screen_size"]
    assert frames.shape[1:] == (size, size), "the probe frames and the trained model use the default screen size"
    torch.manual_seed(checkpoint["config"]["seed"])  # as train.py does: the run's starting weights
    trunk = checkpoint["config"]["model"]
    fresh_value, fresh_entropy = value_and_entropy(ActorCritic((size, size), 6, trunk=trunk), frames)
    trained = ActorCritic((size, size), 6, trunk=trunk)
    trained.load_state_dict(checkpoint["model"])
    value, entropy = value_and_entropy(trained, frames)
    print(f"mean value {fresh_value:.3f} -> {value:.3f}; entropy {fresh_entropy:.4f} -> {entropy:.4f}")
    assert abs(fresh_value) < 0.5 and fresh_entropy > math.log(6) - 1e-4, "the starting model: value ~0, uniform policy"
    assert value < fresh_value - 0.5, f"the critic did not learn that early Pong loses points (mean value {fresh_value:.3f} -> {value:.3f})"
    assert entropy < fresh_entropy - 0.0005, f"the policy did not move away from uniform (entropy {fresh_entropy:.4f} -> {entropy:.4f})"
