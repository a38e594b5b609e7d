"""The limit of a training worker on one core, and how close training gets to it.

A worker's agent step cannot cost less than two things it must do:

t_ale  the bare emulator work the lean Atari stack (a3c_torch/atari.py) must call for one agent
       step, on `ale_py.ALEInterface` directly: 4 `act` calls (each followed by the `game_over`
       check that tells when to reset), the grayscale screens of the last two frames, their
       max, and the INTER_AREA resize to --screen-size. No wrappers, no episode statistics, no
       lives, no reward clipping: the floor of any stack that gives these observations. It
       plays K games side by side with random actions, as a worker with K envs does.
t_net  the real ActorCritic's work for one agent step at K envs per worker, done by the
       project's own functions: the acting forward of the K envs under `inference_mode`
       (`ActingForward`, its weights packed once per rollout) with the action sampled
       (`sample_action`), one per step, plus the last-value forward once per
       rollout; and, amortised over the rollout's T x K agent steps, the update: `copy_weights`
       from the shared model, `rollout_loss` (the one-pass recompute with autograd, GAE, the
       loss), then `apply_update` (zero grads, backward, clip, gradient hand-off to the shared
       model, the shared optimizer's step). The rollout holds real frames from the t_ale games
       and no episode ends (one fused LSTM pass, as in most of a Pong rollout).

So one core can train at most 1 / (t_ale + t_net) agent steps/s, and N workers at most

    limit(N) = min(N, CPUs) / (t_ale + t_net)          fraction of the limit = SPS(N) / limit(N)

The rest of a worker's time (Python in the env stack and the rollout loop, the trainer's
messages, the shared counter) is 1 - fraction: what could still be won.

Both costs are timed in one spawned process with one thread (OMP_NUM_THREADS=1,
torch.set_num_threads(1)), after a warm-up (the first optimizer step of a spawned process is
about 1 s slower), in interleaved blocks so that a shared machine's drift hits both alike, as
wall-clock time per agent step. The process's CPU time over its wall time says how much of a
core it got: under 0.9 the costs are inflated, the limit too low and the fractions too high.
"""

from __future__ import annotations

import os
import time

import ale_py
import cv2
import numpy as np

# Below this share of a core the measuring process was starved (the report warns).
MIN_CPU_SHARE = 0.9
BLOCK_S = 0.5  # one interleaved block of each part


def limit_sps(processes: int, cpus: int, t_ale_us: float, t_net_us: float) -> float:
    """Agent steps/s that `processes` workers could train at on `cpus` cores, at most."""
    return min(processes, cpus) * 1e6 / (t_ale_us + t_net_us)


def fraction_of_limit(sps: float, processes: int, cpus: int, t_ale_us: float, t_net_us: float) -> float:
    return sps / limit_sps(processes, cpus, t_ale_us, t_net_us)


def starved(limit: dict) -> bool:
    """Did the measuring process get less than MIN_CPU_SHARE of a core?"""
    return limit["cpu_share"] < MIN_CPU_SHARE


class BareAle:
    """K Atari games played with the lean stack's emulator and observation work and nothing else."""

    def __init__(self, env_id: str, envs: int, screen_size: int, repeat_action_probability: float, full_action_space: bool, rng):
        from a3c_torch.envs import env_spec

        self._rng = rng
        self._size = (screen_size, screen_size)
        rom = ale_py.roms.get_rom_path(env_spec(env_id).kwargs["game"])
        self.games = []
        for k in range(envs):
            ale = ale_py.ALEInterface()
            ale.setLoggerMode(ale_py.LoggerMode.Error)
            ale.setInt("random_seed", k)
            ale.setFloat("repeat_action_probability", repeat_action_probability)
            ale.loadROM(rom)
            self.games.append(ale)
        first = self.games[0]
        self.action_set = first.getLegalActionSet() if full_action_space else first.getMinimalActionSet()
        self._frames = [np.zeros(first.getScreenDims(), np.uint8) for _ in range(2)]
        self.observations = np.zeros((envs, *self._size), np.uint8)

    def step(self) -> int:
        """One agent step in each game (its observation into `observations`); returns K."""
        frames, actions = self._frames, self._rng.integers(len(self.action_set), size=len(self.games))
        for k, ale in enumerate(self.games):
            action = self.action_set[actions[k]]
            for t in range(4):
                ale.act(action, 1.0)
                if ale.game_over():
                    break
                if t >= 2:  # frame 2 into buffer 1, frame 3 into buffer 0, as atari.py does
                    ale.getScreenGrayscale(frames[3 - t])
            np.maximum(frames[0], frames[1], out=frames[0])
            self.observations[k] = cv2.resize(frames[0], self._size, interpolation=cv2.INTER_AREA)
            if ale.game_over():
                ale.reset_game()
        return len(self.games)


