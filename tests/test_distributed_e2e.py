"""Distributed runs as a user starts them: torchrun on one machine over loopback.

Each test has a hard timeout: a distributed bug shows up as a hang.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, checkpointed_steps, load, only_run_dir, scalar_tags, wait_for

# One world at a time when the suite runs in two processes (make test): a world's RPC port is its
# rendezvous port + 1, which nothing reserves, so two worlds started together could take each other's.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]

NODE_FLAGS = ("--env-id", "CartPole-v1", "--num-processes", "1", "--ps-workers", "0")


def torchrun(*args, nodes: int = 3, restarts: int = 0) -> list[str]:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nodes}", f"--max-restarts={restarts}", "--monitor-interval=0.5"]
    return [*launcher, "-m", "a3c_torch.distributed", *NODE_FLAGS, *map(str, args)]


def run_world(*args, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(torchrun(*args, **kwargs), cwd=REPO, capture_output=True, text=True, timeout=timeout)


def node_steps(checkpoint: dict, node: int) -> int:
    """Agent steps node `node` trained: its optimizer's step count (one per update) x the steps of
    an update's rollout (--num-steps x --envs-per-process)."""
    state = checkpoint["node_optimizers"][node]["state"]
    cfg = checkpoint["config"]
    return int(state[0]["step"]) * cfg["num_steps"] * cfg["envs_per_process"]


def test_standalone_world_of_a_server_and_two_nodes_trains_and_checkpoints(tmp_path):
    result = run_world("--max-steps", "600", "--runs-dir", tmp_path, "--eval-interval", "1", "--eval-episodes", "2", "--sync-interval", "0.5", timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = only_run_dir(tmp_path)
    checkpoint = load(run_dir / "checkpoints" / "latest.pt")
    # Rank 0 has no workers: every step in the global count was played by node 1 or node 2,
    # and each node's own optimizer counted its updates.
    assert checkpoint["global_step"] >= 600
    assert checkpoint["global_step"] == node_steps(checkpoint, 1) + node_steps(checkpoint, 2)
    assert node_steps(checkpoint, 1) > 0 and node_steps(checkpoint, 2) > 0
    assert checkpoint["world_size"] == 3 and checkpoint["ps_version"] > 0
    tags = scalar_tags(run_dir)
    assert tags["charts/episodic_return"], "the nodes' episodes reach rank 0's TensorBoard"
    assert "eval/episodic_return" in tags
    # The checkpoint is an ordinary one: evaluate.py and a single-machine resume take it.
    evaluation = subprocess.run([sys.executable, "evaluate.py", "--checkpoint", run_dir / "checkpoints" / "latest.pt", "--episodes", "2"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert evaluation.returncode == 0, evaluation.stderr


def test_a_world_of_one_is_train_py_without_rpc(tmp_path):
    """No torchrun agent, no other node, and a rendezvous port nothing listens on: RPC would fail."""
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    result = subprocess.run([sys.executable, "-m", "a3c_torch.distributed", *NODE_FLAGS[:4], "--max-steps", "300", "--no-evaluator", "--runs-dir", tmp_path],
                            cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    checkpoint = load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")
    assert checkpoint["global_step"] >= 300 and "node_optimizers" not in checkpoint


def node_pid(runs_dir: Path, rank: int) -> int | None:
    """The node process of `rank` in the world writing to runs_dir (its spawned workers excluded)."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"a3c_torch.distributed" in cmdline and str(runs_dir).encode() in cmdline and f"RANK={rank}".encode() in environ:
            return int(proc.name)
    return None


@pytest.mark.parametrize("victim", [2, 0], ids=["a-node", "rank-0-the-server"])
def test_a_killed_node_restarts_the_world_which_resumes_from_the_checkpoint(tmp_path, victim):
    # The budget must outlast the first checkpoint by far: CartPole trains at thousands of steps
    # a second, and at 8,000 an idle machine once finished before the first checkpoint was seen.
    max_steps = 40_000
    process = subprocess.Popen(torchrun("--max-steps", max_steps, "--runs-dir", tmp_path, "--checkpoint-interval", "1", "--no-evaluator", "--sync-interval", "0.5", restarts=1),
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: checkpointed_steps(tmp_path) > 0, 150, interval=0.5), "no checkpoint before the kill"
        steps_at_kill = checkpointed_steps(tmp_path)
        print(f"killed at {steps_at_kill:,} checkpointed steps of {max_steps:,}")
        assert steps_at_kill < max_steps, "the run ended before the kill: raise --max-steps"
        pid = node_pid(tmp_path, victim)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    assert "restart 1 of this launch: resuming" in out
    resumed_at = int(out.split("resuming at step ")[1].split(";")[0].replace(",", ""))
    assert resumed_at >= steps_at_kill
    final = load(only_run_dir(tmp_path) / "checkpoints" / "latest.pt")
    assert final["global_step"] >= max_steps
    # The server's version (pushes applied) carries on across the restart too.
    restarted_version = int(out.rsplit("node 0/3: ", 1)[1].split("(version ")[1].split(")")[0])
    assert 0 < restarted_version < final["ps_version"]


def test_two_nodes_learn_cartpole_like_the_single_machine_test(tmp_path):
    """2 nodes x 1 worker (and a dedicated server) reach the single-machine test's threshold
    (tests/test_learning.py) with the same flags, on twice its step budget.

    Two nodes learn CartPole more slowly per step than two Hogwild workers on one machine: each
    node moves its own copy for up to --sync-interval (2 s, about 50 updates on CartPole) before
    the deltas meet on the server. Measured on an idle 2-core machine (2026-12-04): 8 of 8
    single-machine runs solved it by 124k steps; 2-node runs took 40k to 328k, and 3 of 13 runs
    (one in CI) were still below 195 at 300k, so a 300k budget failed about one run in four.
    With 600k, 10 of 10 solved it (slowest 328k); the run stops at the first solved evaluation.
    """
    result = run_world("--max-steps", "600000", "--lr", "1e-3", "--lr-schedule", "constant", "--eval-interval", "3", "--eval-episodes", "10", "--target-eval-return", "195",
                       "--runs-dir", tmp_path, "--seed", "1", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    best = load(only_run_dir(tmp_path) / "checkpoints" / "best.pt")
    print(f"best evaluation mean {best['best_eval_return']:.1f} at step {best['global_step']:,}")
    assert best["best_eval_return"] >= 195, f"best evaluation mean {best['best_eval_return']:.1f} < 195"
