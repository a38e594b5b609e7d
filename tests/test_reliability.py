"""Reliability: each promise of docs/reliability.md, proven by injecting its fault into a real run
of train.py (stopping by signals: test_stopping.py).

Faults come from outside (SIGKILL) or from A3C_TORCH_FAULT (a3c_torch/faults.py), which only
workers read. Every run carries a unique environment tag (tests/training_run.py), so "no orphan
processes" is checked by looking for any live process with that tag, whoever its parent is now.
Waits are generous (a loaded 2-core machine starts processes slowly); the promised bounds are
asserted as promised.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from a3c_torch.faults import FAULT_ENV_VAR, FaultPlan, InjectedFault, with_faults
from a3c_torch.storage.checkpoint import non_finite_entries, save_checkpoint
from helpers import REPO, alive, checkpointed_steps, children_of, load, only_run_dir, run_command, scalar_tags, wait_for
from training_run import CARTPOLE, STARTUP_S, Training, latest, no_orphans

# --- unit: the fault hook itself ----------------------------------------------------------------
def test_fault_specs_are_parsed_strictly_and_target_one_rank():
    assert FaultPlan.for_worker(0, "").kind is None
    assert FaultPlan.for_worker(1, "worker_raise:3:0").kind is None
    plan = FaultPlan.for_worker(0, "worker_raise:3:0")
    model = torch.nn.Linear(2, 2)
    loss = torch.tensor(1.0)
    assert plan.on_update(loss, model) is loss and plan.on_update(loss, model) is loss
    with pytest.raises(InjectedFault):
        plan.on_update(loss, model)
    assert torch.isnan(FaultPlan.for_worker(4, "worker_nan_loss:1").on_update(loss, model))
    FaultPlan.for_worker(0, "worker_nan_weights:1").on_update(loss, model)
    assert torch.isnan(model.weight).all()
    for bad in ("worker_raise", "explode:3", "worker_raise:x", "worker_raise:1:2:3"):
        with pytest.raises(ValueError, match=FAULT_ENV_VAR):
            FaultPlan.for_worker(0, bad)


def test_the_update_line_is_apply_update_itself_unless_a_fault_is_asked_for(monkeypatch):
    from a3c_torch.worker import apply_update

    monkeypatch.delenv(FAULT_ENV_VAR, raising=False)
    assert with_faults(apply_update, 0) is apply_update
    monkeypatch.setenv(FAULT_ENV_VAR, "worker_nan_loss:1:1")
    assert with_faults(apply_update, 0) is apply_update, "another worker's fault"
    faulty = with_faults(apply_update, 1)
    local, shared = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(shared.parameters(), lr=0.1)
    applied, _ = faulty(local, shared, optimizer, local.weight.sum(), 40.0)
    assert faulty is not apply_update and not applied, "the NaN loss reaches apply_update, which skips it"



# --- 1. kill -9 of the trainer ------------------------------------------------------------------
@pytest.mark.slow
def test_a_killed_trainer_leaves_no_orphans_and_its_run_resumes(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--eval-interval", 1, "--eval-episodes", 2, "--eval-device", "cpu", "--checkpoint-interval", 1)
    try:
        assert wait_for(lambda: checkpointed_steps(tmp_path) > 0 and len(children_of(run.pid)) == 3, STARTUP_S), run.stderr
        time.sleep(1.5)  # TensorBoard events past the last checkpoint: the resume must drop them
        children = children_of(run.pid)
        os.kill(run.pid, signal.SIGKILL)
        killed = time.monotonic()
        assert wait_for(lambda: not any(alive(pid) for pid in children), 30, interval=0.05)
        assert time.monotonic() - killed < 5, "workers and evaluator exit within seconds of the trainer's death"
        assert no_orphans(run, 10)
    finally:
        run.kill_everything()
    run_dir = only_run_dir(tmp_path)
    before = latest(tmp_path)  # whole and loadable, whenever the kill came
    step = before["global_step"]
    assert step > 0

    result = run_command("train.py", "--resume", run_dir, "--max-steps", step + 500, "--no-evaluator", timeout=240)
    assert result.returncode == 0, result.stderr
    after = latest(tmp_path)
    assert after["global_step"] >= step + 500
    assert all(a["step"] > b["step"] for a, b in zip(after["optimizer"]["state"].values(), before["optimizer"]["state"].values())), "optimizer state carried on"
    assert not list((run_dir / "checkpoints").glob(".*tmp*")), "no temp file left behind"
    tags = scalar_tags(run_dir)
    sps_steps = [event.step for event in tags["charts/SPS"]]
    assert sps_steps == sorted(sps_steps), "the curves continue from the checkpoint instead of doubling back"
    # Episodes end every few dozen steps, so this tag has points on both sides of the resume
    # (a 500-step resume can finish between two once-a-second SPS points).
    episode_steps = [event.step for event in tags["charts/episodic_return"]]
    assert min(sps_steps + episode_steps) < step < max(episode_steps)


# --- 2. exact resume ------------------------------------------------------------------------------
def run_side_by_side(*commands) -> None:
    """Independent one-worker runs at the same time (they share nothing), all must succeed."""
    processes = [subprocess.Popen([sys.executable, str(REPO / script), *map(str, args)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for script, *args in commands]
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err


# Breakout on the lean Atari stack (small frames and LSTM to keep it quick): over 240 steps per env
# its random games lose lives and end, so the saved states hold every counter of the stack.
ATARI_SMALL = ("--env-id", "ALE/Breakout-v5", "--screen-size", 42, "--hidden-size", 32)


@pytest.mark.slow
@pytest.mark.parametrize("env_args", [CARTPOLE, ATARI_SMALL], ids=["cartpole", "breakout"])
def test_one_worker_resumed_at_a_rollout_boundary_matches_an_uninterrupted_run_bit_for_bit(tmp_path, env_args):
    # The default 4 envs per worker: rollouts of 4 x 20 steps, so the split (480) and the end (960)
    # are rollout boundaries, and every env's state must carry over for the weights to match.
    # A constant lr: the split run stops by --max-steps 480, and the default linear schedule would
    # anneal it along another line than the 960-step run's (docs/reliability.md says so).
    common = (*env_args, "--num-processes", 1, "--no-evaluator", "--seed", 5, "--num-steps", 20, "--envs-per-process", 4, "--lr-schedule", "constant")
    run_side_by_side(("train.py", *common, "--max-steps", 960, "--runs-dir", tmp_path / "one_go"), ("train.py", *common, "--max-steps", 480, "--runs-dir", tmp_path / "split"))
    split_dir = only_run_dir(tmp_path / "split")
    # The control: the same checkpoint without the worker states cannot continue exactly.
    control_dir = tmp_path / "control" / split_dir.name
    shutil.copytree(split_dir, control_dir)
    stripped = load(control_dir / "checkpoints" / "latest.pt")
    assert set(stripped.pop("worker_states")) == {0}
    save_checkpoint(control_dir / "checkpoints" / "latest.pt", stripped)

    run_side_by_side(*(("train.py", "--resume", run_dir, "--max-steps", 960) for run_dir in (split_dir, control_dir)))
    expected, resumed, control = (load(d / "checkpoints" / "latest.pt") for d in (only_run_dir(tmp_path / "one_go"), split_dir, control_dir))
    assert expected["global_step"] == resumed["global_step"] == 960
    assert all(torch.equal(expected["model"][k], resumed["model"][k]) for k in expected["model"]), "bit-exact weights"
    for a, b in zip(expected["optimizer"]["state"].values(), resumed["optimizer"]["state"].values()):
        assert all(torch.equal(a[k], b[k]) for k in a), "bit-exact optimizer state"
    assert not all(torch.equal(expected["model"][k], control["model"][k]) for k in expected["model"])


# --- 3. a worker dies -------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_worker_that_raises_stops_the_run_with_its_traceback(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--eval-interval", 1, "--eval-episodes", 1, "--eval-device", "cpu", "--checkpoint-interval", 1000, fault="worker_raise:30:1")
    try:
        assert wait_for(lambda: run.said("worker_raise at update 30"), STARTUP_S), run.stderr
        raised = time.monotonic()
        code = run.wait(timeout=60)
        assert time.monotonic() - raised < 10, "noticed, stopped and checkpointed within seconds"
        assert no_orphans(run, 10)
    finally:
        run.kill_everything()
    assert code == 1
    assert "error: worker 1 failed" in run.stderr and "Traceback (most recent call last)" in run.stderr
    assert "InjectedFault: A3C_TORCH_FAULT: injected crash at update 30" in run.stderr
    assert latest(tmp_path)["global_step"] > 0


# --- 5. non-finite losses and weights ---------------------------------------------------------------
@pytest.mark.slow
def test_nan_losses_are_skipped_counted_and_stop_the_run_without_nan_weights(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 1, "--max-steps", 10**8, "--no-evaluator", "--checkpoint-interval", 1, fault="worker_nan_loss:20")
    try:
        code = run.wait(timeout=STARTUP_S)
    finally:
        run.kill_everything()
    assert code == 1
    assert "50 updates in a row had a non-finite loss or gradient; the run has diverged (try a lower --lr)" in run.stderr
    skipped = scalar_tags(only_run_dir(tmp_path))["losses/skipped_updates"]
    assert max(event.value for event in skipped) >= 40
    final = latest(tmp_path)
    assert non_finite_entries(final["model"]) == [] and non_finite_entries(final["optimizer"]["state"]) == []


@pytest.mark.slow
def test_nan_weights_stop_the_run_and_never_reach_a_checkpoint(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 1, "--max-steps", 10**8, "--no-evaluator", "--checkpoint-interval", 1, fault="worker_nan_weights:100")
    try:
        code = run.wait(timeout=STARTUP_S)
    finally:
        run.kill_everything()
    assert code == 1
    assert "weights are no longer finite" in run.stderr and "the previous latest.pt is kept" in run.stderr
    assert run.stderr.count("the run diverged") == 1, run.stderr
    final = latest(tmp_path)
    assert 0 < final["global_step"] < 100 * 4 * 20  # the fault hits update 100 (rollouts of 4 envs x 20 steps)
    assert non_finite_entries(final["model"]) == []


# --- security: no network listener ------------------------------------------------------------------
def inet_socket_inodes() -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        inodes |= {row.split()[9] for row in rows if len(row.split()) > 9}
    return inodes


def socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:["):-1])
    return found


@pytest.mark.slow
def test_training_opens_no_network_socket(tmp_path):
    run = Training(tmp_path, *CARTPOLE, "--num-processes", 2, "--max-steps", 10**8, "--eval-interval", 1, "--eval-episodes", 2, "--eval-device", "cpu", "--checkpoint-interval", 1)
    try:
        assert wait_for(lambda: checkpointed_steps(tmp_path) > 0 and len(children_of(run.pid)) == 3, STARTUP_S), run.stderr
        assert wait_for(lambda: "eval/episodic_return" in scalar_tags(only_run_dir(tmp_path)), 60)  # the evaluator has sent weights
        processes = run.tagged_processes()
        sockets = set().union(*(socket_inodes(pid) for pid in processes))
        assert len(processes) >= 4 and sockets, "the trainer talks to its children over (Unix) sockets"
        assert not sockets & inet_socket_inodes(), "no TCP/UDP/raw socket, listening or not"
        os.kill(run.pid, signal.SIGINT)
        assert run.wait(timeout=60) == 130
    finally:
        run.kill_everything()
