"""Stopping a run from outside, proven on real runs of train.py: SIGTERM within 10 s with a
checkpoint (a hung worker included), a second Ctrl-C at once, SIGHUP to the terminal's process
group like SIGTERM with the workers' states, and a run under nohup that a SIGHUP leaves training."""

from __future__ import annotations

import os
import signal
import time

import pytest

from helpers import checkpointed_steps, children_of, only_run_dir, wait_for
from training_run import CARTPOLE, STARTUP_S, Training, latest, no_orphans


@pytest.mark.slow
def test_sigterm_stops_within_10_s_with_a_checkpoint_even_with_a_hung_worker(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--no-evaluator", "--checkpoint-interval", 1000, fault="worker_hang:10:0")
    try:
        assert wait_for(lambda: run.said("worker_hang at update 10"), STARTUP_S), run.stderr
        time.sleep(1)
        os.kill(run.pid, signal.SIGTERM)
        signalled = time.monotonic()
        code = run.wait(timeout=60)
        assert time.monotonic() - signalled < 10, "bounded stop, a hung worker included"
        assert no_orphans(run, 10)
    finally:
        run.kill_everything()
    assert code == 143, run.stderr
    assert "SIGTERM: stopping workers" in run.stderr and "--resume" in run.stdout
    assert latest(tmp_path)["global_step"] > 0


@pytest.mark.slow
def test_a_second_ctrl_c_exits_at_once(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--no-evaluator", fault="worker_hang:10:0")
    try:
        assert wait_for(lambda: run.said("worker_hang at update 10"), STARTUP_S), run.stderr
        os.kill(run.pid, signal.SIGINT)
        # The first stop waits for the hung worker (5 s); the second Ctrl-C must not.
        assert wait_for(lambda: run.said("SIGINT: stopping workers"), 30, interval=0.05)
        os.kill(run.pid, signal.SIGINT)
        second = time.monotonic()
        code = run.wait(timeout=60)
        assert time.monotonic() - second < 3
        assert no_orphans(run, 10)
    finally:
        run.kill_everything()
    assert code == 130
    assert "second Ctrl-C: exiting now" in run.stderr and "stopped at step" not in run.stdout
    # The resource tracker removes the semaphores the trainer left, without calling them leaked.
    assert "leaked semaphore" not in run.stderr, run.stderr



@pytest.mark.slow
def test_sighup_to_the_process_group_stops_like_sigterm_with_the_workers_states(tmp_path):
    """A closed terminal or a dropped SSH session: the kernel sends SIGHUP to the whole foreground
    process group. The trainer alone handles it (children ignore it): final checkpoint with the
    workers' states, the resume hint, exit 129."""
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--eval-interval", 1, "--eval-episodes", 1, "--eval-device", "cpu", "--checkpoint-interval", 1)
    try:
        assert wait_for(lambda: checkpointed_steps(tmp_path) > 0 and len(children_of(run.pid)) == 3, STARTUP_S), run.stderr
        os.killpg(run.pid, signal.SIGHUP)
        code = run.wait(timeout=60)
        assert no_orphans(run, 10)
    finally:
        run.kill_everything()
    run_dir = only_run_dir(tmp_path)
    assert code == 129, run.stderr
    assert "SIGHUP: stopping workers and writing a final checkpoint" in run.stderr
    assert f"resume with: python train.py --resume {run_dir}" in run.stdout
    assert "Traceback" not in run.stderr and "died" not in run.stderr and "resource_tracker" not in run.stderr, run.stderr
    assert set(latest(tmp_path)["worker_states"]) == {0, 1}, "exact resume: the periodic checkpoints have no worker states"


@pytest.mark.slow
def test_under_nohup_a_sighup_leaves_the_run_training(tmp_path):
    """`nohup python train.py ... &` asks for a run that outlives its terminal: SIGHUP stays ignored."""
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 1, "--max-steps", 10**8, "--no-evaluator", "--checkpoint-interval", 1, prefix=("nohup",))
    try:
        assert wait_for(lambda: checkpointed_steps(tmp_path) > 0 and len(children_of(run.pid)) == 1, STARTUP_S), run.stderr
        os.killpg(run.pid, signal.SIGHUP)
        step = checkpointed_steps(tmp_path)
        assert wait_for(lambda: checkpointed_steps(tmp_path) > step, 60), "still training"
        assert run.process.poll() is None and not run.said("SIGHUP")
        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=60) == 130, run.stderr
    finally:
        run.kill_everything()
