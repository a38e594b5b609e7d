"""The Atari suite: train, evaluate and publish a set of (game, seed) runs, then aggregate them.

    python -m benchmarks.atari_suite                      # the default suite (benchmarks/suite_data.py)
    python -m benchmarks.atari_suite --only Breakout:1    # one run
    python -m benchmarks.atari_suite --games Pong --seeds 2,3 --prune
    python -m benchmarks.atari_suite --report-only        # only aggregate what is published

Each run is `train.py` at its defaults with --max-steps 10000000 --num-processes 8 --no-evaluator
(--env-id ALE/<Game>-v5, --seed <seed>), one at a time, under nice, in
ROOT/runs/<Game>-s<seed>/train/. Running the command again resumes every unfinished run from its
checkpoint (train.py --resume) and skips the published ones. A finished run's final latest.pt is
evaluated (evaluate.py, 30 games, sampling), then published next to train/ as config.json,
evaluation.json, curve.csv and policy.pt; the published policy then plays 100 more games on fresh
seeds (evaluation_more.json: a second look at the same policy, so that no claim rests on the first
30 alone); ROOT/README.md, summary.json and curves/ aggregate them (benchmarks/suite_report.py).

Ctrl-C (SIGINT, SIGTERM, SIGHUP) is passed on once to the train.py or evaluate.py at work, which
stops as it always does (train.py writes its final checkpoint); then the command exits with
train.py's code (130 for Ctrl-C) and says how to go on. One command per ROOT at a time.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads, here and in the children

import argparse  # noqa: E402
import ctypes  # noqa: E402
import fcntl  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from a3c_torch.errors import UsageError, require_writable  # noqa: E402
from benchmarks.suite_runs import MORE_EVALUATION, RunFiles, check_belongs, checkpoint_step, evaluation_problem, forget_unsaved_start, prune, publish, published_step, select_runs  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROG = "atari_suite"
STOP_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
# Evaluation games are reset with seeds EVAL_SEED + i: far from the training envs' seeds (train.py
# --seed plus the worker's rank), so no evaluation game replays a training game's start.
EVAL_SEED = 1_000_000
# The more games of the published policy start from seeds of their own: none replays one of the
# first games (seeds EVAL_SEED ... EVAL_SEED + --eval-games - 1) or a training game.
MORE_EVAL_SEED = 2_000_000
LOCK_NAME = ".suite.lock"


class _Parser(argparse.ArgumentParser):
    """One line and exit 2 for a bad flag, as everywhere in this project."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python -m benchmarks.{PROG}", description=__doc__.split("\n")[0], allow_abbrev=False,
                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--root", default="results/suite", help="the suite's folder: runs/, README.md, summary.json, curves/")
    parser.add_argument("--games", help="comma-separated games (default: the suite's six), each with its seeds in the suite (seed 1 for another game)")
    parser.add_argument("--seeds", help="comma-separated seeds for the chosen games, instead of the suite's")
    parser.add_argument("--only", action="append", metavar="GAME:SEED", help="exactly this run (repeatable); not with --games or --seeds")
    parser.add_argument("--max-steps", type=int, default=10_000_000, help="each run's budget in agent steps")
    parser.add_argument("--num-processes", type=int, default=8, help="train.py workers per run")
    parser.add_argument("--env-pattern", default="ALE/{game}-v5", help="the env id of a game ({game} is replaced), e.g. '{game}-v1' for CartPole")
    parser.add_argument("--eval-games", type=int, default=30, help="full games of each final checkpoint")
    parser.add_argument("--more-eval-games", type=int, default=100, help=f"full games of each published policy on fresh seeds (from {MORE_EVAL_SEED:,}), in evaluation_more.json; 0: none")
    parser.add_argument("--eval-processes", type=int, default=1, help="evaluate.py --num-processes")
    parser.add_argument("--nice", type=int, default=8, help="niceness of train.py and evaluate.py (0 to 19)")
    parser.add_argument("--train-arg", action="append", default=[], metavar="ARG", help="one more train.py argument (repeatable), e.g. --train-arg=--checkpoint-interval=60")
    parser.add_argument("--prune", action="store_true", help="delete train/ (checkpoints, events) of every published run chosen")
    parser.add_argument("--report-only", action="store_true", help="train nothing: aggregate the published runs")
    return parser


