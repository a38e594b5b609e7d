"""`python evaluate.py`: play full games with a trained checkpoint and report the scores.

The env is rebuilt from the checkpoint's own saved config with the evaluation stack (no reward
clipping, no life-loss episodes), so the scores are full-game scores under the same settings the
agent was trained with (sticky actions, screen size, action set). Every user error is a
UsageError with one line naming the path or flag; evaluate.py prints it and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import warnings
from pathlib import Path

import ale_py
import gymnasium as gym
import torch

from a3c_torch.checkpoint import checkpoint_in, load_checkpoint, newest_run, resolve_checkpoint
from a3c_torch.config import Config, HelpFormatter
from a3c_torch.envs import ATARI_FRAME_SKIP, EnvSettings, is_atari, make_env
from a3c_torch.errors import UsageError, require_writable
from a3c_torch.evaluation_report import build_report, format_table, write_json
from a3c_torch.evaluator import EpisodeResult, resolve_device
from a3c_torch.files import check_destination
from a3c_torch.model import ActorCritic
from a3c_torch.parallel_games import PlayerFailed, play_game, play_in_parallel
from a3c_torch.render import RenderToWindow, Window, WindowClosed, check_display

# Flags that only matter when games are played: `--plot` alone plays none.
PLAYING_FLAGS = ("--episodes", "--seed", "--device", "--greedy", "--env-id", "--record-video", "--render", "--json", "--num-processes")
# More players than this is a typo: each is a process with its own emulator and model copy.
MAX_EVAL_PROCESSES = 256


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2, like every user error here."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="evaluate.py",
        description=(
            "Play full games with a trained checkpoint and print the score table. With no arguments: "
            "the newest run under --runs-dir, its best.pt (else latest.pt). `--plot FILE.png` alone only "
            "draws the run's learning curve; add --episodes (or any playing flag) to also play."
        ),
        formatter_class=HelpFormatter,  # real defaults only, never '(default: None)'
        allow_abbrev=False,  # playing flags are recognised by their full names (see PLAYING_FLAGS)
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--checkpoint", metavar="PATH", help="checkpoint file to evaluate (default: the newest run's best.pt, else latest.pt)")
    source.add_argument("--run-dir", metavar="DIR", help="run directory to evaluate: its checkpoints/best.pt, else latest.pt")
    parser.add_argument("--runs-dir", metavar="DIR", default="runs", help="where to look for the newest run when neither --checkpoint nor --run-dir is given")
    parser.add_argument("--episodes", type=int, metavar="N", default=10, help="number of full games to play")
    parser.add_argument("--seed", type=int, metavar="N", default=0, help="game i is reset with seed N + i, and its actions are sampled with a generator seeded with N + i (so a game's score does not depend on --num-processes)")
    parser.add_argument("--num-processes", type=int, metavar="N", default=1, help="play the games on N processes at once, one CPU core each (not with --render or --record-video)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where the network runs (auto: cuda when available)")
    parser.add_argument("--greedy", action="store_true", help="take the most probable action instead of sampling from the policy")
    parser.add_argument("--env-id", metavar="ID", help="play another env than the checkpoint's (needs the same observation shape and number of actions)")
    parser.add_argument("--record-video", metavar="DIR", help="write an mp4 of every game into DIR")
    parser.add_argument("--render", action="store_true", help="watch the games live in a window, at the game's own speed (Atari: 60 frames/s; needs a display; closing the window stops)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH ('-' for stdout; the table then goes to stderr)")
    parser.add_argument("--plot", metavar="PNG", help="write the run's learning curve (training and evaluation returns against global steps) to this PNG")
    return parser


def wants_games(argv: list[str], args: argparse.Namespace) -> bool:
    if args.plot is None:
        return True
    return any(arg == flag or arg.startswith(flag + "=") for arg in argv for flag in PLAYING_FLAGS)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    check_args(args)
    check_results_destinations(args)  # before the checkpoint is loaded and any game is played
    # ALE prints a banner on stderr for every new emulator; it would bury our one-line errors.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    if not wants_games(argv, args):
        plot(run_dir_to_plot(args), args.plot, sys.stdout)
        return 0
    out = sys.stderr if args.json == "-" else sys.stdout  # stdout then holds only the JSON
    try:
        report = evaluate_checkpoint(args, out)
    except WindowClosed:
        print("the window was closed: evaluation stopped", file=out, flush=True)
        return 0
    except PlayerFailed as failure:
        print(f"evaluate.py: {failure}", file=sys.stderr, flush=True)
        return 1
    print("\n" + format_table(report), file=out, flush=True)
    if args.record_video:
        print(f"videos: {args.record_video}", file=out)
    if args.json:
        write_json(report, args.json)
    if report["interrupted"]:
        print(f"evaluate.py: interrupted: {report['episodes']} of {args.episodes} games played, and reported", file=sys.stderr, flush=True)
        return 130
    return 0


def evaluate_checkpoint(args: argparse.Namespace, out) -> dict:
    """Everything that can fail on bad input is checked before the first game is played."""
    if args.render:
        check_display()  # before any slow work: a headless machine is told at once
    device = choose_device(args.device)
    checkpoint_path = choose_checkpoint(args)
    checkpoint = load(checkpoint_path)
    cfg = saved_config(checkpoint, checkpoint_path)
    settings = env_settings(cfg, args.env_id)
    if args.record_video:
        prepare_video_dir(args.record_video)
        check_video_rendering(settings, args.seed)
    env = make_env(settings, seed=args.seed, train=False, render_mode="rgb_array" if args.record_video or args.render else None)
    try:
        if args.env_id:
            check_same_spaces(cfg, settings, env)
        model = load_model(checkpoint, checkpoint_path, cfg, env, device)
        if args.plot:
            plot(run_dir_of_checkpoint(checkpoint_path), args.plot, out)
        if args.record_video:
            env = with_video(env, args.record_video, settings, checkpoint_path)
        if args.render:
            env = with_window(env, settings, checkpoint_path)
        played = play_until_interrupted(model, env, settings, args, device, out)
    finally:
        env.close()  # also writes the last video
    games = sorted(played)
    return build_report([played[i] for i in games], [args.seed + i for i in games], checkpoint_path, checkpoint, settings, args, device)


def check_args(args: argparse.Namespace) -> None:
    if args.episodes <= 0:
        raise UsageError(f"--episodes must be a positive integer, got {args.episodes}")
    if not 0 <= args.seed < 2**31:  # game i is reset with seed + i: env seeds are unsigned
        raise UsageError(f"--seed must be in [0, 2**31), got {args.seed}")
    if not 1 <= args.num_processes <= MAX_EVAL_PROCESSES:
        raise UsageError(f"--num-processes must be between 1 and {MAX_EVAL_PROCESSES}, got {args.num_processes}")
    if args.num_processes > 1 and (args.render or args.record_video):
        shown = "--render" if args.render else "--record-video"
        raise UsageError(f"{shown} plays the games one at a time, in one process: drop --num-processes {args.num_processes}")


def check_results_destinations(args: argparse.Namespace) -> None:
    if args.json and args.json != "-":
        check_destination(args.json, "--json")
    if args.plot:
        check_destination(args.plot, "--plot")


def choose_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use auto or cpu)")
    return resolve_device(choice)


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


def plot(run_dir: Path, out_path: str, out) -> None:
    from a3c_torch.plotting import plot_learning_curve  # tensorboard and matplotlib load slowly

    written = plot_learning_curve(run_dir, out_path)
    print(f"learning curve of {run_dir}: {written}", file=out, flush=True)


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


def prepare_video_dir(video_dir: str) -> None:
    """The directory exists and takes files: checked before playing, not when the first mp4 is written."""
    path = Path(video_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{path}: --record-video needs a directory, and this is a file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot create the video directory: {exc.strerror or exc}") from None
    require_writable(path, "--record-video cannot write there")


def check_video_rendering(settings: EnvSettings, seed: int) -> None:
    """One frame drawn, and the mp4 writer importable, before any game is played: vector envs
    (CartPole, ...) draw with pygame-ce, RecordVideo writes with moviepy."""
    # Frames are drawn off screen: no window, and no pygame banner on stdout (--json - keeps it pure).
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import moviepy  # noqa: F401
    except ImportError:
        raise UsageError("--record-video needs moviepy to write mp4 files, and it is not installed (pip install -r requirements.txt)") from None
    probe = make_env(settings, seed=seed, train=False, render_mode="rgb_array")
    try:
        probe.reset(seed=seed)
        frame = probe.render()
    except gym.error.DependencyNotInstalled as exc:
        reason = (str(exc).strip().splitlines() or ["a renderer is missing"])[0]
        raise UsageError(f"--record-video: {settings.env_id} cannot draw its frames here: {reason} (pip install -r requirements.txt installs pygame-ce, which CartPole and the other classic-control envs draw with)") from None
    finally:
        probe.close()
    if frame is None:
        raise UsageError(f"--record-video: {settings.env_id} draws no frames (its render() returned nothing)")


def with_video(env, video_dir: str, settings: EnvSettings, checkpoint_path: Path):
    from gymnasium.wrappers import RecordVideo

    # An agent step is ATARI_FRAME_SKIP emulator frames at 60 Hz: 15 fps plays at game speed.
    fps = 60 // ATARI_FRAME_SKIP if is_atari(settings.env_id) else None
    prefix = f"{checkpoint_path.stem}-{settings.env_id.replace('/', '_')}"
    with warnings.catch_warnings():
        # RecordVideo warns about any existing folder, including the one we just made;
        # only files with our own names are replaced.
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return RecordVideo(env, video_dir, episode_trigger=lambda episode: True, name_prefix=prefix, fps=fps)


def with_window(env, settings: EnvSettings, checkpoint_path: Path):
    # Atari: one agent step is ATARI_FRAME_SKIP frames of a 60 Hz game, so 15 steps/s is its own speed.
    fps = 60 / ATARI_FRAME_SKIP if is_atari(settings.env_id) else float(env.metadata.get("render_fps") or 30)
    try:
        env.reset(seed=0)  # every game is reset with its own seed again before it is played
        env.render()  # before the window opens: a vector env's renderer may need pygame
    except gym.error.DependencyNotInstalled as exc:
        raise UsageError(f"--render: {settings.env_id} cannot draw its frames here: {str(exc).strip().splitlines()[0]}") from None
    return RenderToWindow(env, Window(f"{settings.env_id}: {checkpoint_path}", fps))


# --- playing ------------------------------------------------------------------


def play_until_interrupted(model: ActorCritic, env, settings: EnvSettings, args: argparse.Namespace, device: torch.device, out) -> dict[int, EpisodeResult]:
    """The games played (game index -> result), each printed as it ends. Ctrl-C stops the playing,
    and the games already played are kept for the table and the JSON; with none, it goes on up."""
    played: dict[int, EpisodeResult] = {}

    def on_result(i: int, result: EpisodeResult) -> None:
        played[i] = result
        report_game(i, result, args.episodes, out)

    try:
        if args.num_processes > 1:
            play_in_parallel(model, settings, args.episodes, args.seed, args.greedy, device, args.num_processes, on_result)
        else:
            play(model, env, args, device, on_result)
    except KeyboardInterrupt:
        if not played:
            raise
    return played


def play(model: ActorCritic, env, args: argparse.Namespace, device: torch.device, on_result) -> None:
    """One game at a time (game i seeded with seed + i); `on_result(i, result)` as each ends."""
    for i in range(args.episodes):
        on_result(i, play_game(model, env, device, args.greedy, args.seed + i))


def report_game(i: int, result: EpisodeResult, games: int, out) -> None:
    cut = " (cut by the time limit)" if result.truncated else ""
    print(f"episode {i + 1:>3}/{games}  return {result.episode_return:10.2f}  length {result.length:>7,}{cut}", file=out, flush=True)
