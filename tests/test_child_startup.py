"""The first seconds of a run: children that are still starting up (a spawned child imports torch
for seconds) must already ignore Ctrl-C and die with a trainer that is killed, and every start
method offered by --help must work.

The moment that matters is found by watching the children: "importing torch" is when
libtorch is mapped into every one of them but the run has not trained yet.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pytest

from helpers import alive, checkpointed_steps, children_of, load, only_run_dir, run_command, start_command, stop, wait_for

QUICK = ("--env-id", "CartPole-v1", "--no-evaluator", "--checkpoint-interval", "1")


def maps_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    found = children_of(pid)
    return found + [grandchild for child in found for grandchild in descendants(child)]


def wait_for_children(trainer, count: int, importing_torch: bool) -> list[int]:
    """The trainer's processes (children, and the fork server's children) once `count` of them
    exist (and, if asked, have begun to import torch)."""
    found = []

    def ready():
        nonlocal found
        found = descendants(trainer.pid)
        return sum(maps_torch(pid) for pid in found) >= count if importing_torch else len(found) >= count

    assert wait_for(ready, timeout=120, interval=0.01), f"children never got there: {found}"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_children_die_at_once_with_a_trainer_killed_while_they_import_torch(tmp_path, start_method):
    """Under forkserver the workers are the server's children: it outlived the trainer while they
    held its pipe, so they did not get their parent-death signal either."""
    trainer = start_command("train.py", *QUICK, "--num-processes", "2", "--max-steps", "100000", "--start-method", start_method, "--runs-dir", tmp_path / "runs")
    try:
        family = wait_for_children(trainer, 2, importing_torch=True)
        assert checkpointed_steps(tmp_path / "runs") == 0, "too late: the workers are training already"
        os.kill(trainer.pid, signal.SIGKILL)
        killed = time.monotonic()
        trainer.wait(timeout=30)
        # Before the fix the workers finished importing torch and gymnasium first (1.3-3.6 s).
        assert wait_for(lambda: not any(alive(pid) for pid in family), timeout=30, interval=0.01)
        assert time.monotonic() - killed < 1.0, f"children outlived the trainer by {time.monotonic() - killed:.2f} s"
    finally:
        if trainer.poll() is None:
            trainer.kill()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["starting", "importing-torch"])
def test_ctrl_c_while_the_children_start_prints_no_traceback(tmp_path, moment):
    trainer = start_command("train.py", *QUICK, "--num-processes", "2", "--max-steps", "100000", "--runs-dir", tmp_path / "runs")
    wait_for_children(trainer, 2, importing_torch=moment == "importing-torch")
    code, out, err = stop(trainer, signal.SIGINT, timeout=60)  # to the whole process group, as a terminal does
    assert code == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "resume with: python train.py --resume" in out
    assert load(only_run_dir(tmp_path / "runs") / "checkpoints" / "latest.pt")["global_step"] >= 0


@pytest.mark.slow
def test_the_forkserver_start_method_trains(tmp_path):
    result = run_command("train.py", *QUICK, "--num-processes", "2", "--max-steps", "400", "--start-method", "forkserver", "--runs-dir", tmp_path / "runs")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert load(only_run_dir(tmp_path / "runs") / "checkpoints" / "latest.pt")["global_step"] >= 400


def test_the_trainer_is_found_through_the_forkserver(monkeypatch):
    """Under forkserver a child's parent is the server, and the server's parent is the trainer."""
    from a3c_torch import processes

    monkeypatch.setattr(processes.os, "getppid", lambda: 4242)  # the forkserver
    monkeypatch.setattr(processes, "_parent_of", lambda pid: {4242: 1000}.get(pid))
    assert processes.parent_alive(1000)  # the trainer
    assert not processes.parent_alive(999)
    monkeypatch.setattr(processes, "_parent_of", lambda pid: {4242: 1}.get(pid))  # the trainer died: the server was reparented
    assert not processes.parent_alive(1000)


def test_a_process_the_os_refuses_to_start_is_one_line_and_the_started_ones_are_stopped(tmp_path, monkeypatch):
    """--num-processes 1000 under a pid limit: fork fails with EAGAIN after some children started."""
    import multiprocessing.process

    from a3c_torch.config import Config
    from a3c_torch.errors import UsageError
    from a3c_torch.trainer import Trainer

    real_start, started = multiprocessing.process.BaseProcess.start, []

    def start_two_then_refuse(process):
        if len(started) == 2:
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        real_start(process)
        started.append(process)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start_two_then_refuse)
    cfg = Config(env_id="CartPole-v1", num_processes=4, evaluator=False, max_steps=100_000, runs_dir=str(tmp_path / "runs"))
    with pytest.raises(UsageError, match=r"--num-processes 4: the system refused to start worker 2 \(Resource temporarily unavailable\)") as caught:
        Trainer(cfg).run()
    assert "\n" not in str(caught.value)
    assert len(started) == 2 and not any(p.is_alive() for p in started)
    assert load(only_run_dir(tmp_path / "runs") / "checkpoints" / "latest.pt")["global_step"] >= 0
