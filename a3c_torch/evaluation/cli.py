"""`python evaluate.py`: play full games with a trained checkpoint and report the scores.

Its flags, and the order of the work: everything that can fail on bad input (the flags, the
destinations of the results, the checkpoint and its env, the display or video writer) is checked
before the first game is played. Every user error is a UsageError with one line naming the path
or flag; evaluate.py prints it and exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ale_py
import torch

from a3c_torch.config import HelpFormatter, given_settings
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError, program_name
from a3c_torch.evaluation.evaluator import resolve_device
from a3c_torch.evaluation.games import EpisodeResult, play_games_in_sequence
from a3c_torch.evaluation.loading import check_same_spaces, choose_checkpoint, env_settings, load, load_model, run_dir_of_checkpoint, run_dir_to_plot, saved_config
from a3c_torch.evaluation.parallel import PlayerFailed, play_games_in_parallel
from a3c_torch.evaluation.render import WindowClosed, check_display, with_window
from a3c_torch.evaluation.report import build_report, format_table, write_json
from a3c_torch.evaluation.video import check_video_rendering, prepare_video_dir, with_video
from a3c_torch.model import ActorCritic
from a3c_torch.storage.files import check_destination

# The settings that only matter when games are played: `--plot` alone plays none, and with any of
# these given (whatever its value) it plays too.
PLAYING_SETTINGS = ("episodes", "seed", "device", "greedy", "env_id", "record_video", "render", "json", "num_processes")
# More players than this is a typo: each is a process with its own emulator and model copy.
MAX_EVAL_PROCESSES = 256


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2, like every user error here."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=program_name("evaluate.py"),
        description=(
            "Play full games with a trained checkpoint and print the score table. With no arguments: "
            "the newest run under --runs-dir, its best.pt (else latest.pt). `--plot FILE.png` alone only "
            "draws the run's learning curve; add --episodes (or any playing flag) to also play."
        ),
        formatter_class=HelpFormatter,  # real defaults only, never '(default: None)'
        allow_abbrev=False,  # every flag by its full name, as train.py's
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


def wants_games(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace) -> bool:
    """Whether to play games: always, unless `--plot` is given without any playing flag."""
    return args.plot is None or bool(given_settings(parser, argv, PLAYING_SETTINGS))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(args)
    check_results_destinations(args)  # before the checkpoint is loaded and any game is played
    # ALE prints a banner on stderr for every new emulator; it would bury our one-line errors.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    if not wants_games(parser, argv, args):
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
