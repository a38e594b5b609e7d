"""A distributed world's failures, injected on a loopback world of two "machines": two launchers
(`python -m a3c_torch.distributed.launch`, torchrun with one-line reports) that meet at a c10d
rendezvous on 127.0.0.1, one node process each. The first launcher started is rank 0 (torch's
rendezvous orders the nodes of one host by pid).

Each test has hard timeouts: a distributed bug shows up as a hang.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import REPO, wait_for

# One world at a time when the suite runs in two processes (make test): a world's RPC port is its
# rendezvous port + 1, which nothing reserves, so two worlds started together could take each other's.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]

NODE_FLAGS = ("--env-id", "CartPole-v1", "--num-processes", "1", "--no-evaluator", "--sync-interval", "0.5", "--max-steps", "100000000")
NOISE = ("Traceback", "frame #", "RendezvousConnectionError", "SignalException", "leaked semaphore")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Launcher:
    """One machine's launcher, its output collected as it comes."""

    def __init__(self, port: int, runs_dir, *node_flags, rdzv_conf: str = ""):
        command = [sys.executable, "-m", "a3c_torch.distributed.launch", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=test-{port}", "--monitor-interval=0.5",
                   *([f"--rdzv-conf={rdzv_conf}"] if rdzv_conf else []), "-m", "a3c_torch.distributed", *NODE_FLAGS, "--runs-dir", str(runs_dir), *node_flags]
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True) for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    def _read(self, stream, lines) -> None:
        for line in stream:
            lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    @property
    def stdout(self) -> str:
        return "\n".join(line for _, line in self.out)

    @property
    def stderr(self) -> str:
        return "\n".join(line for _, line in self.err)

    def said(self, text: str) -> float | None:
        """Seconds after the start at which a line with `text` came, None if none did."""
        return next((at for at, line in self.out + self.err if text in line), None)

    def node_pid(self) -> int | None:
        """The node process torchrun started (the launcher's only child)."""
        try:
            children = open(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def wait(self, timeout: float) -> int:
        code = self.process.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=5)
        return code

    def kill_everything(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            pid = self.node_pid()
            if pid is not None:
                os.killpg(pid, signal.SIGKILL)  # torchrun starts it in a session of its own
            self.process.wait()


def two_machines(tmp_path, rank_0_flags=(), node_1_flags=()) -> tuple[Launcher, Launcher]:
    port = free_port()
    rank_0 = Launcher(port, tmp_path / "rank0", *rank_0_flags)
    time.sleep(1.0)  # started first: the lower pid, rank 0
    return rank_0, Launcher(port, tmp_path / "rank1", *node_1_flags)


def assert_quiet(launcher: Launcher) -> None:
    for noise in NOISE:
        assert noise not in launcher.stderr, launcher.stderr


def test_a_node_with_another_model_is_refused_in_one_line_on_both_sides(tmp_path):
    rank_0, node_1 = two_machines(tmp_path, node_1_flags=("--hidden-size", "32"))
    try:
        code = node_1.wait(timeout=180)
        assert wait_for(lambda: rank_0.said("refused"), 30), rank_0.stdout + rank_0.stderr
        os.kill(rank_0.process.pid, signal.SIGINT)  # rank 0 trains on alone: stop it
        rank_0_code = rank_0.wait(timeout=60)
    finally:
        rank_0.kill_everything()
        node_1.kill_everything()
    assert code == 2, node_1.stderr
    assert node_1.stderr.strip() == "python -m a3c_torch.distributed: error: node 1 refused by rank 0: --hidden-size 32 where rank 0 has 256"
    assert "node 1 (" in rank_0.stdout and "refused: --hidden-size 32 where rank 0 has 256; training goes on without it" in rank_0.stdout
    assert rank_0_code == 130 and "resume with:" in rank_0.stdout, rank_0.stdout + rank_0.stderr
    assert_quiet(rank_0)


def test_a_wrong_rendezvous_endpoint_is_said_within_30_s_then_given_up_in_one_line(tmp_path):
    """A node pointed at a port where no rendezvous is (is_host=false: not this machine's own,
    as a wrong address is): torchrun alone prints nothing while it retries."""
    launcher = Launcher(free_port(), tmp_path, rdzv_conf="is_host=false,read_timeout=30")
    try:
        code = launcher.wait(timeout=200)
    finally:
        launcher.kill_everything()
    waiting = launcher.said("waiting 30 s for the rendezvous at 127.0.0.1:")
    assert waiting is not None and waiting < 40, launcher.stderr
    assert code == 1
    assert launcher.stderr.splitlines()[-1].startswith("a3c_torch.distributed.launch: error: cannot reach the rendezvous at 127.0.0.1:"), launcher.stderr
    assert len(launcher.stderr.splitlines()) <= 4, launcher.stderr  # a notice every 30 s, then the error
    assert_quiet(launcher)


def test_a_killed_node_is_named_gone_rank_0_trains_on_and_ctrl_c_stops_it_cleanly(tmp_path):
    rank_0, node_1 = two_machines(tmp_path)
    try:
        assert wait_for(lambda: node_1.said("node 1/2:") and rank_0.said("steps/s"), 180), node_1.stderr + rank_0.stderr
        os.kill(node_1.node_pid(), signal.SIGKILL)
        killed = time.monotonic() - rank_0.started
        node_1_code = node_1.wait(timeout=60)
        assert wait_for(lambda: rank_0.said("is gone"), 40), rank_0.stdout
        gone_after = rank_0.said("is gone") - killed
        steps_then = rank_0.stdout.count("\nstep ")
        assert wait_for(lambda: rank_0.stdout.count("\nstep ") > steps_then, 30), "rank 0 trains on"
        os.killpg(rank_0.process.pid, signal.SIGINT)  # Ctrl-C in rank 0's terminal
        rank_0_code = rank_0.wait(timeout=90)
    finally:
        rank_0.kill_everything()
        node_1.kill_everything()
    print(f"node 1 reported gone {gone_after:.1f} s after the kill")
    assert gone_after < 30
    assert "node 1 (" in rank_0.stdout and "is gone: no sync for" in rank_0.stdout and "training goes on with node(s) [0]" in rank_0.stdout
    assert node_1_code == 137 and "node process of global rank 1" in node_1.stderr and "killed by SIGKILL" in node_1.stderr
    # A clean stop: the final checkpoint, the resume hint, exit 130 and nothing from torchrun.
    assert rank_0_code == 130, rank_0.stdout[-2000:] + rank_0.stderr[-2000:]
    assert "resume with:" in rank_0.stdout
    assert_quiet(rank_0)
    assert_quiet(node_1)


def test_rank_0_killed_the_other_node_stops_within_seconds_saying_the_server_is_gone(tmp_path):
    rank_0, node_1 = two_machines(tmp_path)
    try:
        assert wait_for(lambda: node_1.said("node 1/2:") and node_1.said("steps/s"), 180), node_1.stderr + rank_0.stderr
        os.kill(rank_0.node_pid(), signal.SIGKILL)
        killed = time.monotonic()
        node_1_code = node_1.wait(timeout=60)
        stopped_after = time.monotonic() - killed
        rank_0_code = rank_0.wait(timeout=60)
    finally:
        rank_0.kill_everything()
        node_1.kill_everything()
    print(f"node 1 stopped {stopped_after:.1f} s after rank 0 was killed:\n{node_1.stderr}")
    assert stopped_after < 15
    assert node_1_code == 1
    lines = node_1.stderr.strip().splitlines()
    # The node's line, and its launcher's (the rendezvous lived in rank 0's launcher), in either order.
    assert len(lines) <= 2 and any("the parameter server on rank 0 (localhost) is gone" in line or "lost the rendezvous" in line for line in lines), node_1.stderr
    assert rank_0_code == 137 and "killed by SIGKILL" in rank_0.stderr
    assert_quiet(node_1)
    assert_quiet(rank_0)
