"""What evaluate.py plays: which run and checkpoint, the settings saved in it, and its model.

The env is rebuilt from the checkpoint's own saved config with the evaluation stack (no reward
clipping, no life-loss episodes), so the scores are full-game scores under the same settings the
agent was trained with (sticky actions, screen size, action set). Whatever does not fit is a
UsageError naming the path or flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from pathlib import Path

import torch

from a3c_torch.config import Config
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.storage.checkpoint import checkpoint_in, load_checkpoint, newest_run, resolve_checkpoint

# --- which run and checkpoint ---------------------------------------------------------------


def choose_checkpoint(args: argparse.Namespace) -> Path:
    if args.checkpoint:
        return resolve_checkpoint(args.checkpoint, prefer_best=True)
    return checkpoint_in(chosen_run_dir(args), prefer_best=True)


def chosen_run_dir(args: argparse.Namespace) -> Path:
    if args.run_dir:
        run_dir = Path(args.run_dir)
        if not run_dir.is_dir():
            raise UsageError(f"{run_dir}: no such run directory")
        return run_dir
    return newest_run(args.runs_dir)


def run_dir_to_plot(args: argparse.Namespace) -> Path:
    if args.checkpoint:
        return run_dir_of_checkpoint(resolve_checkpoint(args.checkpoint, prefer_best=True))
    return chosen_run_dir(args)


def run_dir_of_checkpoint(checkpoint_path: Path) -> Path:
    """A checkpoint written by train.py lives in <run>/checkpoints/; the curves are in <run>."""
    if checkpoint_path.parent.name != "checkpoints":
        raise UsageError(f"{checkpoint_path}: --plot needs the run directory, and this file is not in a run's checkpoints/ folder (use --run-dir)")
    return checkpoint_path.parent.parent


# --- checkpoint, env and model --------------------------------------------------------------


def load(checkpoint_path: Path) -> dict:
    # torch warns (several lines) about unusual pickle protocols before refusing them; the
    # refusal itself is reported by load_checkpoint as one line.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_checkpoint(checkpoint_path)


def saved_config(checkpoint: dict, checkpoint_path: Path) -> Config:
    saved = checkpoint["config"]
    if not isinstance(saved, dict) or not isinstance(saved.get("env_id"), str):
        raise UsageError(f"{checkpoint_path}: the checkpoint's config has no env id")
    try:
        return Config.from_dict(saved)
    except TypeError as exc:
        raise UsageError(f"{checkpoint_path}: the checkpoint's config is unusable: {exc}") from None


def env_settings(cfg: Config, env_id_override: str | None) -> EnvSettings:
    settings = EnvSettings.from_config(cfg)
    if env_id_override:
        settings = dataclasses.replace(settings, env_id=env_id_override)
    return settings


def spaces_of(env) -> tuple[tuple[int, ...], int]:
    return tuple(env.observation_space.shape), int(env.action_space.n)


def check_same_spaces(cfg: Config, settings: EnvSettings, env) -> None:
    """A model only fits an env with the observation shape and action count it was trained on."""
    trained_env = make_env(EnvSettings.from_config(cfg), train=False)
    try:
        trained = spaces_of(trained_env)
    finally:
        trained_env.close()
    wanted = spaces_of(env)
    if wanted != trained:
        raise UsageError(
            f"--env-id {settings.env_id}: observation shape {wanted[0]} and {wanted[1]} actions do not match "
            f"the checkpoint's env {cfg.env_id} (observation shape {trained[0]}, {trained[1]} actions)"
        )


def load_model(checkpoint: dict, checkpoint_path: Path, cfg: Config, env, device: torch.device) -> ActorCritic:
    obs_shape, num_actions = spaces_of(env)
    model = ActorCritic(obs_shape, num_actions, cfg.hidden_size, cfg.model)
    try:
        model.load_state_dict(checkpoint["model"])
    except (RuntimeError, TypeError, AttributeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{checkpoint_path}: the model weights do not fit {cfg.env_id} (obs {obs_shape}, {num_actions} actions): {first}") from None
    return model.to(device).eval()
