"""How much of an agent step's emulator time is our Python env stack, and how much the emulator.

One process, random actions, five ways of playing K Atari games side by side, measured in
interleaved blocks so a shared machine's drift hits all of them alike:
- `gymnasium`: K envs with the gymnasium training stack (`make_env(train=True, lean=False)`),
  stepped one by one, as a worker's RolloutCollector steps them (called `ours` before the lean
  stack existed);
- `lean`: the same with the lean training stack (`make_env(train=True)`, a3c_torch/atari.py),
  what the workers play;
- `bare`: the bare ALEInterface doing the lean stack's emulator and observation work and nothing
  else (4 `act` calls, two grayscale screens, their max, the INTER_AREA resize): the floor for
  any stack that gives these observations, the t_ale of benchmarks/limit.py;
- `vector`: ale-py's AtariVectorEnv with the same preprocessing done in C++ (frame skip 4, max
  of the last two frames, 84x84 grayscale, one frame, sticky actions 0.25, raw rewards, no
  FIRE at reset), on one thread;
- `raw`: the bare ALEInterface, 4 `act` calls and one grayscale screen per agent step, no second
  screen, max or resize: less work than any of the others.

It prints agent steps/s for each and the ratios to `gymnasium`. Usage:
    python -m benchmarks.emulator_cost [--env-id ALE/Pong-v5] [--envs 4] [--seconds 20] [--setups lean bare]
Take the numbers on an idle machine (benchmarks/run_idle.sh pauses the others).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import ale_py  # noqa: E402
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from a3c_torch.envs import EnvSettings, make_env  # noqa: E402
from benchmarks.limit import BareAle  # noqa: E402

BLOCK_S = 2.0  # one interleaved block per setup


def stack(env_id: str, envs: int, rng, lean: bool):
    games = [make_env(EnvSettings(env_id), seed=k, train=True, lean=lean) for k in range(envs)]
    for k, env in enumerate(games):
        env.reset(seed=k)
    actions = games[0].action_space.n

    def play() -> int:
        for env in games:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(actions)))
            if terminated or truncated:
                env.reset()
        return envs

    return play


def gymnasium(env_id: str, envs: int, rng):
    return stack(env_id, envs, rng, lean=False)


def lean(env_id: str, envs: int, rng):
    return stack(env_id, envs, rng, lean=True)


def vector(env_id: str, envs: int, rng):
    game = gym.spec(env_id).kwargs["game"]
    env = ale_py.vector_env.AtariVectorEnv(
        game, envs, num_threads=1, stack_num=1, repeat_action_probability=0.25, reward_clipping=False,
        life_loss_info=True, use_fire_reset=False, autoreset_mode="SameStep",
    )
    env.reset(seed=0)
    actions = env.single_action_space.n

    def play() -> int:
        env.step(rng.integers(actions, size=envs).astype(np.int32))
        return envs

    return play


def bare(env_id: str, envs: int, rng):
    """The t_ale of benchmarks/limit.py."""
    return BareAle(env_id, envs, 84, 0.25, False, rng).step


def raw(env_id: str, envs: int, rng):
    ale = BareAle(env_id, envs, 84, 0.25, False, rng)
    games, action_set = ale.games, ale.action_set
    screen = np.empty(games[0].getScreenDims(), dtype=np.uint8)

    def play() -> int:
        for ale in games:
            action = action_set[int(rng.integers(len(action_set)))]
            for _ in range(4):
                ale.act(action)
            ale.getScreenGrayscale(screen)
            if ale.game_over():
                ale.reset_game()
        return envs

    return play


SETUPS = {"gymnasium": gymnasium, "lean": lean, "bare": bare, "vector": vector, "raw": raw}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--envs", type=int, default=4, help="games played side by side (a worker's --envs-per-process)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per setup")
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS), help="which to measure (gymnasium, the ratios' base, is always measured)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    rng = np.random.default_rng(0)
    chosen = ["gymnasium"] + [name for name in args.setups if name != "gymnasium"]
    players = {name: SETUPS[name](args.env_id, args.envs, rng) for name in chosen}
    for play in players.values():  # warm up
        for _ in range(50):
            play()
    steps = dict.fromkeys(players, 0)
    cpu = dict.fromkeys(players, 0.0)
    blocks = max(1, round(args.seconds / BLOCK_S))
    for _ in range(blocks):
        for name, play in players.items():
            end, cpu0 = time.perf_counter() + BLOCK_S, time.process_time()
            while time.perf_counter() < end:
                steps[name] += play()
            cpu[name] += time.process_time() - cpu0
    seconds = blocks * BLOCK_S
    rates = {name: steps[name] / seconds for name in players}
    load = os.getloadavg()
    print(f"{args.env_id}, {args.envs} games side by side, {seconds:.0f} s each, interleaved; load average {load[0]:.2f}")
    print(f"{'setup':10} {'steps/s':>9} {'x gym':>7} {'us/step':>8} {'cpu/wall':>8}")
    for name in players:
        print(f"{name:10} {rates[name]:9.0f} {rates[name] / rates['gymnasium']:7.2f} {1e6 / rates[name]:8.0f} {cpu[name] / seconds:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"env_id": args.env_id, "envs": args.envs, "seconds": seconds, "steps_per_s": rates,
                                               "cpu_per_wall": {n: cpu[n] / seconds for n in players}, "load_average": load}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
