"""Building environments: the Atari training and evaluation stacks, and vector-observation envs.

Training stack (Atari):  ALE (frameskip=1, sticky actions) -> AtariPreprocessing (noop starts,
frame-skip 4 with max-pooling, grayscale, resize) -> RecordEpisodeStatistics (the raw game score)
-> FireOnReset (games that wait for FIRE) -> LifeLossTerminal (learner sees a life loss as
terminal) -> clip rewards to [-1, 1].

Evaluation stack (Atari): the same up to FireOnReset, nothing after it: full games, raw rewards.

FIRE protocol, the same in both stacks: FIRE is pressed once when a game starts (a real reset),
never after a lost life; relaunching the ball after a lost life is the agent's own action. (With
FIRE after every lost life in training only, an agent never learns to press it, and its greedy
evaluation games stalled until ALE's 108,000-frame limit.)

Both Atari stacks come in two builds that give the learner the same observations, rewards and
ends: the lean one (a3c_torch/atari.py, one Python layer on the bare ALE; the default) and the
gymnasium wrappers above (`lean=False`, and whenever a render mode is asked for: videos and the
window draw through AtariEnv's renderer). The gymnasium build is the reference the lean one is
tested against (tests/test_atari.py).

Vector envs (CartPole, Acrobot, ...) get RecordEpisodeStatistics only.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np

from a3c_torch.atari import AtariGame
from a3c_torch.config import Config
from a3c_torch.errors import UsageError

# Every spawned child imports this module, so every process has the ALE ids registered.
gym.register_envs(ale_py)
# ...and no process prints ALE's banner ("A.L.E: Arcade Learning Environment ... [Powered by
# Stella]") for each new emulator: from 8 workers it broke the progress bar. Warnings still show.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)

ATARI_FRAME_SKIP = 4
ATARI_NOOP_MAX = 30


@dataclass(frozen=True)
class EnvSettings:
    """What make_env needs; a subset of Config so evaluation can rebuild it from a checkpoint."""

    env_id: str
    # The training defaults, so a benchmark or test that builds an env by hand sees what train.py sees.
    screen_size: int = Config.screen_size
    repeat_action_probability: float = Config.repeat_action_probability
    full_action_space: bool = Config.full_action_space

    @classmethod
    def from_config(cls, cfg) -> "EnvSettings":
        return cls(cfg.env_id, cfg.screen_size, cfg.repeat_action_probability, cfg.full_action_space)


def is_atari(env_id: str) -> bool:
    return "ale_py" in str(env_spec(env_id).entry_point)


def env_spec(env_id: str):
    """gymnasium's spec for env_id, or a UsageError that suggests the ids the user may have meant."""
    try:
        return gym.spec(env_id)
    except gym.error.Error:
        raise UsageError(f"unknown env id {env_id!r}{_suggest(env_id)}") from None


def _suggest(env_id: str) -> str:
    ids = list(gym.registry.keys())
    # 'Breakout' should find 'ALE/Breakout-v5': compare against the bare game names too.
    bare = {i.split("/")[-1].split("-v")[0].lower(): i for i in ids if i.startswith("ALE/") and i.endswith("-v5")}
    wanted = env_id.split("/")[-1].split("-v")[0].lower()
    matches = [bare[m] for m in difflib.get_close_matches(wanted, bare, n=3, cutoff=0.75)]
    matches += [m for m in difflib.get_close_matches(env_id, ids, n=3, cutoff=0.6) if m not in matches]
    return f"; did you mean {', '.join(matches[:3])}?" if matches else ""