def check_args(args) -> None:
    for flag, value in (("--max-steps", args.max_steps), ("--num-processes", args.num_processes), ("--eval-games", args.eval_games), ("--eval-processes", args.eval_processes)):
        if value <= 0:
            raise UsageError(f"{flag} must be a positive integer, got {value}")
    if args.more_eval_games < 0:
        raise UsageError(f"--more-eval-games must be 0 or a positive integer, got {args.more_eval_games}")
    if not 0 <= args.nice <= 19:
        raise UsageError(f"--nice must be between 0 and 19, got {args.nice}")
    if "{game}" not in args.env_pattern:
        raise UsageError(f"--env-pattern must contain {{game}}, got {args.env_pattern!r}")
    try:
        args.env_pattern.format(game="Pong")
    except (KeyError, IndexError, ValueError):
        raise UsageError(f"--env-pattern may hold no braces other than {{game}}, got {args.env_pattern!r}") from None


def lock_root(root: Path) -> int:
    """An exclusive flock on ROOT/.suite.lock for as long as this process lives (the kernel drops
    it however the process ends), or a UsageError naming the holder."""
    fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # not inherited by train.py
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
        os.close(fd)
        raise UsageError(f"{root}: another {PROG} is working on this suite ({holder or 'holder unknown'}); wait for it, or stop it first") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    return fd


class RunFailed(Exception):
    """train.py or evaluate.py failed (their own output says why): exit 1, as train.py does."""


class Stopped(Exception):
    """A stop signal ended the step at work; `code` is the exit code to return."""

    def __init__(self, code: int):
        self.code = code


