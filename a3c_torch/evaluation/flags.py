"""`evaluate.py`'s flags, and the checks that need nothing but them and the file system.

Light on purpose (no torch, no gymnasium): `a3c_torch.cli.evaluate` parses and checks here first,
so `--help` and a mistyped flag answer at once instead of after the ~1.5 s those imports take.
"""

from __future__ import annotations

import argparse
import os

from a3c_torch.config import HelpFormatter, given_settings
from a3c_torch.errors import UsageError, program_name
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


def parse(argv: list[str]) -> tuple[argparse.Namespace, bool]:
    """The flags, checked (a UsageError names the first bad one), and whether to play games."""
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(args)
    if args.render:
        check_display()  # first: a headless machine is told at once, whatever else is wrong
    check_sources_exist(args)  # a mistyped path is told in a tenth of a second, not after torch loads
    check_results_destinations(args)  # before the checkpoint is loaded and any game is played
    return args, wants_games(parser, argv, args)


def wants_games(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace) -> bool:
    """Whether to play games: always, unless `--plot` is given without any playing flag."""
    return args.plot is None or bool(given_settings(parser, argv, PLAYING_SETTINGS))


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


def check_display() -> None:
    """A one-line UsageError if no window can be opened here (checked before any work)."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UsageError("--render needs a display to open a window, and DISPLAY is not set (a headless machine or an ssh "
                         "session without X forwarding); use --record-video DIR to watch the games afterwards")
    try:
        import tkinter  # noqa: F401
    except ImportError:
        raise UsageError("--render needs tkinter (Python's Tk bindings), which this Python lacks; use --record-video DIR instead") from None


def check_sources_exist(args: argparse.Namespace) -> None:
    """The same one-line errors as the loaders' (storage.checkpoint, evaluation.loading), earlier."""
    if args.checkpoint and not os.path.exists(args.checkpoint):
        raise UsageError(f"{args.checkpoint}: no such run directory or checkpoint file")
    if args.run_dir and not os.path.isdir(args.run_dir):
        raise UsageError(f"{args.run_dir}: no such run directory")


def check_results_destinations(args: argparse.Namespace) -> None:
    if args.json and args.json != "-":
        check_destination(args.json, "--json")
    if args.plot:
        check_destination(args.plot, "--plot")