class LifeLossTerminal(gym.Wrapper):
    """Reports a lost life as `terminated` to the learner without resetting the game.

    The next reset() after a life loss only takes a no-op step, so the game goes on; a real game
    over resets the emulator. Episode statistics below this wrapper still see whole games.
    """

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op itself ended the game
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireOnReset(gym.Wrapper):
    """Presses FIRE after a game's reset, for games that wait for it (Breakout launches the ball
    with it). It sits below LifeLossTerminal, so the reset after a lost life does not reach it."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class ClipReward(gym.RewardWrapper):
    """Rewards clipped to [-1, 1] (sign), so one learning rate fits every game."""

    def reward(self, reward):
        return float(np.sign(reward))


def needs_fire(env) -> bool:
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def make_env(settings: EnvSettings, seed: int | None = None, train: bool = True, render_mode: str | None = None, lean: bool = True) -> gym.Env:
    """One environment. `train` selects the training stack, else the evaluation stack; `lean`
    builds an Atari stack on the bare ALE (a3c_torch/atari.py) where it can stand in for the
    gymnasium one, which is built otherwise.

    `seed` seeds the action space; the caller seeds the game with its first `reset(seed=...)`.
    """
    if lean and render_mode is None and lean_stack_fits(settings.env_id):
        spec = env_spec(settings.env_id)
        env = AtariGame(
            spec.kwargs["game"],
            train=train,
            screen_size=settings.screen_size,
            frame_skip=ATARI_FRAME_SKIP,
            noop_max=ATARI_NOOP_MAX,
            repeat_action_probability=settings.repeat_action_probability,
            full_action_space=settings.full_action_space,
            max_num_frames_per_episode=spec.kwargs.get("max_num_frames_per_episode"),
            mode=spec.kwargs.get("mode"),
            difficulty=spec.kwargs.get("difficulty"),
        )
    elif is_atari(settings.env_id):
        env = gym.make(
            settings.env_id,
            frameskip=1,
            repeat_action_probability=settings.repeat_action_probability,
            full_action_space=settings.full_action_space,
            render_mode=render_mode,
        )
        env = gym.wrappers.AtariPreprocessing(
            env,
            noop_max=ATARI_NOOP_MAX,
            frame_skip=ATARI_FRAME_SKIP,
            screen_size=settings.screen_size,
            grayscale_obs=True,
        )
        env = gym.wrappers.RecordEpisodeStatistics(env)
        if needs_fire(env):
            env = FireOnReset(env)
        if train:
            env = LifeLossTerminal(env)
            env = ClipReward(env)
    else:
        env = gym.make(settings.env_id, render_mode=render_mode)
        env = gym.wrappers.RecordEpisodeStatistics(env)
    check_supported(settings.env_id, env)
    if seed is not None:
        env.action_space.seed(seed)
    return env


def lean_stack_fits(env_id: str) -> bool:
    """AtariGame stands in for ids whose gymnasium build it reproduces: screen observations (not
    RAM) and no TimeLimit wrapper (ALE's own frame limit cuts the games)."""
    if not is_atari(env_id):
        return False
    spec = env_spec(env_id)
    return spec.max_episode_steps is None and spec.kwargs.get("obs_type", "rgb") != "ram"


def check_supported(env_id: str, env: gym.Env) -> None:
    """The model handles discrete actions with vector or 2-D (grayscale image) observations."""
    if not isinstance(env.action_space, gym.spaces.Discrete):
        raise UsageError(f"{env_id}: A3C here needs a discrete action space, got {env.action_space}")
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) not in (1, 2):
        raise UsageError(f"{env_id}: the model handles vector or grayscale-image observations, got {space}")


def random_policy_frames(settings: EnvSettings, count: int, seed: int = 0) -> np.ndarray:
    """`count` observations of the training stack under a seeded uniform-random policy: a fixed
    probe set for looking inside a model (the same frames every call with the same arguments)."""
    env = make_env(settings, seed=seed, train=True)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    frames = []
    for _ in range(count):
        frames.append(obs)
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(frames)


def probe_spaces(settings: EnvSettings) -> tuple[tuple[int, ...], int]:
    """Observation shape and number of actions, from a short-lived env."""
    env = make_env(settings, train=True)
    try:
        return tuple(env.observation_space.shape), int(env.action_space.n)
    finally:
        env.close()


def probe_env(cfg: Config) -> tuple[tuple[int, ...], int]:
    """probe_spaces for a run's settings; an env that cannot be made here is a user error."""
    try:
        return probe_spaces(EnvSettings.from_config(cfg))
    except (gym.error.Error, ImportError) as exc:  # e.g. Box2D envs without box2d installed
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--env-id {cfg.env_id}: cannot be made here: {reason}") from None
