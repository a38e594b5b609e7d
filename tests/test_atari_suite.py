"""python -m benchmarks.atari_suite: its statistics against hand-computed values, the aggregate of
made-up runs, which runs it picks, its one-line errors, and a CartPole suite end to end (stopped
by Ctrl-C, resumed and published, skipped when done, pruned)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from a3c_torch.errors import UsageError
from a3c_torch.storage.checkpoint import load_checkpoint
from a3c_torch.storage.curves import Curve, write_curve
from benchmarks import atari_suite
from benchmarks.suite_data import human_normalized, ppo_normalized
from benchmarks.suite_report import across_seeds, interval, write_report
from benchmarks.suite_runs import Run, RunFiles, forget_unsaved_start, prune, select_runs
from benchmarks.suite_stats import iqm, stratified_bootstrap
from helpers import REPO, checkpointed_steps, children_of, wait_for_progress

# --- statistics ---------------------------------------------------------------------------------


def test_the_iqm_is_the_mean_of_the_middle_half():
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # 2 cut at each end: mean of 3, 4, 5, 6
    assert iqm([0, 1, 2, 3, 4, 5, 10, 100]) == 3.5  # the outliers 10 and 100 are cut
    assert iqm([1, 2, 6]) == 3.0  # int(0.75) = 0: nothing cut from 3 values
    assert iqm([1, 2, 3, 100]) == 2.5  # int(1.0) = 1 cut at each end
    assert np.allclose(iqm(np.array([[8, 1, 7, 2, 6, 3, 5, 4], [1, 1, 1, 1, 1, 1, 1, 9]]), axis=-1), [4.5, 1.0])


def test_the_bootstrap_interval_of_two_values_is_their_range():
    # Two draws from {0, 1}: means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: 2.5% and 97.5% fall on 0 and 1.
    assert stratified_bootstrap([[0.0, 1.0]], statistic=np.mean) == (0.0, 1.0)
    # One value is no uncertainty at all.
    assert stratified_bootstrap([[3.0]], statistic=np.mean) == (3.0, 3.0)


def test_stratified_resampling_keeps_every_game_s_runs_where_plain_resampling_would_not():
    # Game A has one run (100), game B three (0): every stratified replicate holds A once, so the
    # mean is 25 every time. Resampling the four runs as one pool draws A 0 to 4 times.
    stratified = stratified_bootstrap([[100.0], [0.0, 0.0, 0.0]], statistic=np.mean)
    pooled = stratified_bootstrap([[100.0, 0.0, 0.0, 0.0]], statistic=np.mean)
    assert stratified == (25.0, 25.0)
    assert pooled[0] == 0.0 and pooled[1] >= 50.0


def test_the_bootstrap_is_reproducible():
    strata = [[0.1, 0.5, 0.9], [1.2], [0.3, 0.4]]
    assert stratified_bootstrap(strata) == stratified_bootstrap(strata)
    low, high = stratified_bootstrap(strata)
    assert low < iqm([0.1, 0.5, 0.9, 1.2, 0.3, 0.4]) < high


def test_normalized_scores_and_seed_statistics():
    assert human_normalized("Pong", -20.7) == 0.0 and human_normalized("Pong", 14.6) == pytest.approx(1.0)
    assert human_normalized("Breakout", 30.5) == pytest.approx(1.0) and human_normalized("CartPole", 500) is None
    assert ppo_normalized("Breakout", 198) == pytest.approx(1.0) and ppo_normalized("Breakout", 1.7) == 0.0
    assert ppo_normalized("Pong", 15.2) == pytest.approx(1.0)
    assert across_seeds([1.0, 2.0, 3.0]) == {"mean": 2.0, "std": 1.0, "seeds": 3}  # sample std, n - 1
    assert across_seeds([5.0]) == {"mean": 5.0, "std": None, "seeds": 1}


# --- the aggregate, on made-up published runs ----------------------------------------------------


def make_published_run(root, game, seed, last_100, eval_mean, games=150, policy=True, more_mean=None, more_step=150_040):
    files = RunFiles(Run(game, seed), root)
    files.folder.mkdir(parents=True)
    steps = np.arange(1, games + 1) * 1000
    returns = np.r_[np.full(games - 100, -999.0), np.full(100, float(last_100))]  # the early games must not count
    write_curve(Curve(steps, 1.7e9 + steps / 1000.0, returns, np.full(games, 50)), files.published("curve.csv"))
    config = {"env_id": f"ALE/{game}-v5", "max_steps": 150_000, "num_processes": 8, "repeat_action_probability": 0.25, "full_action_space": False}
    files.published("config.json").write_text(json.dumps(config))
    evaluation = {"mean": eval_mean, "std": 2.0, "episodes": 30, "global_step": 150_040, "greedy": False, "interrupted": False}
    files.published("evaluation.json").write_text(json.dumps(evaluation))
    if more_mean is not None:
        more = {**evaluation, "mean": more_mean, "episodes": 100, "global_step": more_step}
        files.published("evaluation_more.json").write_text(json.dumps(more))
    if policy:
        files.published("policy.pt").write_bytes(b"not read by the report")


def test_the_aggregate_of_made_up_runs(tmp_path):
    for seed, last_100, eval_mean, more_mean in ((1, 10, 12, 13), (2, 20, 24, 26), (3, 30, 36, 39)):
        make_published_run(tmp_path, "Breakout", seed, last_100, eval_mean, more_mean=more_mean)
    make_published_run(tmp_path, "Pong", 1, 14.6, -20.7, more_mean=99, more_step=1)  # more games of another policy: not counted
    make_published_run(tmp_path, "Qbert", 1, 5000, 5000, policy=False)  # not published yet: left out
    summary = write_report(tmp_path)

    breakout = summary["games"]["Breakout"]
    assert breakout["seeds"] == [1, 2, 3]
    assert breakout["train_last_100"] == {"mean": 20.0, "std": 10.0, "seeds": 3}
    assert breakout["eval"] == {"mean": 24.0, "std": 12.0, "seeds": 3}
    assert breakout["eval_more"] == {"mean": 26.0, "std": 13.0, "seeds": 3} and summary["games"]["Pong"]["eval_more"] is None
    assert breakout["ppo_sticky"] == {"mean": 198, "std": 59} and breakout["ppo_no_sticky"] == {"mean": 466, "std": 14}
    assert set(summary["games"]) == {"Breakout", "Pong"}
    assert summary["games"]["Pong"]["human_normalized"]["train"] == pytest.approx(1.0)
    assert summary["games"]["Pong"]["human_normalized"]["eval"] == pytest.approx(0.0)
    # Human-normalized training scores: Breakout (s - 1.7) / 28.8 for s = 10, 20, 30, and Pong 1.0.
    # Four values, one cut at each end: the mean of (20 - 1.7) / 28.8 and (30 - 1.7) / 28.8.
    hn = summary["aggregate"]["human_normalized_iqm"]["train"]
    assert hn["iqm"] == pytest.approx((18.3 + 28.3) / 2 / 28.8)
    assert hn["runs"] == 4 and hn["games"] == 2
    assert hn["ci95"][0] <= hn["iqm"] <= hn["ci95"][1]

    readme = (tmp_path / "README.md").read_text()
    assert "(4 runs, 2 games) |" in readme and interval({"iqm": 1.0, "ci95": [0.5, 1.5], "runs": 1, "games": 1}).endswith("(1 run, 1 game)")
    assert "| Breakout | 1, 2, 3 | 20.0 +- 10.0 | 24.0 +- 12.0 | 26.0 +- 13.0 | 198.0 +- 59.0 | 466.0 +- 14.0 |" in readme
    assert "| Pong | 1 | 14.6 (1 seed) | -20.7 (1 seed) | n/a | 15.2 +- 1.6 | 20.6 +- 0.2 | 1.000, 0.000 |" in readme
    assert "| 36.0 +- 2.0 (30) | 39.0 +- 2.0 (100) |" in readme and "| -20.7 +- 2.0 (30) | not yet |" in readme
    assert "full 18-action set" in readme and "DQN Zoo" in readme and "openrlbenchmark" in readme
    assert "[Breakout seed 2](runs/Breakout-s2/)" in readme and "Qbert" not in readme
    assert json.loads((tmp_path / "summary.json").read_text())["games"]["Breakout"]["eval"]["mean"] == 24.0
    for game in ("Breakout", "Pong"):
        assert (tmp_path / "curves" / f"{game}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "curves" / "Qbert.png").exists()


def test_a_broken_published_file_is_one_line(tmp_path):
    make_published_run(tmp_path, "Pong", 1, 1.0, 1.0)
    RunFiles(Run("Pong", 1), tmp_path).published("evaluation.json").write_text('{"mean": 3}')
    assert atari_suite.main(["--root", str(tmp_path), "--report-only"]) == 2
    RunFiles(Run("Pong", 1), tmp_path).published("evaluation.json").write_text("{")
    with pytest.raises(UsageError, match="evaluation.json: not readable as JSON"):
        write_report(tmp_path)


def test_no_published_run_writes_no_report(tmp_path):
    make_published_run(tmp_path, "Pong", 1, 1.0, 1.0, policy=False)
    assert write_report(tmp_path) is None
    assert not (tmp_path / "README.md").exists()


# --- which runs ----------------------------------------------------------------------------------


def names(runs):
    return [run.name for run in runs]


def test_run_selection():
    assert names(select_runs()) == ["Breakout-s1", "Breakout-s2", "Breakout-s3", "Pong-s1", "Pong-s2", "Pong-s3",
                                    "SpaceInvaders-s1", "Seaquest-s1", "BeamRider-s1", "Qbert-s1"]
    assert names(select_runs(games="Qbert,Pong")) == ["Qbert-s1", "Pong-s1", "Pong-s2", "Pong-s3"]
    assert names(select_runs(games="Pong", seeds="2,3")) == ["Pong-s2", "Pong-s3"]
    assert names(select_runs(seeds="4")) == ["Breakout-s4", "Pong-s4", "SpaceInvaders-s4", "Seaquest-s4", "BeamRider-s4", "Qbert-s4"]
    assert names(select_runs(games="CartPole")) == ["CartPole-s1"]  # outside the suite: seed 1
    assert names(select_runs(only=["Qbert:5", "Pong:2", "Qbert:5"])) == ["Qbert-s5", "Pong-s2"]
    files = RunFiles(Run("Pong", 2), REPO / "results" / "suite")
    assert files.folder == REPO / "results" / "suite" / "runs" / "Pong-s2" and files.train_parent == files.folder / "train"


@pytest.mark.parametrize("argv, words", [
    (["--only", "Pong"], "--only takes GAME:SEED"),
    (["--only", "Pong:1,2"], "--only takes GAME:SEED with one seed"),
    (["--only", "Pong:1", "--games", "Pong"], "--only names its runs itself"),
    (["--games", "pong"], "'pong' is not a game name"),
    (["--seeds", "1,x"], "--seeds takes comma-separated integers"),
    (["--seeds", "-1"], "seeds must be in [0, 2**31)"),
    (["--max-steps", "0"], "--max-steps must be a positive integer"),
    (["--eval-games", "-3"], "--eval-games must be a positive integer"),
    (["--more-eval-games", "-1"], "--more-eval-games must be 0 or a positive integer"),
    (["--nice", "20"], "--nice must be between 0 and 19"),
    (["--env-pattern", "ALE/Pong-v5"], "--env-pattern must contain {game}"),
    (["--env-pattern", "{game}-{v}"], "no braces other than {game}"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, words):
    assert atari_suite.main(["--root", str(tmp_path / "suite"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("atari_suite: error: ") and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "suite").exists() or not any((tmp_path / "suite").iterdir())


def test_a_bad_flag_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as caught:
        atari_suite.main(["--max-step", "5"])  # no abbreviations
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.count("\n") == 1 and "unrecognized arguments: --max-step" in err


def test_an_unwritable_root_is_one_line(read_only_dir, capsys):
    assert atari_suite.main(["--root", str(read_only_dir), "--report-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--root is not writable" in err


def test_a_second_suite_on_the_same_root_is_refused(tmp_path, capsys):
    held = atari_suite.lock_root(tmp_path)
    try:
        assert atari_suite.main(["--root", str(tmp_path), "--report-only"]) == 2
    finally:
        os.close(held)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"another atari_suite is working on this suite (pid {os.getpid()} on " in err
    assert atari_suite.main(["--root", str(tmp_path), "--report-only"]) == 0  # free again


def test_a_run_directory_of_another_game_or_seed_is_refused(tmp_path, capsys):
    from test_policy_file import write_checkpoint

    files = RunFiles(Run("CartPole", 2), tmp_path)
    run_dir = files.train_parent / "moved-here"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"env_id": "CartPole-v1", "seed": 1}))
    write_checkpoint(run_dir / "checkpoints" / "latest.pt")
    assert atari_suite.main(["--root", str(tmp_path), "--only", "CartPole:2", "--env-pattern", "{game}-v1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the run is CartPole-v1 seed 1, not CartPole-v1 seed 2 as CartPole-s2 must be" in err


def test_a_start_that_never_saved_is_forgotten_and_only_published_runs_are_pruned(tmp_path, capsys):
    files = RunFiles(Run("Pong", 1), tmp_path)
    unsaved = files.train_parent / "ALE_Pong-v5__suite__1__20260101-000000"
    unsaved.mkdir(parents=True)
    (unsaved / "config.json").write_text("{}")
    forget_unsaved_start(files)
    assert not unsaved.exists() and "has no checkpoint (stopped before its first one)" in capsys.readouterr().out

    make_published_run(tmp_path, "Pong", 2, 1.0, 1.0, policy=False)
    unpublished = RunFiles(Run("Pong", 2), tmp_path)
    (unpublished.train_parent / "run" / "checkpoints").mkdir(parents=True)
    (unpublished.train_parent / "run" / "checkpoints" / "latest.pt").write_bytes(b"x" * 1000)
    assert prune(unpublished) == 0 and unpublished.train_parent.exists()  # still needed to go on
    unpublished.published("policy.pt").write_bytes(b"published now")
    assert prune(unpublished) == 1000 and not unpublished.train_parent.exists()


# --- a CartPole suite, end to end ------------------------------------------------------------------


def suite_command(root, *extra):
    return [sys.executable, "-m", "benchmarks.atari_suite", "--root", str(root), "--games", "CartPole", "--env-pattern", "{game}-v1",
            "--max-steps", "6000", "--num-processes", "1", "--eval-games", "2", "--more-eval-games", "3", "--nice", "0", "--train-arg=--checkpoint-interval=0.5", *extra]


def run_suite(root, *extra, timeout=180):
    return subprocess.run(suite_command(root, *extra), cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_cartpole_suite_stops_on_ctrl_c_resumes_publishes_skips_and_prunes(tmp_path):
    root = tmp_path / "suite"
    files = RunFiles(Run("CartPole", 1), root)
    # 1. Started, then Ctrl-C in its terminal (the whole process group) once it has trained a little.
    first = subprocess.Popen(suite_command(root), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_progress(files.train_parent, timeout=120)
        # train.py runs in a session of its own: the terminal's Ctrl-C reaches only the suite,
        # which passes it on once (two SIGINTs would make train.py exit without its checkpoint).
        trainers = children_of(first.pid)
        assert len(trainers) == 1 and os.getsid(trainers[0]) != os.getsid(first.pid)
        second = run_suite(root, timeout=60)  # meanwhile, a second suite on the same root
        os.killpg(first.pid, signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert second.returncode == 2 and second.stderr.count("\n") == 1 and "another atari_suite is working on this suite" in second.stderr
    assert first.returncode == 130, err
    assert err.count("SIGINT: stopping workers") == 1 and "second Ctrl-C" not in err  # train.py got it once
    assert "go on with: python -m benchmarks.atari_suite --root" in err
    stopped_at = checkpointed_steps(files.train_parent)
    assert 0 < stopped_at < 6000 and not files.is_published()

    # 2. The same command again: resumes from that checkpoint, finishes, evaluates, publishes.
    resumed = run_suite(root)
    assert resumed.returncode == 0, resumed.stderr
    assert f"CartPole-s1: resuming from step {stopped_at:,}" in resumed.stdout and f"resuming at step {stopped_at:,}" in resumed.stdout
    assert files.is_published()
    evaluation = json.loads(files.published("evaluation.json").read_text())
    assert evaluation["episodes"] == 2 and not evaluation["greedy"] and evaluation["global_step"] >= 6000
    assert evaluation["checkpoint"].endswith("checkpoints/latest.pt")  # the final checkpoint, never best.pt
    policy = load_checkpoint(files.published("policy.pt"))
    assert policy["global_step"] == evaluation["global_step"] and "optimizer" not in policy
    more = json.loads(files.published("evaluation_more.json").read_text())  # then the published policy, on fresh seeds
    assert more["episodes"] == 3 and more["seed"] == atari_suite.MORE_EVAL_SEED and more["checkpoint"].endswith("policy.pt")
    assert more["global_step"] == evaluation["global_step"]
    assert json.loads(files.published("config.json").read_text())["env_id"] == "CartPole-v1"
    assert files.published("curve.csv").read_text().startswith("step,wall_time,return,length\n")
    summary = json.loads((root / "summary.json").read_text())
    assert [run["seed"] for run in summary["runs"]] == [1] and (root / "curves" / "CartPole.png").is_file()

    # 3. Again with --prune: nothing is trained or played; the heavy files go.
    pruned = run_suite(root, "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "CartPole-s1: published, skipped" in pruned.stdout and "$ nice" not in pruned.stdout
    assert "CartPole-s1: pruned" in pruned.stdout and not files.train_parent.exists()
    assert files.is_published() and (root / "README.md").is_file()

    # 4. A published (and pruned) run without its more games gets them from its policy.pt.
    files.published("evaluation_more.json").unlink()
    again = run_suite(root)
    assert again.returncode == 0, again.stderr
    assert "evaluating policy.pt" in again.stdout and "train.py" not in again.stdout
    assert json.loads(files.published("evaluation_more.json").read_text())["episodes"] == 3
    assert "(3) | [CartPole.png](curves/CartPole.png) |" in (root / "README.md").read_text()
