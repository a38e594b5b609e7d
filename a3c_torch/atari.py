"""The lean Atari stack: the training and evaluation stacks of envs.py on the bare ALEInterface.

The reference is envs.make_env(lean=False): ale_py's AtariEnv (frameskip 1) -> AtariPreprocessing
-> RecordEpisodeStatistics -> FireOnReset (FIRE games) -> LifeLossTerminal -> ClipReward (the
last two in training only). That is nine Python layers per agent step, and AtariEnv reads an RGB
screen after every frame that nobody looks at. AtariGame is one layer that makes the same ALE
calls in the same order, so the emulator, its sticky-action RNG and the no-op RNG go through the
same states, and the learner sees the same observations, rewards and ends (tests/test_atari.py
holds it to the reference step for step). It keeps the reference's quirks on purpose:

- A step that ends the game inside the frame skip returns the max of the two frame buffers as
  they were (AtariPreprocessing stops before reading the screen), and the max-pool is done in
  place into the first buffer, which the next step's max then includes.
- The reset after a lost life (training) is a no-op step through the episode statistics: it
  counts in the game's length and score, and a game that ends in it is not reported.
- FIRE games press FIRE (1) and then action 2 after a game's reset (FireOnReset).
- A game's reset with a seed reseeds the no-op RNG and the emulator and reloads the ROM.

Its state is saved in the reference's layout (`reference_layers`): worker_state.py saves and
restores either stack the same way, and a state saved by one continues on the other.
"""

from __future__ import annotations

import time

import ale_py
import cv2
import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding


class AtariGame(gym.Env):
    """One Atari game as the learner (`train=True`) or the evaluator (`train=False`) sees it:
    grayscale `screen_size` frames, `frame_skip` frames per agent step with the max of the last
    two, 1 to `noop_max` no-ops after a game's reset, episode statistics in info["episode"].
    Training adds a lost life as `terminated` (the game goes on) and rewards clipped to their sign."""

    metadata = {"render_modes": []}

    def __init__(self, game: str, *, train: bool, screen_size: int = 84, frame_skip: int = 4, noop_max: int = 30,
                 repeat_action_probability: float = 0.25, full_action_space: bool = False,
                 max_num_frames_per_episode: int | None = None, mode: int | None = None, difficulty: int | None = None):
        if frame_skip < 2:
            raise ValueError("the max-pool of the last two frames needs frame_skip >= 2")
        self.train = train
        self._frame_skip = frame_skip
        self._noop_max = noop_max
        self._size = (screen_size, screen_size)
        self._rom = ale_py.roms.get_rom_path(game)
        self._mode, self._difficulty = mode, difficulty
        # AtariEnv's set-up calls, in its order: settings are read when the ROM is loaded.
        self.ale = ale = ale_py.ALEInterface()
        ale.setLoggerMode(ale_py.LoggerMode.Error)
        ale.setFloat("repeat_action_probability", repeat_action_probability)
        if max_num_frames_per_episode is not None:
            ale.setInt("max_num_frames_per_episode", max_num_frames_per_episode)
        ale.setBool("sound_obs", False)
        self._seed_and_load(None)
        self._action_set = ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet()
        self.action_space = gym.spaces.Discrete(len(self._action_set))
        self.observation_space = gym.spaces.Box(0, 255, (screen_size, screen_size), np.uint8)
        meanings = self.get_action_meanings()
        self.fire = len(meanings) >= 3 and meanings[1] == "FIRE"
        # AtariPreprocessing's two screen buffers (the max-pool writes into the first).
        self._frames = [np.zeros(ale.getScreenDims(), np.uint8) for _ in range(2)]
        # The reference's counters, named after the wrapper that keeps each.
        self._preprocessing_lives = 0
        self._preprocessing_game_over = False
        self.episode_returns = 0.0
        self.episode_lengths = 0
        self._episode_start = -1.0
        self._life_lives = 0
        self._life_game_over = True  # the first reset is a real one
        self._has_reset = False

    # --- the gymnasium API ----------------------------------------------------------------------
    def step(self, action):
        obs, reward, terminated, truncated, info = self._play(action)
        if self.train:  # LifeLossTerminal, then ClipReward
            self._life_game_over = terminated or truncated
            lives = info["lives"]
            if 0 < lives < self._life_lives:
                terminated = True
            self._life_lives = lives
            reward = 1.0 if reward > 0 else -1.0 if reward < 0 else 0.0
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self.train and not self._life_game_over:
            # After a lost life the game goes on: a no-op step, and a real reset only if it ended.
            obs, _, terminated, truncated, info = self._play(0)
            if terminated or truncated:
                obs, info = self._game_reset(seed)
        else:
            obs, info = self._game_reset(seed)
        if self.train:
            self._life_game_over = False
            self._life_lives = self.ale.lives()
        return obs, info

    def get_action_meanings(self) -> list[str]:
        names = {action: name for name, action in ale_py.Action.__members__.items()}
        return [names[action] for action in self._action_set]

    # --- the reference's layers -----------------------------------------------------------------
    def _play(self, action):
        """AtariPreprocessing's step (frames from AtariEnv's) with RecordEpisodeStatistics' count."""
        if not self._has_reset:
            raise gym.error.ResetNeeded("Cannot call env.step() before calling env.reset()")
        ale, frames, skip = self.ale, self._frames, self._frame_skip
        ale_action = self._action_set[action]
        reward = 0.0
        for t in range(skip):
            reward += ale.act(ale_action, 1.0)
            if ale.game_over():  # ended or cut: the screens are not read (see the module's notes)
                break
            if t >= skip - 2:  # the second-to-last frame into buffer 1, the last into buffer 0
                ale.getScreenGrayscale(frames[skip - 1 - t])
        terminated = ale.game_over(with_truncation=False)
        truncated = ale.game_truncated()
        self._preprocessing_game_over = terminated
        info = self._info()
        self.episode_returns += reward
        self.episode_lengths += 1
        if terminated or truncated:
            now = time.perf_counter()
            info["episode"] = {"r": self.episode_returns, "l": self.episode_lengths, "t": round(now - self._episode_start, 6)}
            self._episode_start = now
        return self._observe(), reward, terminated, truncated, info

    def _observe(self) -> np.ndarray:
        first, second = self._frames
        np.maximum(first, second, out=first)
        return cv2.resize(first, self._size, interpolation=cv2.INTER_AREA)

    def _info(self) -> dict:
        ale = self.ale
        return {"lives": ale.lives(), "episode_frame_number": ale.getEpisodeFrameNumber(), "frame_number": ale.getFrameNumber()}

    def _game_reset(self, seed):
        """FireOnReset over RecordEpisodeStatistics' reset."""
        obs, info = self._statistics_reset(seed)
        if self.fire:
            for action in (1, 2):
                obs, _, terminated, truncated, info = self._play(action)
                if terminated or truncated:
                    obs, info = self._statistics_reset(seed)
        return obs, info

    def _statistics_reset(self, seed):
        obs, info = self._preprocessing_reset(seed)
        self._episode_start = time.perf_counter()
        self.episode_returns = 0.0
        self.episode_lengths = 0
        return obs, info

    def _preprocessing_reset(self, seed):
        """AtariPreprocessing's reset: the emulator's reset, then 1 to noop_max no-op frames."""
        info = self._emulator_reset(seed)
        noops = self.np_random.integers(1, self._noop_max + 1) if self._noop_max > 0 else 0
        ale, noop = self.ale, self._action_set[0]
        for _ in range(noops):
            ale.act(noop, 1.0)
            info.update(self._info())
            if ale.game_over():
                info = self._emulator_reset(seed)
        self._preprocessing_lives = ale.lives()
        ale.getScreenGrayscale(self._frames[0])
        self._frames[1].fill(0)
        self._has_reset = True
        return self._observe(), info

    def _emulator_reset(self, seed) -> dict:
        """AtariEnv's reset: a seed reseeds both RNGs and reloads the ROM."""
        seeds = self._seed_and_load(seed) if seed is not None else None
        self.ale.reset_game()
        info = self._info()
        if seeds is not None:
            info["seeds"] = seeds
        return info

    def _seed_and_load(self, seed):
        """AtariEnv.seed_game and load_game: one seed gives the no-op RNG's and the emulator's."""
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self._np_random, _ = seeding.np_random(int(np_seed))
        self.ale.setInt("random_seed", np.int32(ale_seed))
        self.ale.loadROM(self._rom)
        if self._mode is not None:
            self.ale.setMode(self._mode)
        if self._difficulty is not None:
            self.ale.setDifficulty(self._difficulty)
        return np_seed, ale_seed

    # --- saving and restoring -------------------------------------------------------------------
    def reference_layers(self) -> list[tuple[str, dict]]:
        """(wrapper name, its changing fields) of the reference stack this game stands for,
        outermost first: what worker_state.py saves for a gymnasium stack."""
        layers = []
        if self.train:
            layers += [("ClipReward", {}), ("LifeLossTerminal", {"lives": self._life_lives, "game_over": self._life_game_over})]
        if self.fire:
            layers.append(("FireOnReset", {}))
        return layers + [
            ("RecordEpisodeStatistics", {"episode_returns": self.episode_returns, "episode_lengths": self.episode_lengths}),
            ("AtariPreprocessing", {"obs_buffer": [frame.copy() for frame in self._frames],
                                    "lives": self._preprocessing_lives, "game_over": self._preprocessing_game_over}),
            ("OrderEnforcing", {"_has_reset": self._has_reset}),
            ("PassiveEnvChecker", {}),
        ]

    def restore_reference_layers(self, fields: list[dict]) -> None:
        """The inverse of reference_layers, given its fields in its order (names already checked)."""
        saved = {name: values for (name, _), values in zip(self.reference_layers(), fields)}
        if self.train:
            self._life_lives = saved["LifeLossTerminal"]["lives"]
            self._life_game_over = saved["LifeLossTerminal"]["game_over"]
        self.episode_returns = saved["RecordEpisodeStatistics"]["episode_returns"]
        self.episode_lengths = saved["RecordEpisodeStatistics"]["episode_lengths"]
        for frame, value in zip(self._frames, saved["AtariPreprocessing"]["obs_buffer"]):
            np.copyto(frame, value)
        self._preprocessing_lives = saved["AtariPreprocessing"]["lives"]
        self._preprocessing_game_over = saved["AtariPreprocessing"]["game_over"]
        self._has_reset = saved["OrderEnforcing"]["_has_reset"]