class Suite:
    def __init__(self, args, root: Path, argv: list[str]):
        self.args, self.root, self.argv = args, root, argv
        self.child: subprocess.Popen | None = None
        self.passed_on = False  # whether the child at work got a stop signal from us
        self.stop_signal: int | None = None
        self.reported = False  # the aggregate holds every published run

    # --- signals: passed on to the child at work, once each ---
    def on_signal(self, signum, frame) -> None:
        self.stop_signal = self.stop_signal or signum
        if self.child is not None and self.child.poll() is None:
            os.kill(self.child.pid, signum)  # a second Ctrl-C too: train.py then exits at once, as asked
            self.passed_on = True

    def run_child(self, script: str, arguments: list[str]) -> int:
        """Run train.py or evaluate.py under nice, in a session of its own: a terminal's Ctrl-C
        reaches this process only, which passes it on (so the child gets it once, also when only
        this process was signalled)."""
        command = [sys.executable, str(REPO / script), *arguments]
        print(f"$ nice -n {self.args.nice} {shlex.join(['python', script, *arguments])}", flush=True)
        niceness = self.args.nice

        def in_child():
            os.nice(niceness)
            try:  # the child is told (SIGTERM: final checkpoint) if this process is killed
                ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            except OSError:
                pass

        self.passed_on = False
        self.child = subprocess.Popen(command, start_new_session=True, preexec_fn=in_child)
        if self.stop_signal is not None and not self.passed_on:  # signalled while it was being started
            os.kill(self.child.pid, self.stop_signal)
        try:
            return self.child.wait()
        finally:
            self.child = None

    # --- one run ---
    def do_run(self, files: RunFiles) -> None:
        run = files.run
        if files.is_published() and not self.more_games_missing(files):
            print(f"{run.name}: published, skipped", flush=True)
            return
        if not files.is_published():
            checkpoint = self.train(files)
            evaluation = checkpoint.parent.parent / "evaluation.json"
            step = checkpoint_step(checkpoint)
            if evaluation_problem(evaluation, step, self.args.eval_games) is not None:
                self.evaluate(files, checkpoint, evaluation, step, self.args.eval_games, EVAL_SEED)
            self.reported = False
            publish(files, checkpoint.parent.parent, checkpoint, evaluation)
            print(f"{run.name}: published in {files.folder}", flush=True)
        if self.more_games_missing(files):  # from policy.pt: also for a run published (and pruned) before
            self.evaluate(files, files.published("policy.pt"), files.published(MORE_EVALUATION), published_step(files), self.args.more_eval_games, MORE_EVAL_SEED)
        self.reported = False
        self.report()  # the tables stay current through a suite that takes days

    def more_games_missing(self, files: RunFiles) -> bool:
        games, step = self.args.more_eval_games, published_step(files)
        if games == 0 or step is None:  # an unreadable evaluation.json: the report names it
            return False
        return evaluation_problem(files.published(MORE_EVALUATION), step, games) is not None

    def train(self, files: RunFiles) -> Path:
        """Train (or resume) until the budget; the final checkpoint."""
        args, run = self.args, files.run
        forget_unsaved_start(files)
        checkpoint = files.latest_checkpoint()
        if checkpoint is not None:
            check_belongs(files, args.env_pattern.format(game=run.game))
        if checkpoint is not None and checkpoint_step(checkpoint) >= args.max_steps:
            return checkpoint
        if checkpoint is None:
            arguments = ["--env-id", args.env_pattern.format(game=run.game), "--seed", str(run.seed), "--max-steps", str(args.max_steps),
                         "--num-processes", str(args.num_processes), "--no-evaluator", "--runs-dir", str(files.train_parent), "--exp-name", "suite"]
            print(f"{run.name}: starting", flush=True)
        else:
            # --no-evaluator also for a run trained elsewhere and moved here: the suite's protocol.
            arguments = ["--resume", str(files.train_dir()), "--max-steps", str(args.max_steps), "--no-evaluator"]
            print(f"{run.name}: resuming from step {checkpoint_step(checkpoint):,}", flush=True)
        code = self.run_child("train.py", arguments + args.train_arg)
        checkpoint = files.latest_checkpoint()
        step = checkpoint_step(checkpoint) if checkpoint is not None else 0
        if self.stop_signal is not None:
            self.say_stopped(f"{run.name} stopped at step {step:,}" + (" (its checkpoint)" if checkpoint is not None else ""))
            raise Stopped(code if code in STOP_SIGNALS.values() else STOP_SIGNALS[self.stop_signal])
        if code != 0 or checkpoint is None or step < args.max_steps:
            raise RunFailed(f"{run.name}: train.py ended with exit code {code} at step {step:,} of {args.max_steps:,} (its output is above); run the suite again to resume it")
        return checkpoint

    def evaluate(self, files: RunFiles, checkpoint: Path, evaluation: Path, step: int, games: int, seed: int) -> None:
        """`games` full games of `checkpoint` (the final latest.pt, or the published policy.pt, its
        weights) from seeds `seed`, `seed` + 1, ..., into the JSON at `evaluation`."""
        print(f"{files.run.name}: evaluating {checkpoint.name} (step {step:,}), {games} games from seed {seed:,}", flush=True)
        code = self.run_child("evaluate.py", ["--checkpoint", str(checkpoint), "--episodes", str(games), "--seed", str(seed),
                                              "--num-processes", str(self.args.eval_processes), "--json", str(evaluation)])
        if self.stop_signal is not None:
            evaluation.unlink(missing_ok=True)  # a part of the games: played again next time
            self.say_stopped(f"{files.run.name} is trained; its evaluation ({evaluation.name}) was stopped")
            raise Stopped(STOP_SIGNALS[self.stop_signal])
        problem = evaluation_problem(evaluation, step, games)
        if code != 0 or problem:
            raise RunFailed(f"{files.run.name}: evaluate.py ended with exit code {code}{f' ({problem})' if problem else ''}; its output is above")

    def say_stopped(self, what: str) -> None:
        print(f"{PROG}: {what}; go on with: python -m benchmarks.{PROG} {shlex.join(self.argv)}".rstrip(), file=sys.stderr, flush=True)

    # --- the suite ---
    def run(self, runs: list[RunFiles]) -> int:
        handled = {s: signal.signal(s, self.on_signal) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
        try:
            for files in runs:
                if self.stop_signal is not None:
                    self.say_stopped(f"stopped before {files.run.name}")
                    return STOP_SIGNALS[self.stop_signal]
                if not self.args.report_only:
                    self.do_run(files)
                if self.args.prune:
                    freed = prune(files)
                    if freed:
                        print(f"{files.run.name}: pruned {files.train_parent} ({freed / 1e6:,.1f} MB)", flush=True)
        except Stopped as stopped:
            return stopped.code
        finally:
            for s, previous in handled.items():
                signal.signal(s, previous)
        return 0 if self.reported else self.report()

    def report(self) -> int:
        from benchmarks.suite_report import write_report  # matplotlib and numpy: only now

        if write_report(self.root) is None:
            print(f"no published run in {self.root / 'runs'} yet: nothing to aggregate", flush=True)
        else:
            print(f"report: {self.root / 'README.md'}, {self.root / 'summary.json'}, {self.root / 'curves'}/", flush=True)
        self.reported = True
        return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        check_args(args)
        runs = select_runs(args.games, args.seeds, args.only)
        root = Path(args.root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--root {root}: cannot create it ({exc.strerror or exc})") from None
        require_writable(root, "--root is not writable")
        lock = lock_root(root)
        try:
            return Suite(args, root, argv).run([RunFiles(run, root) for run in runs])
        finally:
            os.close(lock)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except RunFailed as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:  # outside a run (starting up, writing the report): nothing to save
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    from a3c_torch.console import protect_console

    protect_console("the suite")  # a closed terminal (SIGHUP) or `| head`: the runs still stop or go on cleanly
    sys.exit(main())
