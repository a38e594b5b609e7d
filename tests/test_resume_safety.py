"""Resuming never destroys newer work (issue 23, items 4 and 5).

4. `--resume RUN/checkpoints/best.pt` (or any checkpoint older than the run's latest.pt)
   continues in a new run directory beside the old one: the newer latest.pt and the curves after
   that step stay as they were. A checkpoint at least as new as latest.pt continues in place.
5. A run directory is locked while a trainer uses it (flock on RUN/.lock): a second trainer is
   refused with one line naming the holder; the kernel releases the lock when the holder exits,
   kill -9 included.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.storage.run_lock import RunDirInUse, lock_run_dir
from a3c_torch.trainer import Trainer
from helpers import REPO, load, run_command, wait_for

QUICK = dict(env_id="CartPole-v1", hidden_size=16, num_processes=1, evaluator=False)


def make_run(runs_dir: Path, latest_step: int | None, best_step: int | None = None) -> Path:
    """A run directory with checkpoints at the given steps (no training needed)."""
    trainer = Trainer(Config(runs_dir=str(runs_dir), **QUICK))
    trainer.started = 0.0
    if best_step is not None:
        assert trainer.save("best.pt", best_step)
    if latest_step is not None:
        assert trainer.save("latest.pt", latest_step)
    trainer.run_lock.release()
    return trainer.run_dir


def resume(target, **settings) -> Trainer:
    settings.setdefault("max_steps", 10**6)
    trainer = Trainer(Config(resume=str(target), **settings), explicit=set(settings))
    trainer.run_lock.release()  # these tests only look where it would write
    return trainer


def runs_in(runs_dir: Path) -> list[Path]:
    return sorted(p for p in runs_dir.iterdir() if p.is_dir())


# --- 4. an older checkpoint never overwrites a newer latest.pt --------------------------------
def test_resuming_from_an_older_best_pt_continues_in_a_new_run_and_keeps_the_newer_latest_pt(tmp_path, capsys):
    run_dir = make_run(tmp_path, latest_step=17_040, best_step=16_000)
    latest_before = (run_dir / "checkpoints" / "latest.pt").read_bytes()
    capsys.readouterr()
    trainer = resume(run_dir / "checkpoints" / "best.pt")
    out = capsys.readouterr().out
    assert trainer.run_dir != run_dir and trainer.run_dir.parent == run_dir.parent, "beside the old run"
    assert trainer.start_step == 16_000 and not trainer.resumed_in_place
    assert trainer.best_eval is None, "the new run's best.pt is its own"
    assert f"resuming from {run_dir / 'checkpoints' / 'best.pt'} (step 16,000) in a new run directory: the run's latest.pt is newer (step 17,040) and is kept" in out
    assert (run_dir / "checkpoints" / "latest.pt").read_bytes() == latest_before
    assert json.loads((trainer.run_dir / "config.json").read_text())["resume"] == str(run_dir / "checkpoints" / "best.pt"), "where it came from"


def test_a_checkpoint_as_old_as_latest_pt_but_another_file_also_goes_to_a_new_run(tmp_path):
    run_dir = make_run(tmp_path, latest_step=500, best_step=500)
    assert resume(run_dir / "checkpoints" / "best.pt").run_dir != run_dir


def test_a_checkpoint_newer_than_latest_pt_or_latest_pt_itself_continues_in_place(tmp_path):
    run_dir = make_run(tmp_path, latest_step=17_040, best_step=18_000)  # killed after a best.pt
    assert resume(run_dir / "checkpoints" / "best.pt").run_dir == run_dir
    assert resume(run_dir / "checkpoints" / "latest.pt").run_dir == run_dir
    assert resume(run_dir).resumed_in_place
    only_best = make_run(tmp_path / "other", latest_step=None, best_step=300)
    assert resume(only_best / "checkpoints" / "best.pt").run_dir == only_best
    assert len(runs_in(tmp_path)) == 2  # run_dir and "other"


def test_a_checkpoint_outside_a_run_directory_starts_a_new_run_in_runs_dir(tmp_path, capsys):
    run_dir = make_run(tmp_path / "runs", latest_step=1_000)
    loose = tmp_path / "copies" / "pong.pt"
    loose.parent.mkdir()
    shutil.copy(run_dir / "checkpoints" / "latest.pt", loose)
    trainer = resume(loose, runs_dir=str(tmp_path / "elsewhere"))
    assert trainer.run_dir.parent == tmp_path / "elsewhere"
    assert not (tmp_path / "checkpoints").exists() and sorted(p.name for p in loose.parent.iterdir()) == ["pong.pt"]
    assert "it is not in a run directory" in capsys.readouterr().out


def test_a_run_directory_that_cannot_be_locked_can_still_be_branched_from(tmp_path):
    """E.g. someone else's read-only run: going back to its best.pt writes only the new run."""
    run_dir = make_run(tmp_path, latest_step=17_040, best_step=16_000)
    (run_dir / ".lock").unlink()
    (run_dir / ".lock").mkdir()  # cannot be opened as a file: like a read-only directory
    assert resume(run_dir / "checkpoints" / "best.pt").run_dir != run_dir
    with pytest.raises(UsageError, match="not writable, cannot lock the run directory"):
        resume(run_dir)


