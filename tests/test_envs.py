"""The env stacks on real ROMs: shapes, dtypes, and what differs between training and evaluation."""

import numpy as np
import pytest

from a3c_torch.envs import ClipReward, EnvSettings, is_atari, make_env, probe_spaces
from a3c_torch.errors import UsageError


# The Atari stack's two builds: the lean one (the default) and the gymnasium one it stands for.
STACKS = pytest.mark.parametrize("lean", [True, False], ids=["lean", "gymnasium"])


def wrappers_of(env):
    names = []
    while hasattr(env, "env"):
        names.append(type(env).__name__)
        env = env.env
    return names


@STACKS
def test_atari_observation_shape_and_dtype(lean):
    env = make_env(EnvSettings("ALE/Pong-v5", screen_size=42), seed=0, train=True, lean=lean)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (42, 42) and obs.dtype == np.uint8
    assert env.observation_space.shape == (42, 42)
    assert env.action_space.n == 6
    obs, reward, terminated, truncated, _ = env.step(0)
    assert obs.shape == (42, 42) and obs.dtype == np.uint8
    env.close()


@STACKS
def test_screen_size_and_sticky_actions_are_passed_through(lean):
    env = make_env(EnvSettings("ALE/Pong-v5", screen_size=64, repeat_action_probability=0.0), train=False, lean=lean)
    assert env.observation_space.shape == (64, 64)
    assert env.reset(seed=0)[0].shape == (64, 64)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    env.close()
    env = make_env(EnvSettings("ALE/Pong-v5"), train=True, lean=lean)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25), "v5 default: sticky actions on"
    env.close()


def test_training_and_evaluation_stacks_differ_as_specified():
    # The gymnasium stack's wrappers; the lean stack reproduces them (tests/test_atari.py).
    train = wrappers_of(make_env(EnvSettings("ALE/Breakout-v5"), train=True, lean=False))
    evaluation = wrappers_of(make_env(EnvSettings("ALE/Breakout-v5"), train=False, lean=False))
    for name in ("ClipReward", "LifeLossTerminal"):
        assert name in train and name not in evaluation
    for name in ("RecordEpisodeStatistics", "AtariPreprocessing", "FireOnReset"):
        assert name in train and name in evaluation
    # Episode statistics sit below life-loss and clipping: they see whole games and raw scores.
    # FIRE sits below life-loss: it is pressed when a game starts, not after every lost life.
    assert train.index("RecordEpisodeStatistics") > train.index("FireOnReset") > train.index("LifeLossTerminal") > train.index("ClipReward")
    # Games without a FIRE action get no FireOnReset.
    assert "FireOnReset" not in wrappers_of(make_env(EnvSettings("ALE/Freeway-v5"), train=True, lean=False))


@STACKS
def test_life_loss_is_terminal_for_the_learner_but_the_game_goes_on(lean):
    env = make_env(EnvSettings("ALE/Breakout-v5", repeat_action_probability=0.0), seed=0, train=True, lean=lean)
    env.reset(seed=0)
    ale = env.unwrapped.ale
    lives_at_start = ale.lives()
    rng = np.random.default_rng(0)
    for _ in range(5000):
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        assert reward in (-1.0, 0.0, 1.0), "training rewards are clipped"
        if terminated:
            break
    assert terminated and "episode" not in info, "the first terminal should be a life loss, not game over"
    assert ale.lives() == lives_at_start - 1
    env.reset()
    assert ale.lives() == lives_at_start - 1, "reset after a life loss must not restart the game"


def noop_steps_until_a_life_is_lost(env, limit):
    lives = env.unwrapped.ale.lives()
    for step in range(1, limit + 1):
        env.step(0)
        if env.unwrapped.ale.lives() < lives:
            return step
    return None


@STACKS
@pytest.mark.parametrize("train", [True, False])
def test_fire_is_pressed_when_a_game_starts_and_never_after_a_lost_life(train, lean):
    """The same FIRE protocol in both stacks: after a real reset the ball is in play (a paddle
    that never moves loses a life), after a lost life it is not (no life is lost however long
    the agent waits) until the agent presses FIRE itself."""
    env = make_env(EnvSettings("ALE/Breakout-v5", repeat_action_probability=0.0), seed=0, train=train, lean=lean)
    env.reset(seed=0)
    assert noop_steps_until_a_life_is_lost(env, 500) is not None, "FIRE at the game's start launched the ball"
    if train:
        env.reset()  # the learner's reset after the life loss: the game goes on
    assert noop_steps_until_a_life_is_lost(env, 1000) is None, "nobody pressed FIRE after the lost life"
    env.step(1)
    assert noop_steps_until_a_life_is_lost(env, 500) is not None, "the agent's own FIRE launches the ball"
    env.close()


@STACKS
def test_evaluation_rewards_are_raw_and_episodes_are_whole_games(lean):
    env = make_env(EnvSettings("ALE/Breakout-v5", repeat_action_probability=0.0), seed=0, train=False, lean=lean)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            break
    assert terminated and env.unwrapped.ale.lives() == 0, "an evaluation episode is a whole game"
    assert "episode" in info


def test_reward_clipping():
    assert [ClipReward.reward(None, r) for r in (7.0, -3.0, 0.0, 0.5)] == [1.0, -1.0, 0.0, 1.0]


def test_vector_env_and_spaces():
    assert not is_atari("CartPole-v1") and is_atari("ALE/Pong-v5")
    assert probe_spaces(EnvSettings("CartPole-v1")) == ((4,), 2)


@pytest.mark.parametrize("env_id, expected", [
    ("Breakout", "ALE/Breakout-v5"),
    ("ALE/Pongg-v5", "ALE/Pong-v5"),
    ("CartPol-v1", "CartPole-v1"),
])
def test_unknown_env_suggests_close_matches(env_id, expected):
    with pytest.raises(UsageError, match="unknown env id") as info:
        make_env(EnvSettings(env_id))
    assert expected in str(info.value)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "FrozenLake-v1"])
def test_envs_the_model_cannot_handle_are_refused(env_id):
    with pytest.raises(UsageError, match=env_id):
        make_env(EnvSettings(env_id))


def test_a_process_that_makes_atari_envs_prints_no_ale_banner():
    """Every process imports envs.py (a spawned worker or evaluator too): ALE stays quiet in all."""
    import subprocess
    import sys

    code = ("from a3c_torch.config import Config; from a3c_torch.envs import EnvSettings, make_env\n"
            "settings = EnvSettings.from_config(Config(env_id='ALE/Pong-v5'))\n"
            "for train in (True, False): make_env(settings, seed=1, train=train).reset(seed=1)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "A.L.E" not in result.stdout + result.stderr and "Stella" not in result.stdout + result.stderr, result.stderr
