"""Playing full games with a policy, for the trainer's evaluator and for evaluate.py.

Games are played with the evaluation env stack (no reward clipping, no life-loss episodes): the
scores are full-game scores. A game is bounded by the env's own time limit (for ALE v5, 108,000
frames) and reported as cut when it hits it.

evaluate.py plays seeded games (`play_seeded_game`): game i is reset with seed + i and its actions
are sampled from a generator seeded with seed + i, so its score does not depend on whether the
games were played one after the other (`play_games_in_sequence`, here) or by several processes
at once (`play_games_in_parallel`, parallel.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from a3c_torch.model import ActorCritic, sample_action

STOP_CHECK_STEPS = 1000  # how often a game in progress asks whether to stop


@dataclass
class EpisodeResult:
    episode_return: float
    length: int
    truncated: bool  # cut by the time limit rather than ended by the game


def play_one_game(model: ActorCritic, env, device: torch.device | None = None, greedy: bool = False, seed: int | None = None,
                  should_stop: Callable[[], bool] = lambda: False) -> EpisodeResult | None:
    """One whole game from `env.reset(seed=seed)`; None when `should_stop()` said stop before it ended."""
    device = device if device is not None else torch.device("cpu")
    obs, _ = env.reset(seed=seed)
    state = model.initial_state(1, device)
    episode_return, length = 0.0, 0
    while True:
        with torch.inference_mode():
            logits, _, state = model(torch.as_tensor(obs, device=device).unsqueeze(0), state)
            action = int(sample_action(logits, greedy)[0])
        obs, reward, terminated, truncated, _ = env.step(action)
        episode_return += float(reward)
        length += 1
        if terminated or truncated:
            return EpisodeResult(episode_return, length, bool(truncated and not terminated))
        if length % STOP_CHECK_STEPS == 0 and should_stop():
            return None


def play_seeded_game(model: ActorCritic, env, device: torch.device, greedy: bool, seed: int) -> EpisodeResult:
    """One full game, reset with `seed`, its actions sampled with a generator seeded with `seed`."""
    torch.manual_seed(seed)
    return play_one_game(model, env, device, greedy=greedy, seed=seed)


def play_games_in_sequence(model: ActorCritic, env, games: int, seed: int, greedy: bool, device: torch.device,
                           on_result: Callable[[int, EpisodeResult], None]) -> None:
    """Games 0..games-1 one at a time in `env` (game i seeded with seed + i); `on_result(i, result)`
    as each ends."""
    for i in range(games):
        on_result(i, play_seeded_game(model, env, device, greedy, seed + i))


def summarize(results: list[EpisodeResult]) -> dict:
    returns = np.array([r.episode_return for r in results], dtype=np.float64)
    lengths = np.array([r.length for r in results], dtype=np.float64)
    return {
        "episodes": len(results),
        "mean": float(returns.mean()),
        "std": float(returns.std()),
        # How far the mean itself may be off: 10 games of Pong with a std of 3 give about 1.
        "standard_error": float(returns.std(ddof=1) / np.sqrt(len(returns))) if len(returns) > 1 else None,
        "median": float(np.median(returns)),
        "min": float(returns.min()),
        "max": float(returns.max()),
        "mean_length": float(lengths.mean()),
        "truncated": int(sum(r.truncated for r in results)),
        "returns": returns.tolist(),
    }
