"""How much of an agent step's emulator time is our Python env stack, and how much the emulator.

One process, random actions, three ways of playing K Atari games side by side, measured in
interleaved blocks so a shared machine's drift hits all three alike:
- `ours`: K gymnasium envs with the training stack (`make_env(train=True)`), stepped one by one,
  as a worker's RolloutCollector steps them;
- `vector`: ale-py's AtariVectorEnv with the same preprocessing done in C++ (frame skip 4, max
  of the last two frames, 84x84 grayscale, one frame, sticky actions 0.25, raw rewards, no
  FIRE at reset), on one thread;
- `raw`: the bare ALEInterface, 4 `act` calls and one grayscale screen per agent step, no resize:
  a floor for what any Python-driven env stack can cost.

It prints agent steps/s for each and the ratios to `ours`: what replacing our env stack could
gain at most, before any change to the worker. Usage:
    python benchmarks/emulator_cost.py [--env-id ALE/Pong-v5] [--envs 4] [--seconds 20]
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
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ale_py  # noqa: E402
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from a3c_torch.envs import EnvSettings, make_env  # noqa: E402

BLOCK_S = 2.0  # one interleaved block per setup


def ours(env_id: str, envs: int, rng):
    games = [make_env(EnvSettings(env_id), seed=k, train=True) for k in range(envs)]
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


def raw(env_id: str, envs: int, rng):
    games = []
    for k in range(envs):
        ale = ale_py.ALEInterface()
        ale.setInt("random_seed", k)
        ale.setFloat("repeat_action_probability", 0.25)
        ale.loadROM(ale_py.roms.get_rom_path(gym.spec(env_id).kwargs["game"]))
        games.append(ale)
    action_set = games[0].getMinimalActionSet()
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


SETUPS = {"ours": ours, "vector": vector, "raw": raw}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--envs", type=int, default=4, help="games played side by side (a worker's --envs-per-process)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per setup")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    rng = np.random.default_rng(0)
    players = {name: make(args.env_id, args.envs, rng) for name, make in SETUPS.items()}
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
    print(f"{'setup':8} {'steps/s':>9} {'x ours':>7} {'us/step':>8} {'cpu/wall':>8}")
    for name in players:
        print(f"{name:8} {rates[name]:9.0f} {rates[name] / rates['ours']:7.2f} {1e6 / rates[name]:8.0f} {cpu[name] / seconds:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"env_id": args.env_id, "envs": args.envs, "seconds": seconds, "steps_per_s": rates,
                                               "cpu_per_wall": {n: cpu[n] / seconds for n in players}, "load_average": load}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
