"""evaluate.py run as a user would, on checkpoints written without training (fresh weights).

Scores of a fresh model mean nothing; what is checked is the plumbing: which checkpoint is
picked, the env rebuilt from its saved config, the table, the JSON, the videos, and that every
bad input is one line on stderr with exit code 2.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c_torch.config import Config
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.evaluation.flags import PLAYING_SETTINGS, build_parser, wants_games
from a3c_torch.evaluation.games import play_one_game
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
from a3c_torch.storage.checkpoint import save_checkpoint
from helpers import REPO

CARTPOLE_RUN = "CartPole-v1__test__1__20250101-000000"
PONG_RUN = "ALE_Pong-v5__test__1__20250101-000000"


def write_checkpoint(path: Path, env_id: str, obs_shape, num_actions: int, global_step: int = 100, **payload_changes) -> Path:
    """A real checkpoint, as train.py writes it, of a freshly initialised model."""
    cfg = Config(env_id=env_id, screen_size=42, hidden_size=64)
    model = ActorCritic(obs_shape, num_actions, hidden_size=64, trunk=cfg.model)
    optimizer = make_optimizer("adam", model.parameters(), 1e-4)
    payload = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "global_step": global_step,
        "config": cfg.to_dict(),
        "best_eval_return": None,
        "wall_time": 1.0,
        **payload_changes,
    }
    save_checkpoint(path, payload)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """runs/ with a Pong run (latest.pt only) and, written last so it is the newest, a CartPole
    run whose best.pt (step 50) and latest.pt (step 100) differ."""
    runs_dir = tmp_path_factory.mktemp("workdir") / "runs"
    write_checkpoint(runs_dir / PONG_RUN / "checkpoints" / "latest.pt", "ALE/Pong-v5", (42, 42), 6)
    cartpole = runs_dir / CARTPOLE_RUN / "checkpoints"
    write_checkpoint(cartpole / "latest.pt", "CartPole-v1", (4,), 2, global_step=100)
    write_checkpoint(cartpole / "best.pt", "CartPole-v1", (4,), 2, global_step=50)
    os.utime(runs_dir / PONG_RUN / "checkpoints" / "latest.pt", (1, 1))  # clearly the older run
    return runs_dir


def evaluate(*args, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "evaluate.py"), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def episode_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("episode ") and "/" in line]


def table_value(output: str, name: str) -> str:
    for line in output.splitlines():
        if line.startswith(name + "  "):
            return line[len(name) :].strip()
    raise AssertionError(f"no {name!r} row in:\n{output}")


def assert_one_line_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("evaluate.py: error: "), lines[0]
    for text in expected:
        assert text in lines[0], f"{text!r} not in {lines[0]!r}"


# --- the normal path ------------------------------------------------------------------------


@pytest.mark.slow
def test_no_arguments_evaluates_the_newest_runs_best_checkpoint(runs):
    result = evaluate(cwd=runs.parent)  # exactly what a user types, next to runs/
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert len(episode_lines(out)) == 10
    assert table_value(out, "checkpoint").endswith(f"{CARTPOLE_RUN}/checkpoints/best.pt")
    assert table_value(out, "global step") == "50"
    assert table_value(out, "env id") == "CartPole-v1"
    assert table_value(out, "episodes").startswith("10 ")
    for row in ("mean return", "std", "std error of mean", "median", "min", "max"):
        assert math.isfinite(float(table_value(out, row).replace(",", "")))
    assert table_value(out, "time-limit cuts") == "0 of 10"
    assert "sampling on cpu" in table_value(out, "policy")


@pytest.mark.slow
def test_json_file_holds_the_summary_and_what_was_evaluated(runs, tmp_path):
    out_json = tmp_path / "results" / "eval.json"
    result = evaluate("--run-dir", runs / CARTPOLE_RUN, "--episodes", 3, "--seed", 7, "--json", out_json)
    assert result.returncode == 0, result.stderr
    report = json.loads(out_json.read_text())
    assert report["episodes"] == 3 and len(report["returns"]) == 3 and len(report["lengths"]) == 3
    assert math.isfinite(report["mean"]) and report["mean"] == pytest.approx(np.mean(report["returns"]))
    assert report["min"] <= report["median"] <= report["max"]
    assert report["standard_error"] == pytest.approx(np.std(report["returns"], ddof=1) / np.sqrt(3))
    assert report["checkpoint"].endswith("best.pt") and report["global_step"] == 50
    assert report["env_settings"] == {"env_id": "CartPole-v1", "atari": False}
    assert report["greedy"] is False and report["device"] == "cpu" and report["seed"] == 7
    assert report["truncated"] == 0


@pytest.mark.slow
def test_json_to_stdout_is_pure_json_and_greedy_is_recorded(runs):
    checkpoint = runs / CARTPOLE_RUN / "checkpoints" / "latest.pt"
    result = evaluate("--checkpoint", checkpoint, "--episodes", 2, "--greedy", "--device", "cpu", "--json", "-")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # the table went to stderr
    assert report["greedy"] is True and report["global_step"] == 100 and report["episodes"] == 2
    assert "greedy (argmax)" in result.stderr


@pytest.mark.slow
def test_pong_game_is_recorded_and_the_atari_settings_are_shown(runs, tmp_path):
    videos = tmp_path / "videos"
    result = evaluate("--run-dir", runs / PONG_RUN, "--episodes", 1, "--record-video", videos)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert table_value(out, "env id") == "ALE/Pong-v5"
    assert table_value(out, "sticky actions") == "0.25"
    assert table_value(out, "frame skip") == "4"
    assert table_value(out, "screen size") == "42x42"
    assert table_value(out, "action space").startswith("minimal")
    assert table_value(out, "checkpoint").endswith("latest.pt")  # the run has no best.pt
    mp4s = list(videos.glob("*.mp4"))
    assert mp4s and all(p.stat().st_size > 1000 for p in mp4s), mp4s


@pytest.mark.slow
def test_env_id_override_with_the_same_spaces_plays_the_new_env(runs, tmp_path):
    out_json = tmp_path / "eval.json"
    result = evaluate("--run-dir", runs / CARTPOLE_RUN, "--env-id", "CartPole-v0", "--episodes", 1, "--json", out_json)
    assert result.returncode == 0, result.stderr
    assert json.loads(out_json.read_text())["env_settings"]["env_id"] == "CartPole-v0"


@pytest.mark.slow
def test_env_id_override_with_other_spaces_names_both_envs(runs):
    result = evaluate("--run-dir", runs / PONG_RUN, "--env-id", "ALE/Breakout-v5", "--episodes", 1)
    assert_one_line_error(result, "ALE/Breakout-v5", "4 actions", "ALE/Pong-v5", "6 actions")


@pytest.mark.slow
def test_help_shows_the_defaults():
    result = evaluate("--help")
    assert result.returncode == 0
    assert "(default: 10)" in result.stdout and "(default: runs)" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_ctrl_c_after_some_games_reports_those_games_and_exits_130(runs, tmp_path, processes):
    out_json = tmp_path / "eval.json"
    process = subprocess.Popen([sys.executable, str(REPO / "evaluate.py"), "--run-dir", runs / CARTPOLE_RUN, "--episodes", "100000", "--num-processes", str(processes), "--json", out_json],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        seen = 0
        for line in process.stdout:  # a few games played, then Ctrl-C, as a user watching would
            seen += line.startswith("episode ")
            if seen == 3:
                break
        os.killpg(process.pid, signal.SIGINT)
        rest, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    report = json.loads(out_json.read_text())
    played = report["episodes"]
    assert report["interrupted"] is True and 3 <= played < 100000 and len(report["returns"]) == len(report["seeds"]) == played
    assert table_value(rest, "episodes").startswith(f"{played} of 100000, stopped by Ctrl-C (seeds ")
    assert err.strip().splitlines()[-1] == f"evaluate.py: interrupted: {played} of 100000 games played, and reported"


# --- --plot ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, plays",
    [
        ([], True),
        (["--episodes", "3"], True),
        (["--plot", "curve.png"], False),
        (["--plot=curve.png", "--run-dir", "runs/a", "--runs-dir", "runs"], False),
        (["--plot", "curve.png", "--episodes", "10"], True),  # given, even at its default value
        (["--plot", "curve.png", "--episodes=3"], True),
        (["--greedy", "--plot", "curve.png"], True),
        (["--plot", "curve.png", "--json", "-"], True),
    ],
)
def test_plot_alone_plays_no_games_and_any_playing_flag_plays(argv, plays):
    parser = build_parser()
    assert wants_games(parser, argv, parser.parse_args(argv)) is plays


def test_every_playing_setting_is_a_flag_of_evaluate():
    dests = {action.dest for action in build_parser()._actions}
    assert set(PLAYING_SETTINGS) <= dests and "plot" not in PLAYING_SETTINGS


@pytest.mark.slow
def test_plot_alone_draws_the_curve_and_plays_no_games(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run_dir = tmp_path / CARTPOLE_RUN
    with SummaryWriter(str(run_dir)) as writer:
        for step in range(0, 2000, 20):
            writer.add_scalar("charts/episodic_return", 10 + step / 100, step)
    png = tmp_path / "curve.png"
    result = evaluate("--plot", png, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not episode_lines(result.stdout) and str(png) in result.stdout


@pytest.mark.slow
def test_plot_of_a_run_without_event_files_is_one_line_error(runs, tmp_path):
    assert_one_line_error(evaluate("--plot", tmp_path / "x.png", "--run-dir", runs / PONG_RUN), str(runs / PONG_RUN), "no TensorBoard event files")


# --- play_one_game on a real ROM ---------------------------------------------------------------


@pytest.fixture
def one_thread():
    """Like the entry points (OMP_NUM_THREADS=1): small per-step ops are slower on more threads,
    much slower when other processes want the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_play_one_game_plays_a_whole_pong_game(one_thread):
    env = make_env(EnvSettings("ALE/Pong-v5", screen_size=42), seed=0, train=False)
    try:
        model = ActorCritic((42, 42), int(env.action_space.n), hidden_size=64).eval()
        torch.manual_seed(0)
        game = play_one_game(model, env, seed=0)
    finally:
        env.close()
    assert game is not None
    # A Pong game ends when one side has 21 points: the return is (ours - theirs), full score.
    assert math.isfinite(game.episode_return) and -21 <= game.episode_return <= 21
    assert game.episode_return == int(game.episode_return) and abs(game.episode_return) > 1
    assert game.length > 100 and not game.truncated


