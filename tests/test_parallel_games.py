"""evaluate.py --num-processes: the same scores as one process, and no hang or orphan when a
player dies or the user presses Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from a3c_torch.envs import EnvSettings
from a3c_torch.evaluation.games import EpisodeResult
from a3c_torch.evaluation.parallel import PlayerFailed, play_games_in_parallel
from a3c_torch.model import ActorCritic
from helpers import REPO, alive, children_of, wait_for
from test_evaluate_cli import assert_one_line_error, evaluate, write_checkpoint


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("checkpoints")
    torch.manual_seed(0)
    return {
        "cartpole": write_checkpoint(folder / "cartpole" / "checkpoints" / "latest.pt", "CartPole-v1", (4,), 2),
        "pong": write_checkpoint(folder / "pong" / "checkpoints" / "latest.pt", "ALE/Pong-v5", (42, 42), 6),
    }


def scores(*args) -> dict:
    result = evaluate(*args, "--json", "-")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def same_scores_on_one_and_on_n_processes(checkpoint: str, games: int, processes: int) -> dict:
    """Asserts that `games` games give the same returns and lengths on 1 and on `processes`
    processes; returns the one-process report."""
    alone = scores("--checkpoint", checkpoint, "--episodes", str(games))
    parallel = scores("--checkpoint", checkpoint, "--episodes", str(games), "--num-processes", str(processes))
    assert parallel["returns"] == alone["returns"] and parallel["lengths"] == alone["lengths"]
    return alone


@pytest.mark.slow
def test_parallel_games_score_exactly_as_one_process_and_each_game_as_when_played_alone(checkpoints):
    cartpole = str(checkpoints["cartpole"])
    alone = same_scores_on_one_and_on_n_processes(cartpole, games=6, processes=3)
    assert len(set(alone["lengths"])) > 1  # the games differ: the check compares something
    # Game 4 of seed 0 is game 1 of seed 4: a game's score depends on its own seed only.
    fourth = scores("--checkpoint", cartpole, "--episodes", "1", "--seed", "4")
    assert fourth["returns"] == alone["returns"][4:5] and fourth["lengths"] == alone["lengths"][4:5]


@pytest.mark.slow
def test_parallel_atari_games_with_sticky_actions_and_sampling_match_one_process(checkpoints):
    same_scores_on_one_and_on_n_processes(str(checkpoints["pong"]), games=2, processes=2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--num-processes", "0"], "--num-processes must be between 1 and 256, got 0"),
        (["--num-processes", "10000"], "--num-processes must be between 1 and 256"),
        (["--num-processes", "2", "--render"], "--render plays the games one at a time"),
        (["--num-processes", "2", "--record-video", "videos"], "--record-video plays the games one at a time"),
    ],
)
def test_bad_num_processes_is_a_one_line_error(args, expected, checkpoints):
    assert_one_line_error(evaluate("--checkpoint", checkpoints["cartpole"], *args), expected)


def test_a_player_that_crashes_is_reported_with_its_traceback():
    model = ActorCritic((4,), 2, hidden_size=16)
    with pytest.raises(PlayerFailed, match=r"(?s)evaluation process player-\d crashed:.*Traceback.*NoSuchGame"):
        play_games_in_parallel(model, EnvSettings("NoSuchGame-v0"), 2, 0, False, torch.device("cpu"), 2, lambda i, r: None)


def test_results_come_back_in_game_order_whatever_order_they_end_in():
    model = ActorCritic((4,), 2, hidden_size=16)
    ended = []
    results = play_games_in_parallel(model, EnvSettings("CartPole-v1"), 5, 0, True, torch.device("cpu"), 2, lambda i, r: ended.append(i))
    assert sorted(ended) == list(range(5)) and all(isinstance(r, EpisodeResult) for r in results)


def start_evaluation(checkpoint: Path) -> subprocess.Popen:
    """Many long Pong games on 2 players, in a process group of its own, as a terminal starts it."""
    return subprocess.Popen(
        [sys.executable, str(REPO / "evaluate.py"), "--checkpoint", str(checkpoint), "--episodes", "50", "--num-processes", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def players_of(process: subprocess.Popen) -> list[int]:
    """The two players, once they play (the spawn start method also starts a resource tracker)."""
    pids = []

    def started():
        pids[:] = [pid for pid in children_of(process.pid) if Path(f"/proc/{pid}/comm").read_text().startswith("a3c-player")]
        return len(pids) == 2

    assert wait_for(started, 120), "the players did not start"
    return pids


@pytest.mark.slow
def test_a_player_killed_with_sigkill_ends_the_evaluation_with_a_clear_error(checkpoints):
    process = start_evaluation(checkpoints["pong"])
    players = players_of(process)
    os.kill(players[0], signal.SIGKILL)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, (out, err)
    assert "was killed by signal 9" in err and "Traceback" not in err
    assert wait_for(lambda: not alive(players[1]), 10), "the other player outlived the evaluation"


@pytest.mark.slow
def test_ctrl_c_stops_the_players_and_exits_130_without_tracebacks(checkpoints):
    process = start_evaluation(checkpoints["pong"])
    players = players_of(process)
    os.killpg(process.pid, signal.SIGINT)  # what a Ctrl-C in the terminal does: the whole group
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert err.strip() == "evaluate.py: interrupted"
    assert wait_for(lambda: not any(alive(pid) for pid in players), 10), "a player outlived the evaluation"
