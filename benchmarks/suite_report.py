"""The suite's aggregate: every published run under ROOT/runs/, read into one table.

Writes ROOT/summary.json (everything, for machines), ROOT/README.md (the tables the project
README links) and ROOT/curves/<Game>.png (each game's training curves, its seeds shaded).

Per game: mean +- std across seeds of (a) each run's mean over its last 100 training games, the
statistic of the PPO anchors, and (b) each run's 30-game evaluation of its final checkpoint, with
the anchors beside them. Across games: the IQM of the runs' human-normalized scores (and of their
PPO-normalized ones) with a 95% stratified-bootstrap interval (suite_stats.py).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from a3c_torch.errors import UsageError
from a3c_torch.evaluation.plotting import save_png
from a3c_torch.storage.curves import Curve, read_curve
from a3c_torch.storage.files import write_atomically
from benchmarks import suite_data
from benchmarks.suite_runs import MORE_EVALUATION, Run, RunFiles
from benchmarks.suite_stats import iqm, stratified_bootstrap

LAST_GAMES = 100  # the anchors' statistic: the mean of each run's last 100 training episodes
RUN_FOLDER = re.compile(r"(?P<game>[A-Z][A-Za-z0-9]*)-s(?P<seed>\d+)")
CURVE_BINS = 50


def published_runs(root: Path) -> list[RunFiles]:
    """Every complete published run under root/runs, by game then seed."""
    found = []
    for folder in sorted((root / "runs").glob("*")):
        match = RUN_FOLDER.fullmatch(folder.name)
        if match and folder.is_dir():
            files = RunFiles(Run(match["game"], int(match["seed"])), root)
            if files.is_published():
                found.append(files)
    return sorted(found, key=lambda files: files.run)


def read_run(files: RunFiles) -> tuple[dict, Curve]:
    """One published run's row of the summary, and its curve."""
    def load_json(name: str) -> dict:
        path = files.published(name)
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not readable as JSON ({exc})") from None

    def load_evaluation(name: str) -> dict:
        evaluation = load_json(name)
        missing = [key for key in ("mean", "std", "episodes", "global_step") if not isinstance(evaluation.get(key), (int, float))]
        if missing:
            raise UsageError(f"{files.published(name)}: not an evaluate.py --json report (no {', '.join(missing)})")
        return evaluation

    config, evaluation = load_json("config.json"), load_evaluation("evaluation.json")
    more = load_evaluation(MORE_EVALUATION) if files.published(MORE_EVALUATION).is_file() else None
    if more is not None and (more["global_step"] != evaluation["global_step"] or more.get("interrupted")):
        more = None  # of another policy, or cut short: played again the next time the suite passes
    curve = read_curve(files.published("curve.csv"))
    if len(curve) == 0:
        raise UsageError(f"{files.published('curve.csv')}: the run finished no training game")
    return {
        "game": files.run.game,
        "seed": files.run.seed,
        "folder": str(files.folder.relative_to(files.root)),
        "env_id": config.get("env_id"),
        "global_step": evaluation.get("global_step"),
        "max_steps": config.get("max_steps"),
        "num_processes": config.get("num_processes"),
        "sticky": config.get("repeat_action_probability"),
        "full_action_space": config.get("full_action_space"),
        "train_last_games": min(LAST_GAMES, len(curve)),
        "train_return": curve.last_games_mean(LAST_GAMES),
        "train_games": len(curve),
        "eval_return": evaluation["mean"],
        "eval_std": evaluation["std"],
        "eval_games": evaluation["episodes"],
        "eval_greedy": evaluation.get("greedy"),
        "more_eval_return": None if more is None else more["mean"],
        "more_eval_std": None if more is None else more["std"],
        "more_eval_games": None if more is None else more["episodes"],
    }, curve


def across_seeds(values: list[float]) -> dict:
    """Mean and sample std (n - 1) across seeds; std None for a single seed."""
    values = np.asarray(values, dtype=np.float64)
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if len(values) > 1 else None, "seeds": len(values)}


def normalized_iqm(rows: list[dict], key: str, normalize) -> dict | None:
    """IQM and 95% interval of normalize(game, row[key]) over the runs of games that have the reference."""
    by_game: dict[str, list[float]] = {}
    for row in rows:
        score = normalize(row["game"], row[key])
        if score is not None:
            by_game.setdefault(row["game"], []).append(score)
    if not by_game:
        return None
    strata = list(by_game.values())
    low, high = stratified_bootstrap(strata)
    return {"iqm": iqm(np.concatenate(strata)), "ci95": [low, high], "runs": sum(map(len, strata)), "games": len(strata)}