@pytest.mark.slow
def test_train_py_resumed_from_best_pt_leaves_the_newer_run_untouched(tmp_path):
    run_dir = make_run(tmp_path, latest_step=17_040, best_step=16_000)
    before = {p.name: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}
    result = run_command("train.py", "--resume", run_dir / "checkpoints" / "best.pt", "--max-steps", 16_100, timeout=240)
    assert result.returncode == 0, result.stderr
    assert {p.name: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"} == before, "checkpoints and event files as they were"
    (new_run,) = [p for p in runs_in(tmp_path) if p != run_dir]
    assert f"run directory: {new_run}" in result.stdout and "in a new run directory" in result.stdout
    assert load(new_run / "checkpoints" / "latest.pt")["global_step"] >= 16_100


# --- 5. one trainer per run directory ---------------------------------------------------------
def test_a_locked_run_directory_is_refused_with_the_holder_named(tmp_path):
    held = lock_run_dir(tmp_path)
    with pytest.raises(RunDirInUse, match=f"in use by another train.py .pid {os.getpid()} on ") as refused:
        lock_run_dir(tmp_path)
    assert "\n" not in str(refused.value)
    held.release()
    lock_run_dir(tmp_path).release()


def test_a_running_trainer_holds_its_run_directory(tmp_path):
    first = Trainer(Config(runs_dir=str(tmp_path), **QUICK))  # holds the lock of its new run
    first.started = 0.0
    assert first.save("latest.pt", 100)
    for target in (first.run_dir, first.run_dir / "checkpoints" / "latest.pt"):
        with pytest.raises(UsageError, match=f"{first.run_dir}: the run directory is in use by another train.py"):
            Trainer(Config(resume=str(target), max_steps=10**6), explicit={"max_steps"})
    first.run_lock.release()  # as when it exits
    assert resume(first.run_dir).run_dir == first.run_dir


def test_a_lock_holder_killed_with_sigkill_releases_the_run_directory(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", f"from a3c_torch.storage.run_lock import lock_run_dir; import time; lock = lock_run_dir({str(tmp_path)!r}); print('locked', flush=True); time.sleep(120)"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirInUse, match=f"pid {holder.pid} "):
            lock_run_dir(tmp_path)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    lock_run_dir(tmp_path).release()


@pytest.mark.slow
def test_two_resumes_of_one_run_at_once_the_second_is_refused_and_a_kill_9_frees_the_run(tmp_path):
    run_dir = make_run(tmp_path, latest_step=0)
    first = subprocess.Popen([sys.executable, str(REPO / "train.py"), "--resume", str(run_dir), "--max-steps", str(10**8), "--checkpoint-interval", "1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: load_step(run_dir) > 0 or first.poll() is not None, 120, interval=0.5), "the first resume trains"
        assert first.poll() is None
        second = run_command("train.py", "--resume", run_dir, "--max-steps", 10**8, timeout=120)
        assert second.returncode == 2
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert re.fullmatch(f"train.py: error: {re.escape(str(run_dir))}: the run directory is in use by another train.py \\(pid {first.pid} on {re.escape(socket.gethostname())}, since [-0-9: ]+\\); stop that one first, or wait for it to finish", second.stderr.strip()), second.stderr
        assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1, "the refused one wrote no event file"
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    # Released by the kernel: its spawned workers (which die with it) never held the lock.
    assert wait_for(lambda: try_lock(run_dir), 15), "the run directory is free again after kill -9"


def try_lock(run_dir: Path) -> bool:
    try:
        lock_run_dir(run_dir).release()
    except RunDirInUse:
        return False
    return True


def load_step(run_dir: Path) -> int:
    try:
        return load(run_dir / "checkpoints" / "latest.pt")["global_step"]
    except Exception:  # noqa: BLE001 - being replaced right now
        return 0


# --- a run directory that lost its config.json ------------------------------------------------
def test_resuming_a_run_directory_without_its_config_json_is_refused_not_restarted_under_runs(tmp_path):
    run_dir = make_run(tmp_path / "runs", latest_step=500)
    (run_dir / "config.json").unlink()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "--resume", str(run_dir), "--max-steps", "1000"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.strip() == f"train.py: error: {run_dir}: this run directory has no config.json (deleted, or not copied with the run), so it cannot be continued; put config.json back, or copy the checkpoint out of checkpoints/ to start a new run from it"
    assert list(elsewhere.iterdir()) == [], "no new run under ./runs"


def test_a_checkpoint_in_a_checkpoints_folder_that_is_no_run_still_starts_a_new_run(tmp_path):
    source = make_run(tmp_path / "runs", latest_step=500) / "checkpoints" / "latest.pt"
    loose = tmp_path / "downloads" / "checkpoints" / "latest.pt"
    loose.parent.mkdir(parents=True)
    shutil.copy(source, loose)
    trainer = resume(loose, runs_dir=str(tmp_path / "new"))
    assert trainer.run_dir.parent == tmp_path / "new" and trainer.start_step == 500
