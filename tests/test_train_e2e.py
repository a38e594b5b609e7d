"""End to end: train.py run as a user would, with tiny budgets."""

import json
import os
import signal
import time

import pytest

from helpers import alive, children_of, load, only_run_dir, run_command, scalar_tags, start_command, stop, wait_for, wait_for_progress

pytestmark = pytest.mark.slow


def no_ale_banner(result) -> bool:
    """Nothing of "A.L.E: Arcade Learning Environment (version ...)\n[Powered by Stella]" in the output."""
    return not any(part in text for text in (result.stdout, result.stderr) for part in ("A.L.E", "Arcade Learning Environment", "Powered by Stella"))


def test_pong_run_leaves_a_complete_run_directory_and_resume_continues(tmp_path):
    result = run_command("train.py", "--env-id", "ALE/Pong-v5", "--num-processes", "2", "--max-steps", "3000", "--runs-dir", tmp_path, "--no-evaluator", "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert no_ale_banner(result), "ALE's banner, from the trainer or a worker, would break the progress bar"
    run_dir = only_run_dir(tmp_path)
    assert run_dir.name.startswith("ALE_Pong-v5__a3c__3__")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env_id"] == "ALE/Pong-v5" and config["num_processes"] == 2
    assert config["lr"] == pytest.approx(4e-4), "the default lr, resolved (2e-4 x sqrt(4 envs per worker)), is recorded with the run"
    assert (config["model"], config["lr_schedule"]) == ("a3c-centred", "linear"), "the defaults are recorded with the run"
    checkpoint = load(run_dir / "checkpoints" / "latest.pt")  # weights_only=True
    first_steps = checkpoint["global_step"]
    assert 3000 <= first_steps < 3000 + 2 * 4 * 20  # each worker ends its rollout (4 envs x 20 steps)
    assert checkpoint["config"]["env_id"] == "ALE/Pong-v5"
    assert all(s["step"] > 0 for s in checkpoint["optimizer"]["state"].values())
    tags = scalar_tags(run_dir)
    for tag in ("charts/SPS", "charts/learning_rate", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/grad_norm", "losses/staleness"):
        assert tag in tags, f"missing {tag}: {sorted(tags)}"
    # Two workers in step with each other: about one update of the other lands inside each rollout.
    assert all(0 <= event.value < 10 for event in tags["losses/staleness"]), [event.value for event in tags["losses/staleness"]]

    # The default linear schedule has annealed the lr to 0 at --max-steps; the checkpoint shows the rate in use.
    assert checkpoint["optimizer"]["param_groups"][0]["lr"] == pytest.approx(4e-4 * max(0.0, 1 - first_steps / 3000))

    # A new --lr and schedule given on resume apply (torch's load_state_dict would restore the old lr).
    result = run_command("train.py", "--resume", run_dir, "--max-steps", "5000", "--lr", "5e-5", "--lr-schedule", "constant")
    assert result.returncode == 0, result.stderr
    assert only_run_dir(tmp_path) == run_dir, "resume continues in the same run directory"
    assert no_ale_banner(result)
    assert "settings changed from step" in result.stdout and "lr_schedule linear -> constant" in result.stdout and "max_steps 3000 -> 5000" in result.stdout, result.stdout
    assert f"learning rate at step {first_steps:,}: 0 -> 5e-05" in result.stdout, result.stdout
    resumed_config = json.loads((run_dir / "config.json").read_text())
    assert (resumed_config["max_steps"], resumed_config["lr"], resumed_config["lr_schedule"]) == (5000, 5e-5, "constant"), "config.json shows the settings the run goes on with"
    assert not (run_dir / "config.json.tmp").exists()
    resumed = load(run_dir / "checkpoints" / "latest.pt")
    assert resumed["global_step"] >= 5000
    assert resumed["optimizer"]["param_groups"][0]["lr"] == pytest.approx(5e-5), "the trainer's optimizer took the new --lr, not the checkpoint's"
    steps = sorted(event.step for event in scalar_tags(run_dir)["losses/policy_loss"])
    assert steps[0] < first_steps < steps[-1], "TensorBoard curves continue after the resume"
    optimizer_steps = [s["step"] for s in resumed["optimizer"]["state"].values()]
    assert all(a > b for a, b in zip(optimizer_steps, (s["step"] for s in checkpoint["optimizer"]["state"].values()))), "optimizer state carried on"
    assert resumed["config"]["lr"] == 5e-5
    logged = [(e.step, e.value) for e in scalar_tags(run_dir)["charts/learning_rate"] if e.step > first_steps]
    assert logged and all(value == pytest.approx(5e-5, rel=1e-4) for step, value in logged), logged


def test_eight_workers_take_the_staleness_defaults_and_measure_about_seven_stale_updates(tmp_path):
    """The user's `--num-processes 8`: about 7 other updates land inside each worker's rollout
    (losses/staleness), so the defaults take 1 env per worker and lr 2e-4, keeping lr x sqrt(N - 1)
    within the budget that learned Breakout (at 4 envs and 4e-4, 8 workers never learned it) and
    Adam's progress per step at the 2-worker default's (2e-4 x sqrt(1) = 4e-4 / sqrt(4))."""
    result = run_command("train.py", "--env-id", "CartPole-v1", "--num-processes", "8", "--max-steps", "12000", "--runs-dir", tmp_path, "--no-evaluator")
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path)
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["envs_per_process"], config["lr"]) == (1, pytest.approx(2e-4)), config
    assert "with 8 worker processes, up to" in result.stdout, result.stdout  # one env each: no "x K envs"
    staleness = [event.value for event in scalar_tags(run_dir)["losses/staleness"]]
    assert len(staleness) >= 8 and 3 <= sum(staleness) / len(staleness) <= 12, staleness


