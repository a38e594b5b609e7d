"""The lean Atari stack (a3c_torch/atari.py) against the gymnasium stack it stands for.

Both stacks play the same game from the same seed with the same actions, step for step; every
observation, reward, terminated/truncated flag, info, episode statistic and reset observation
must be identical, and so must their saved states at the end (emulator bytes, RNGs, frame
buffers, counters). Each case asserts that it met the events it is there for (lost lives, game
overs, time-limit cuts), so a change of ROM or seed cannot make it pass on an empty run.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from a3c_torch.atari import AtariGame
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.worker_state import capture_env, pack, restore_env, unpack


def both_stacks(env_id: str, train: bool, sticky: float, max_frames: int | None = None, screen_size: int = 84):
    settings = EnvSettings(env_id, screen_size=screen_size, repeat_action_probability=sticky)
    lean, reference = make_env(settings, seed=1, train=train), make_env(settings, seed=1, train=train, lean=False)
    assert isinstance(lean, AtariGame) and not isinstance(reference.unwrapped, AtariGame)
    if max_frames is not None:  # ALE reads it when the ROM is loaded: at the seeded reset
        for env in (lean, reference):
            env.unwrapped.ale.setInt("max_num_frames_per_episode", max_frames)
    return lean, reference


def same_reset(lean, reference, **kwargs):
    (obs, info), (ref_obs, ref_info) = lean.reset(**kwargs), reference.reset(**kwargs)
    assert np.array_equal(obs, ref_obs) and obs.dtype == ref_obs.dtype == np.uint8 and obs.shape == lean.observation_space.shape
    assert info == ref_info


def play_side_by_side(lean, reference, steps: int, seed: int) -> Counter:
    """Random actions on both stacks; what was seen, counted."""
    seen = Counter()
    same_reset(lean, reference, seed=seed)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        action = int(rng.integers(lean.action_space.n))
        obs, reward, terminated, truncated, info = lean.step(action)
        ref_obs, ref_reward, ref_terminated, ref_truncated, ref_info = reference.step(action)
        assert np.array_equal(obs, ref_obs), f"observation at step {step}"
        assert (reward, terminated, truncated) == (ref_reward, ref_terminated, ref_truncated), f"step {step}"
        assert type(reward) is type(ref_reward) is float
        episode, ref_episode = info.pop("episode", None), ref_info.pop("episode", None)
        assert info == ref_info, f"info at step {step}"
        assert (episode is None) == (ref_episode is None), f"episode end at step {step}"
        if episode is not None:
            assert (episode["r"], episode["l"]) == (ref_episode["r"], ref_episode["l"]), f"episode statistics at step {step}"
            seen["game over" if terminated else "cut"] += 1
        elif terminated:
            seen["life loss"] += 1  # terminal for the learner, the game goes on
        seen["score"] += reward != 0
        if terminated or truncated:
            same_reset(lean, reference)
    assert pack(capture_env(lean)) == pack(capture_env(reference)), "saved states differ at the end"
    return seen


@pytest.mark.parametrize("sticky", [0.25, 0.0])
def test_breakout_training_is_identical_through_lost_lives_and_game_overs(sticky):
    seen = play_side_by_side(*both_stacks("ALE/Breakout-v5", True, sticky), 1500, seed=3)
    assert seen["life loss"] >= 10 and seen["game over"] >= 3 and seen["score"] >= 5, seen


def test_breakout_evaluation_is_identical_over_whole_games():
    seen = play_side_by_side(*both_stacks("ALE/Breakout-v5", False, 0.25), 1500, seed=4)
    assert seen["life loss"] == 0 and seen["game over"] >= 3 and seen["score"] >= 5, seen


def test_pong_training_is_identical_through_a_game_over_and_a_time_limit_cut():
    # 4,000 frames: of this seed's first two random games, one is cut and one ends first.
    seen = play_side_by_side(*both_stacks("ALE/Pong-v5", True, 0.25, max_frames=4000), 2000, seed=7)
    assert seen["game over"] >= 1 and seen["cut"] >= 1 and seen["score"] >= 20, seen


def test_pong_evaluation_is_identical_without_sticky_actions():
    seen = play_side_by_side(*both_stacks("ALE/Pong-v5", False, 0.0), 1000, seed=5)
    assert seen["game over"] >= 1 and seen["score"] >= 20, seen


def test_other_screen_sizes_are_identical_too():
    seen = play_side_by_side(*both_stacks("ALE/Breakout-v5", True, 0.25, screen_size=42), 400, seed=6)
    assert seen["life loss"] >= 1, seen


def test_evaluation_reseeds_each_game_like_the_reference():
    """evaluate.py resets every game with its own seed, mid-game too: the ROM is reloaded."""
    lean, reference = both_stacks("ALE/Breakout-v5", False, 0.25)
    for seed in (10, 11, 10):
        play_side_by_side(lean, reference, 60, seed=seed)


@pytest.mark.parametrize("saved_on", ["lean", "gymnasium"])
def test_a_state_saved_on_either_stack_continues_identically_on_both(saved_on):
    lean, reference = both_stacks("ALE/Breakout-v5", True, 0.25)
    source = lean if saved_on == "lean" else reference
    play_side_by_side(lean, reference, 300, seed=8)  # both are now mid-game, with lives lost
    saved = unpack(pack(capture_env(source)))
    fresh_lean, fresh_reference = both_stacks("ALE/Breakout-v5", True, 0.25)
    for env in (fresh_lean, fresh_reference):
        env.reset(seed=99)
        assert restore_env(env, saved)
        assert pack(capture_env(env)) == pack(capture_env(source))
    rng = np.random.default_rng(1)
    for _ in range(400):
        action = int(rng.integers(lean.action_space.n))
        outcomes = [env.step(action) for env in (source, fresh_lean, fresh_reference)]
        for obs, reward, terminated, truncated, info in outcomes[1:]:
            assert np.array_equal(obs, outcomes[0][0]) and (reward, terminated, truncated) == outcomes[0][1:4]
            assert ("episode" in info) == ("episode" in outcomes[0][4])
        if outcomes[0][2] or outcomes[0][3]:
            resets = [env.reset()[0] for env in (source, fresh_lean, fresh_reference)]
            assert all(np.array_equal(obs, resets[0]) for obs in resets)


def test_sticky_actions_are_on_in_the_lean_stack():
    """Sticky actions live in ALE's own RNG: the same actions diverge from a non-sticky game."""
    sticky = make_env(EnvSettings("ALE/Breakout-v5"), train=True)
    plain = make_env(EnvSettings("ALE/Breakout-v5", repeat_action_probability=0.0), train=True)
    assert sticky.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    observations = []
    for env in (sticky, plain):
        env.reset(seed=2)
        rng = np.random.default_rng(2)
        observations.append([env.step(int(rng.integers(4)))[0] for _ in range(200)])
    assert not all(np.array_equal(a, b) for a, b in zip(*observations))


def test_the_lean_stack_is_made_for_atari_without_a_render_mode_only():
    settings = EnvSettings("ALE/Pong-v5")
    assert isinstance(make_env(settings), AtariGame)
    assert not isinstance(make_env(settings, lean=False), AtariGame)
    assert not isinstance(make_env(settings, render_mode="rgb_array").unwrapped, AtariGame)
    assert not isinstance(make_env(EnvSettings("CartPole-v1")).unwrapped, AtariGame)
    freeway = make_env(EnvSettings("ALE/Freeway-v5"))
    assert isinstance(freeway, AtariGame) and not freeway.fire


def test_stepping_before_a_reset_is_refused():
    import gymnasium as gym

    with pytest.raises(gym.error.ResetNeeded):
        make_env(EnvSettings("ALE/Pong-v5")).step(0)
