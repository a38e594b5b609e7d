"""Playing full games with a policy: `play_episodes()`, shared by the evaluator process and evaluate.py.

Evaluation uses the evaluation env stack (no reward clipping, no life-loss episodes): the scores
are full-game scores. An episode is bounded by the env's own time limit (for ALE v5, 108,000
frames) and reported as cut when it hits it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from a3c_torch.child_context import EvaluatorContext
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError
from a3c_torch.messages import Evaluation
from a3c_torch.model import ActorCritic, sample_action
from a3c_torch.processes import parent_alive, run_child, setup_child


@dataclass
class EpisodeResult:
    episode_return: float
    length: int
    truncated: bool  # cut by the time limit rather than ended by the game


def resolve_device(choice: str) -> torch.device:
    """auto -> cuda when torch sees a GPU, else cpu; asking for cuda without one is a user error."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--eval-device cuda: torch sees no CUDA device on this machine (use auto or cpu)")
    if choice not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {choice!r} (choose auto, cpu or cuda)")
    return torch.device(choice)


def play_episodes(model: ActorCritic, env, episodes: int, device=None, greedy: bool = False, seed: int | None = None, should_stop=lambda: False) -> list[EpisodeResult]:
    """Play `episodes` whole episodes; stops early (returning fewer) when `should_stop()` says so."""
    device = device if device is not None else torch.device("cpu")
    results = []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
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
                results.append(EpisodeResult(episode_return, length, bool(truncated and not terminated)))
                break
            if length % 1000 == 0 and should_stop():
                return results
        if should_stop():
            break
    return results


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


def evaluator_main(context: EvaluatorContext) -> None:
    """Process entry point (spawned): evaluate every --eval-interval seconds until stopped."""
    run_child(context.name, context.to_trainer, _evaluate_periodically, context)


def _evaluate_periodically(context: EvaluatorContext) -> None:
    cfg, stop_flag, best_so_far = context.cfg, context.stop_flag, context.best_so_far
    setup_child(context.trainer_pid)
    device = torch.device(context.device)
    torch.manual_seed(cfg.seed + 10_000)
    model = ActorCritic.like(context.shared_model).to(device)
    env = make_env(EnvSettings.from_config(cfg), seed=cfg.seed + 10_000, train=False)
    stopping = lambda: stop_flag.is_set() or not parent_alive(context.trainer_pid)  # noqa: E731
    next_eval = time.monotonic() + cfg.eval_interval
    while not stopping():
        if stop_flag.wait(timeout=min(1.0, max(0.0, next_eval - time.monotonic()))):
            break
        if time.monotonic() < next_eval:
            continue
        step = context.global_steps.value
        weights = {k: v.clone() for k, v in context.shared_model.state_dict().items()}
        model.load_state_dict(weights)
        model.eval()
        results = play_episodes(model, env, cfg.eval_episodes, device, should_stop=stopping)
        if len(results) < cfg.eval_episodes:
            break  # stopped mid-evaluation: a partial mean would be misleading
        summary = summarize(results)
        # The one place that decides what is a new best (the run's saved best is where it starts).
        new_best = best_so_far is None or summary["mean"] > best_so_far
        if new_best:
            best_so_far = summary["mean"]
        context.to_trainer.put(Evaluation(step, summary["mean"], summary["std"], summary["mean_length"], new_best, weights if new_best else None))
        next_eval = time.monotonic() + cfg.eval_interval
    env.close()