def summarize(rows: list[dict]) -> dict:
    games = {}
    for game in dict.fromkeys(row["game"] for row in rows):
        mine = [row for row in rows if row["game"] == game]
        train, evaluation = across_seeds([r["train_return"] for r in mine]), across_seeds([r["eval_return"] for r in mine])
        more = [r["more_eval_return"] for r in mine if r["more_eval_return"] is not None]
        games[game] = {
            "seeds": [r["seed"] for r in mine],
            "train_last_100": train,
            "eval": evaluation,
            "eval_more": across_seeds(more) if more else None,
            "ppo_sticky": _anchor(suite_data.PPO_STICKY.get(game)),
            "ppo_no_sticky": _anchor(suite_data.PPO_NO_STICKY.get(game)),
            "human_normalized": {"train": suite_data.human_normalized(game, train["mean"]), "eval": suite_data.human_normalized(game, evaluation["mean"])},
            "ppo_normalized": {"train": suite_data.ppo_normalized(game, train["mean"]), "eval": suite_data.ppo_normalized(game, evaluation["mean"])},
        }
    return {
        "runs": rows,
        "games": games,
        "aggregate": {
            "human_normalized_iqm": {"train": normalized_iqm(rows, "train_return", suite_data.human_normalized), "eval": normalized_iqm(rows, "eval_return", suite_data.human_normalized)},
            "ppo_normalized_iqm": {"train": normalized_iqm(rows, "train_return", suite_data.ppo_normalized), "eval": normalized_iqm(rows, "eval_return", suite_data.ppo_normalized)},
        },
        "sources": {"ppo": suite_data.PPO_SOURCE, "ppo_caveat": suite_data.PPO_CAVEAT, "human_and_random": suite_data.HUMAN_SOURCE},
    }


def _anchor(anchor) -> dict | None:
    return None if anchor is None else {"mean": anchor.mean, "std": anchor.std}


# --- README.md ----------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def pm(stats: dict | None) -> str:
    if stats is None:
        return "n/a"
    return f"{fmt(stats['mean'])} +- {fmt(stats['std'])}" if stats.get("std") is not None else f"{fmt(stats['mean'])} (1 seed)"


def distinct(rows: list[dict], key: str) -> str:
    return ", ".join(f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value) for value in dict.fromkeys(r[key] for r in rows))


def interval(stats: dict | None) -> str:
    if stats is None:
        return "n/a (no game with reference scores)"
    low, high = stats["ci95"]
    runs, games = stats["runs"], stats["games"]
    return f"{stats['iqm']:.3f} [{low:.3f}, {high:.3f}] ({runs} run{'s' * (runs != 1)}, {games} game{'s' * (games != 1)})"


