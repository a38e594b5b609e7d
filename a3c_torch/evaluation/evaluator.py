"""The trainer's evaluator process: every --eval-interval seconds, --eval-episodes full games
(games.py) with a copy of the shared weights; their mean goes to the trainer, with the weights
when it is a new best.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from a3c_torch.child_context import EvaluatorContext
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError
from a3c_torch.evaluation.games import EpisodeResult, play_one_game, summarize
from a3c_torch.messages import Evaluation
from a3c_torch.model import ActorCritic
from a3c_torch.processes import parent_alive, run_child, setup_child


def resolve_device(choice: str) -> torch.device:
    """auto -> cuda when torch sees a GPU, else cpu; asking for cuda without one is a user error."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--eval-device cuda: torch sees no CUDA device on this machine (use auto or cpu)")
    if choice not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {choice!r} (choose auto, cpu or cuda)")
    return torch.device(choice)


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
        results = _evaluation_games(model, env, cfg.eval_episodes, device, stopping)
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


def _evaluation_games(model: ActorCritic, env, games: int, device: torch.device, should_stop: Callable[[], bool]) -> list[EpisodeResult]:
    """`games` full games one after the other (the env and torch's generator go on from game to
    game); fewer when `should_stop()` says so, between games or during one."""
    results = []
    for _ in range(games):
        result = play_one_game(model, env, device, should_stop=should_stop)
        if result is None:
            break
        results.append(result)
        if should_stop():
            break
    return results