class NetworkWork:
    """A worker's network and update for K envs, without the envs: network_breakdown's
    NetworkPhases (the project's own functions on the real ActorCritic, a shared model and the
    shared optimizer), timed here as the limit needs it: acting apart from the rest."""

    def __init__(self, cfg, num_actions: int, frames):
        from benchmarks.network_breakdown import NetworkPhases  # torch loads here, in the measuring process

        self.phases = NetworkPhases(cfg, num_actions, frames)  # frames: (T, K, S, S) uint8

    def rollout(self) -> tuple[float, float, int]:
        """One rollout's network work: (acting seconds, update seconds, agent steps)."""
        from a3c_torch.worker import apply_update, copy_weights, rollout_loss

        phases = self.phases
        cfg, local = phases.cfg, phases.local
        T, K = phases.frames.shape[:2]
        started = time.perf_counter()
        copy_weights(phases.shared, local)
        copied = time.perf_counter()
        rollout = phases.act()
        acted = time.perf_counter()
        terms = rollout_loss(local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
        apply_update(local, phases.shared, phases.optimizer, terms.total, cfg.max_grad_norm)
        done = time.perf_counter()
        return acted - copied, (copied - started) + (done - acted), T * K


def measure(env_id: str, screen_size: int, model: str, envs: int, seconds: float, warmup: float, seed: int = 0) -> dict:
    """t_ale and t_net (us per agent step) for `model` at `envs` envs per worker, in this process
    with one thread: `warmup` seconds of each part, then `seconds` of each in interleaved blocks."""
    os.environ["OMP_NUM_THREADS"] = "1"  # for anything started from here; torch's own count is set below
    import torch

    from a3c_torch.config import Config

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    cfg = Config(env_id=env_id, screen_size=screen_size, model=model, envs_per_process=envs)
    ale = BareAle(env_id, envs, screen_size, cfg.repeat_action_probability, cfg.full_action_space, np.random.default_rng(seed))
    frames = np.empty((cfg.num_steps, envs, screen_size, screen_size), np.uint8)
    for t in range(cfg.num_steps):  # the rollout's frames: real screens of these games
        ale.step()
        frames[t] = ale.observations
    net = NetworkWork(cfg, len(ale.action_set), frames)

    totals = {"ale_s": 0.0, "ale_steps": 0, "act_s": 0.0, "update_s": 0.0, "net_steps": 0, "rollouts": 0}

    def ale_block(duration: float) -> None:
        start = time.perf_counter()
        end = start + duration
        steps = 0
        while True:
            steps += ale.step()
            now = time.perf_counter()
            if now >= end:
                break
        totals["ale_s"] += now - start
        totals["ale_steps"] += steps

    def net_block(duration: float) -> None:
        end = time.perf_counter() + duration
        while True:
            act_s, update_s, steps = net.rollout()
            totals["act_s"] += act_s
            totals["update_s"] += update_s
            totals["net_steps"] += steps
            totals["rollouts"] += 1
            if time.perf_counter() >= end:
                break

    for _ in range(2):  # the first optimizer step of a process is slow: at least two rollouts
        net.rollout()
    ale_block(warmup)
    net_block(warmup)
    totals = dict.fromkeys(totals, 0)
    blocks = max(1, round(seconds / BLOCK_S))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(blocks):
        ale_block(seconds / blocks)
        net_block(seconds / blocks)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    t_ale = 1e6 * totals["ale_s"] / totals["ale_steps"]
    t_act = 1e6 * totals["act_s"] / totals["net_steps"]
    t_update = 1e6 * totals["update_s"] / totals["net_steps"]
    return {
        "model": model, "envs_per_process": envs, "num_steps": cfg.num_steps, "screen_size": screen_size,
        "t_ale_us": t_ale, "t_net_us": t_act + t_update, "t_act_us": t_act, "t_update_us": t_update,
        "limit_sps_per_core": 1e6 / (t_ale + t_act + t_update),
        "ale_steps": totals["ale_steps"], "rollouts": totals["rollouts"],
        "wall_s": wall, "cpu_s": cpu, "cpu_share": cpu / wall,
        "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }  # fmt: skip


def in_spawned_process(function, *args):
    """`function(*args)` in a fresh spawned process (one OpenMP thread, nothing left over from
    earlier measurements), its result returned."""
    import multiprocessing as mp

    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # the child inherits the environment as it is now
    try:
        pool = mp.get_context("spawn").Pool(1)
    finally:
        if before is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = before
    with pool:
        return pool.apply(function, args)


def measure_in_child(env_id: str, screen_size: int, model: str, envs: int, seconds: float, warmup: float, seed: int = 0) -> dict:
    """`measure` in a spawned process of its own."""
    return in_spawned_process(measure, env_id, screen_size, model, envs, seconds, warmup, seed)