def test_cartpole_run_with_evaluator_writes_eval_tags_and_best(tmp_path):
    result = run_command("train.py", "--env-id", "CartPole-v1", "--num-processes", "2", "--max-steps", "12000", "--runs-dir", tmp_path, "--eval-interval", "1", "--eval-episodes", "2")
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path)
    tags = scalar_tags(run_dir)
    for tag in ("charts/episodic_return", "charts/episodic_length", "eval/episodic_return", "eval/episodic_return_std", "eval/episodic_length"):
        assert tag in tags, f"missing {tag}"
    best = load(run_dir / "checkpoints" / "best.pt")
    assert best["best_eval_return"] == max(e.value for e in tags["eval/episodic_return"])


def test_ctrl_c_stops_cleanly_with_a_loadable_checkpoint(tmp_path):
    process = start_command("train.py", "--env-id", "ALE/Pong-v5", "--num-processes", "2", "--max-steps", "10000000", "--runs-dir", tmp_path, "--no-evaluator", "--checkpoint-interval", "1")
    try:
        wait_for_progress(tmp_path)
        workers = children_of(process.pid)
        started = time.monotonic()
        code, out, err = stop(process, signal.SIGINT)
    finally:
        process.kill()
    assert time.monotonic() - started < 15
    assert code == 130, err
    checkpoint = load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")
    assert checkpoint["global_step"] > 0
    assert "--resume" in out
    assert len(workers) == 2 and not any(alive(pid) for pid in workers)


def test_a_killed_worker_stops_the_run_with_a_clear_message(tmp_path):
    process = start_command("train.py", "--env-id", "CartPole-v1", "--num-processes", "2", "--max-steps", "10000000", "--runs-dir", tmp_path, "--no-evaluator", "--checkpoint-interval", "1")
    try:
        assert wait_for(lambda: len(children_of(process.pid)) == 2, 60)
        workers = children_of(process.pid)
        wait_for_progress(tmp_path)
        os.kill(workers[1], signal.SIGKILL)
        killed_at = time.monotonic()
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert time.monotonic() - killed_at < 10, "the trainer noticed within seconds"
    assert process.returncode == 1
    assert "worker" in err and "SIGKILL" in err
    assert not any(alive(pid) for pid in workers), "no orphan workers"
    assert load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")["global_step"] > 0


@pytest.mark.parametrize("args, message", [
    (["--num-processes", "0"], "--num-processes must be a positive integer"),
    (["--max-steps", "-5"], "--max-steps must be a positive integer"),
    (["--lr", "0"], "--lr must be positive"),
    (["--num-steps", "abc"], "invalid int value"),
    (["--env-id", "Breakout"], "did you mean ALE/Breakout-v5"),
    (["--env-id", "Pendulum-v1"], "discrete action space"),
    (["--resume", "/nonexistent/run"], "/nonexistent/run"),
    (["--target-eval-return", "10", "--no-evaluator"], "--target-eval-return needs the evaluator"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    result = run_command("train.py", *args, "--runs-dir", tmp_path, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_sigterm_to_the_whole_process_group_does_not_hang(tmp_path):
    """`timeout`, systemd and job schedulers signal every process of the group at once: the
    children die while the trainer shuts down, and the trainer must still finish its checkpoint."""
    process = start_command("train.py", "--env-id", "CartPole-v1", "--num-processes", "2", "--max-steps", "10000000", "--runs-dir", tmp_path, "--eval-interval", "0.5", "--eval-episodes", "1", "--checkpoint-interval", "1")
    try:
        assert wait_for(lambda: len(children_of(process.pid)) == 3, 60)
        wait_for_progress(tmp_path)
        os.killpg(process.pid, signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")["global_step"] > 0
