"""Which runs the suite holds, where each run's files are, and what state they are in: not
started, training, trained, published (and pruned).

A run is one (game, seed). Its folder, ROOT/runs/<Game>-s<seed>/, holds:
- `train/<run directory>/`: train.py's run directory (config.json, event files, checkpoints/),
  the heavy part, resumed in place until the run reaches its budget; `--prune` deletes `train/`
  once the run is published;
- `config.json`, `evaluation.json`, `curve.csv`, `policy.pt`: the published run, small files
  (policy.pt is written last, so a run with one is complete);
- `evaluation_more.json`: more games of the published policy on fresh seeds, played after it is
  published (an older run without them gets them the next time the suite passes it).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from a3c_torch.errors import UsageError
from a3c_torch.storage.files import write_atomically
from benchmarks.suite_data import DEFAULT_SUITE

PUBLISHED = ("config.json", "evaluation.json", "curve.csv", "policy.pt")  # policy.pt last
MORE_EVALUATION = "evaluation_more.json"
GAME_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")  # as in ALE ids: Breakout, SpaceInvaders, ...


@dataclass(frozen=True, order=True)
class Run:
    game: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.game}-s{self.seed}"


@dataclass(frozen=True)
class RunFiles:
    """Where one run's files are under the suite's root."""

    run: Run
    root: Path

    @property
    def folder(self) -> Path:
        return self.root / "runs" / self.run.name

    @property
    def train_parent(self) -> Path:
        """train.py's --runs-dir for this run: it makes one run directory inside."""
        return self.folder / "train"

    def train_dir(self) -> Path | None:
        """The run directory train.py made, or None before it made one."""
        found = sorted(p.parent for p in self.train_parent.glob("*/config.json"))
        if len(found) > 1:
            raise UsageError(f"{self.train_parent}: holds {len(found)} run directories, expected one: keep the one to go on with")
        return found[0] if found else None

    def latest_checkpoint(self) -> Path | None:
        train_dir = self.train_dir()
        if train_dir is None or not (train_dir / "checkpoints" / "latest.pt").is_file():
            return None
        return train_dir / "checkpoints" / "latest.pt"

    def published(self, name: str) -> Path:
        return self.folder / name

    def is_published(self) -> bool:
        return all(self.published(name).is_file() for name in PUBLISHED)


def parse_ints(text: str, flag: str) -> tuple[int, ...]:
    """"1,2,3" -> (1, 2, 3); seeds are train.py --seed values."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated integers, got {text!r}") from None
    if any(not 0 <= value < 2**31 for value in values):
        raise UsageError(f"{flag}: seeds must be in [0, 2**31), got {text!r}")
    return values


def check_game(game: str, flag: str) -> str:
    if not GAME_NAME.fullmatch(game):
        raise UsageError(f"{flag}: {game!r} is not a game name (like Breakout or SpaceInvaders: a capital letter, then letters and digits)")
    return game


def select_runs(games: str | None = None, seeds: str | None = None, only: list[str] | None = None) -> list[Run]:
    """The runs asked for, in suite order.

    - nothing: the default suite;
    - `games` "Pong,Qbert": those games, with their seeds in the default suite (seed 1 for a game
      outside it);
    - `seeds` "2,3": the selected games with these seeds instead;
    - `only` ["Pong:2", ...]: exactly these runs (not with `games` or `seeds`).
    """
    if only:
        if games is not None or seeds is not None:
            raise UsageError("--only names its runs itself: drop --games and --seeds")
        runs = []
        for item in only:
            game, sep, seed = item.partition(":")
            if not sep or not seed or "," in seed:
                raise UsageError(f"--only takes GAME:SEED with one seed, like Pong:2, got {item!r}")
            runs.append(Run(check_game(game, "--only"), parse_ints(seed, "--only")[0]))
        return _unique(runs)
    suite = dict(DEFAULT_SUITE)
    chosen = [check_game(game, "--games") for game in games.split(",")] if games is not None else list(suite)
    picked_seeds = parse_ints(seeds, "--seeds") if seeds is not None else None
    return _unique([Run(game, seed) for game in chosen for seed in (picked_seeds or suite.get(game, (1,)))])


def _unique(runs: list[Run]) -> list[Run]:
    seen, kept = set(), []
    for run in runs:
        if run not in seen:
            seen.add(run)
            kept.append(run)
    return kept


# --- the state of a run ----------------------------------------------------------------------------


def checkpoint_step(checkpoint: Path) -> int:
    from a3c_torch.storage.run_dir import step_of  # torch loads slowly

    step = step_of(checkpoint)
    if step is None:
        raise UsageError(f"{checkpoint}: not a readable checkpoint; move it away to restart the run, or put a good one back")
    return step


def check_belongs(files: RunFiles, env_id: str) -> None:
    """A run directory put in train/ by hand (an earlier run joining the suite) must be this run's
    game and seed: otherwise its scores would be published under another name."""
    config_path = files.train_dir() / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{config_path}: not readable as JSON ({exc})") from None
    if config.get("env_id") != env_id or config.get("seed") != files.run.seed:
        raise UsageError(f"{config_path}: the run is {config.get('env_id')} seed {config.get('seed')}, not {env_id} seed {files.run.seed} as {files.run.name} must be")


def forget_unsaved_start(files: RunFiles) -> None:
    """A run directory without a checkpoint is a start that was stopped before it saved anything
    (at most one --checkpoint-interval of training): it is removed, and the run starts afresh."""
    train_dir = files.train_dir()
    if train_dir is not None and files.latest_checkpoint() is None:
        print(f"{files.run.name}: {train_dir} has no checkpoint (stopped before its first one): starting the run afresh", flush=True)
        shutil.rmtree(train_dir)


# --- a finished run: its evaluation, its published files, its heavy files ---------------------------


def evaluation_problem(path: Path, step: int, games: int) -> str | None:
    """Why evaluate.py's JSON at `path` is not the evaluation to publish (of the checkpoint at
    `step`, all `games` played), or None when it is."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"{path} is not readable JSON ({exc})"
    if report.get("interrupted") or report.get("episodes") != games:
        return f"{path} holds {report.get('episodes')} of {games} games"
    if report.get("global_step") != step:
        return f"{path} is of step {report.get('global_step')}, the checkpoint is at step {step}"
    return None


def published_step(files: RunFiles) -> int | None:
    """The step of a published run's policy, as its evaluation.json records it (None if unreadable:
    the report then names the broken file)."""
    try:
        return json.loads(files.published("evaluation.json").read_text()).get("global_step")
    except (OSError, ValueError):
        return None


def publish(files: RunFiles, train_dir: Path, checkpoint: Path, evaluation: Path) -> None:
    """The light files of a finished run, from its run directory; policy.pt last, so that a run
    with a policy.pt is complete (a kill in between leaves an unpublished run, done again)."""
    from a3c_torch.storage.curves import curve_from_events, write_curve  # tensorboard and torch load slowly
    from a3c_torch.storage.policy_file import export_policy

    write_curve(curve_from_events(train_dir), files.published("curve.csv"))
    write_atomically(files.published("config.json"), (train_dir / "config.json").read_bytes())
    write_atomically(files.published("evaluation.json"), evaluation.read_bytes())
    export_policy(checkpoint, files.published("policy.pt"))


def prune(files: RunFiles) -> int:
    """Delete the run directory of a published run (checkpoints, events); returns the bytes freed."""
    if not files.is_published() or not files.train_parent.exists():
        return 0
    freed = sum(p.stat().st_size for p in files.train_parent.rglob("*") if p.is_file() and not p.is_symlink())
    shutil.rmtree(files.train_parent)
    return freed
