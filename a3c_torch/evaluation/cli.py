"""`python evaluate.py`: play full games with a trained checkpoint and report the scores.

The order of the work: everything that can fail on bad input (the flags and the destinations of
the results, in flags.py; the checkpoint and its env, the display or video writer) is checked
before the first game is played. Every user error is a UsageError with one line naming the path
or flag; evaluate.py prints it and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ale_py
import torch

from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError, program_name
from a3c_torch.evaluation.evaluator import resolve_device
from a3c_torch.evaluation.games import EpisodeResult, play_games_in_sequence
from a3c_torch.evaluation.loading import check_same_spaces, choose_checkpoint, env_settings, load, load_model, run_dir_of_checkpoint, run_dir_to_plot, saved_config
from a3c_torch.evaluation.parallel import PlayerFailed, play_games_in_parallel
from a3c_torch.evaluation.render import WindowClosed, with_window
from a3c_torch.evaluation.report import build_report, format_table, write_json
from a3c_torch.evaluation.video import check_video_rendering, prepare_video_dir, with_video
from a3c_torch.model import ActorCritic


def run(args: argparse.Namespace, play: bool) -> int:
    """evaluate.py once its flags are parsed and checked (flags.parse, run before torch is imported:
    a3c_torch.cli.evaluate); `play` False: only --plot."""
    # ALE prints a banner on stderr for every new emulator; it would bury our one-line errors.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    if not play:
        plot(run_dir_to_plot(args), args.plot, sys.stdout)
        return 0
    out = sys.stderr if args.json == "-" else sys.stdout  # stdout then holds only the JSON
    try:
        report = evaluate_checkpoint(args, out)
    except WindowClosed:
        print("the window was closed: evaluation stopped", file=out, flush=True)
        return 0
    except PlayerFailed as failure:
        print(f"{program_name('evaluate.py')}: {failure}", file=sys.stderr, flush=True)
        return 1
    print("\n" + format_table(report), file=out, flush=True)
    if args.record_video:
        print(f"videos: {args.record_video}", file=out)
    if args.json:
        write_json(report, args.json)
    if report["interrupted"]:
        print(f"{program_name('evaluate.py')}: interrupted: {report['episodes']} of {args.episodes} games played, and reported", file=sys.stderr, flush=True)
        return 130
    return 0


def evaluate_checkpoint(args: argparse.Namespace, out) -> dict:
    """Everything that can fail on bad input is checked before the first game is played."""
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


def choose_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device on this machine (use auto or cpu)")
    return resolve_device(choice)


def plot(run_dir: Path, out_path: str, out) -> None:
    from a3c_torch.evaluation.plotting import plot_learning_curve  # tensorboard and matplotlib load slowly

    written = plot_learning_curve(run_dir, out_path)
    print(f"learning curve of {run_dir}: {written}", file=out, flush=True)


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
            play_games_in_parallel(model, settings, args.episodes, args.seed, args.greedy, device, args.num_processes, on_result)
        else:
            play_games_in_sequence(model, env, args.episodes, args.seed, args.greedy, device, on_result)
    except KeyboardInterrupt:
        if not played:
            raise
    return played


def report_game(i: int, result: EpisodeResult, games: int, out) -> None:
    cut = " (cut by the time limit)" if result.truncated else ""
    print(f"episode {i + 1:>3}/{games}  return {result.episode_return:10.2f}  length {result.length:>7,}{cut}", file=out, flush=True)