def test_a_policy_that_never_presses_fire_is_cut_by_the_time_limit_and_reported(one_thread):
    """Breakout under the evaluation protocol: FIRE once at the game's start, never after a lost
    life. A policy that never presses FIRE itself loses the first ball, then waits: its game runs
    to the time limit and is reported as cut, not as a finished game. (ALE's own limit is 108,000
    frames, 27,000 agent steps; a limit of 3,000 steps on top stands in for it, to keep this fast.)"""
    env = make_env(EnvSettings("ALE/Breakout-v5", screen_size=42, repeat_action_probability=0.0), seed=0, train=False)
    assert env.unwrapped.ale.getInt("max_num_frames_per_episode") == 108_000
    env = gym.wrappers.TimeLimit(env, max_episode_steps=3000)
    try:
        model = ActorCritic((42, 42), int(env.action_space.n), hidden_size=16).eval()
        assert env.unwrapped.get_action_meanings()[:2] == ["NOOP", "FIRE"]
        with torch.no_grad():
            model.policy.bias.copy_(torch.tensor([10.0, -10.0, 0.0, 0.0]))  # greedy: always NOOP
        game = play_one_game(model, env, greedy=True, seed=0)
        lives = env.unwrapped.ale.lives()
    finally:
        env.close()
    assert game.truncated and game.length == 3000
    assert lives == 4, "the ball FIRE launched at the start was lost; no other was ever launched"


def test_the_summary_gives_the_standard_error_of_the_mean():
    from a3c_torch.evaluation.games import EpisodeResult, summarize

    summary = summarize([EpisodeResult(r, 100, False) for r in (10.0, 14.0, 18.0, 14.0)])
    assert summary["mean"] == 14.0
    assert summary["standard_error"] == pytest.approx(np.sqrt(32 / 3) / 2)  # sample std / sqrt(4)
    assert summarize([EpisodeResult(5.0, 100, False)])["standard_error"] is None, "one game has none"
