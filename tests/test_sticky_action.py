"""ALE's saved states leave out the action that sticky frames repeat; worker states keep it."""

import ale_py
import numpy as np

from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.sticky_action import held_action, set_held_action


def breakout_mid_game(seed: int, last_action: int):
    env = make_env(EnvSettings("ALE/Breakout-v5"), train=False)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        env.step(int(rng.integers(4)))
    env.step(last_action)
    return env


def continuation(env, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [env.step(int(rng.integers(4)))[0] for _ in range(15)]


def test_a_game_restored_with_its_held_action_continues_exactly_and_without_it_does_not():
    departed = 0
    for trial in range(10):  # 3 of these 10 depart without it
        game = breakout_mid_game(trial, last_action=3)  # it holds LEFT (or, rarely, what came before)
        state = game.ale.cloneState(include_rng=True)
        held = held_action(game.ale)
        assert game.ale.cloneState(include_rng=True).serialize() == state.serialize(), "reading it leaves the game as it was"
        host, bare_host = breakout_mid_game(100 + trial, last_action=2), breakout_mid_game(200 + trial, last_action=2)  # RIGHT
        host.ale.restoreState(state)
        set_held_action(host.ale, held, state)
        bare_host.ale.restoreState(state)  # what a restore did before: the host keeps its own held action
        expected = continuation(game, trial)
        assert all(np.array_equal(a, b) for a, b in zip(expected, continuation(host, trial))), f"trial {trial}"
        departed += not all(np.array_equal(a, b) for a, b in zip(expected, continuation(bare_host, trial)))
    assert departed >= 1, "the control: without the held action some restored games depart"


def test_without_sticky_actions_nothing_is_held():
    env = make_env(EnvSettings("ALE/Breakout-v5", repeat_action_probability=0.0), train=True)
    env.reset(seed=0)
    assert held_action(env.ale) is None


def test_the_held_action_is_found_after_a_game_starts_over():
    """A reset holds NOOP; the probe must find a legal action in every case."""
    env = make_env(EnvSettings("ALE/Pong-v5"), train=True)
    env.reset(seed=1)
    assert held_action(env.ale) in {action.value for action in env.ale.getLegalActionSet()}
    assert isinstance(ale_py.Action(held_action(env.ale)), ale_py.Action)