def readme(summary: dict) -> str:
    rows, games, aggregate = summary["runs"], summary["games"], summary["aggregate"]
    lines = [
        "# Atari suite",
        "",
        "Written by `python -m benchmarks.atari_suite` from the published runs in [runs/](runs/); rewritten each time it runs.",
        "",
        f"Runs: {len(rows)} published, of {len(games)} game{'s' if len(games) != 1 else ''}. Budget (agent steps): {distinct(rows, 'max_steps')}; "
        f"workers: {distinct(rows, 'num_processes')}; sticky actions: {distinct(rows, 'sticky')}; full action set: {distinct(rows, 'full_action_space')}.",
        "",
        "## Per game",
        "",
        f"Mean +- std across seeds (sample std, n - 1) of each run's mean over its last {LAST_GAMES} training games (the anchors' statistic) "
        "and of its evaluation (full games of the final `latest.pt`, sampling, sticky actions as trained), "
        "then of more games of the same policy on fresh seeds (`evaluation_more.json`; the seeds counted are those that have them).",
        "",
        "| game | seeds | last 100 training games | evaluation | more games | PPO, sticky | PPO, no sticky | human-normalized (training, evaluation) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for game, g in games.items():
        hn = g["human_normalized"]
        lines.append(f"| {game} | {', '.join(map(str, g['seeds']))} | {pm(g['train_last_100'])} | {pm(g['eval'])} | {pm(g['eval_more'])} | {pm(g['ppo_sticky'])} | {pm(g['ppo_no_sticky'])} | {fmt(hn['train'], 3)}, {fmt(hn['eval'], 3)} |")
    lines += [
        "",
        f"PPO anchors: {summary['sources']['ppo']}. {summary['sources']['ppo_caveat']}.",
        "",
        "## Across games",
        "",
        "IQM (interquartile mean, 25% trimmed) over all runs, with its 95% stratified-bootstrap interval (runs resampled within each game; `benchmarks/suite_stats.py`). "
        "Every run counts once: a game with 3 seeds weighs 3 times a game with 1.",
        "",
        "| score | last 100 training games | evaluation |",
        "|---|---|---|",
        f"| human-normalized (0 random, 1 human) | {interval(aggregate['human_normalized_iqm']['train'])} | {interval(aggregate['human_normalized_iqm']['eval'])} |",
        f"| PPO-normalized (0 random, 1 PPO sticky) | {interval(aggregate['ppo_normalized_iqm']['train'])} | {interval(aggregate['ppo_normalized_iqm']['eval'])} |",
        "",
        f"Random and human scores: {summary['sources']['human_and_random']}.",
        "",
        "## Runs",
        "",
        "| run | step | training games | last 100 | evaluation (games) | more games (games) | curve |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        more = "not yet" if r["more_eval_return"] is None else f"{fmt(r['more_eval_return'])} +- {fmt(r['more_eval_std'])} ({r['more_eval_games']})"
        lines.append(f"| [{r['game']} seed {r['seed']}]({Path(r['folder']).as_posix()}/) | {r['global_step']:,} | {r['train_games']:,} | {fmt(r['train_return'])} "
                     f"| {fmt(r['eval_return'])} +- {fmt(r['eval_std'])} ({r['eval_games']}) | {more} | [{r['game']}.png](curves/{r['game']}.png) |")
    return "\n".join(lines) + "\n"


# --- curves/<Game>.png ----------------------------------------------------------------------------


def binned(curve: Curve, edges: np.ndarray) -> np.ndarray:
    """Mean training return per step bin (NaN where the run ended no game)."""
    index = np.digitize(curve.steps, edges[1:-1])
    return np.array([curve.returns[index == i].mean() if np.any(index == i) else np.nan for i in range(len(edges) - 1)])


def draw_game(game: str, curves: dict[int, Curve]) -> Figure:
    figure = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    top = max(int(c.steps[-1]) for c in curves.values()) + 1
    width = math.ceil(top / CURVE_BINS / 1000) * 1000  # a round number of steps per bin
    edges = np.arange(0, top + width, width)
    centres = (edges[:-1] + edges[1:]) / 2
    per_seed = np.array([binned(curve, edges) for curve in curves.values()])
    for seed, row in zip(curves, per_seed):
        axes.plot(centres, row, linewidth=0.8 if len(curves) > 1 else 1.8, alpha=0.6 if len(curves) > 1 else 1.0, label=f"seed {seed}")
    if len(curves) > 1:
        with np.errstate(all="ignore"):  # a bin no seed reached stays empty
            low, high = np.nanmin(per_seed, axis=0), np.nanmax(per_seed, axis=0)
            mean = np.nanmean(per_seed, axis=0)
        axes.fill_between(centres, low, high, color="tab:blue", alpha=0.2, linewidth=0, label="seeds' range")
        axes.plot(centres, mean, color="tab:blue", linewidth=2, label="mean of seeds")
    anchor = suite_data.PPO_STICKY.get(game)
    if anchor is not None:
        axes.axhline(anchor.mean, color="tab:red", linestyle="--", linewidth=1, label="PPO, sticky, 10M (last 100)")
    axes.set_title(f"{game}: training games, mean per {width:,} steps", fontsize=10)
    axes.set_xlabel("global step (agent steps)")
    axes.set_ylabel("episodic return (raw game score)")
    axes.xaxis.set_major_formatter(EngFormatter())
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return figure


# --- all of it -------------------------------------------------------------------------------------


def write_report(root: Path) -> dict | None:
    """Aggregate every published run under root; None (and nothing written) when there is none."""
    runs = published_runs(root)
    if not runs:
        return None
    rows, curves = [], {}
    for files in runs:
        row, curve = read_run(files)
        rows.append(row)
        curves.setdefault(files.run.game, {})[files.run.seed] = curve
    summary = summarize(rows)
    for game, game_curves in curves.items():
        save_png(draw_game(game, game_curves), root / "curves" / f"{game}.png")
    write_atomically(root / "summary.json", (json.dumps(summary, indent=1) + "\n").encode())
    write_atomically(root / "README.md", readme(summary).encode())
    return summary

