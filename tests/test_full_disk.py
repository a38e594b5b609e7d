"""A full disk (issue 23, items 1 and 2): no silent loss, no traceback.

A checkpoint that cannot be written is reported with the reason in words and the checkpoint that
is kept (with its step, or that there is none); a run whose final checkpoint was not written
exits 1 and its last line names the last good one. A full disk under the event files stops the
curves with one line and training goes on.

The failures are injected (a write that fails with ENOSPC, as on a full disk), so these run
anywhere; the tests on a real full disk mount a small tmpfs and are skipped where that is not
permitted (not root, no CAP_SYS_ADMIN in a container).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tensorboard.summary.writer.record_writer import RecordWriter

from a3c_torch.config import Config
from a3c_torch.errors import UsageError
from a3c_torch.messages import Episode, Evaluation, Losses
from a3c_torch.metrics import Metrics
from a3c_torch.run_end import EXIT_FAILED
import a3c_torch.storage.checkpoint as checkpoint_module
from a3c_torch.trainer import Trainer
from helpers import REPO, load, only_run_dir, wait_for

NO_SPACE = "no space left on device"
QUICK = dict(env_id="CartPole-v1", hidden_size=16, num_processes=1, evaluator=False)


class FullDisk:
    """Checkpoint writes fail like a full disk (half the bytes land, then ENOSPC) while `full`."""

    def __init__(self, monkeypatch, full: bool = True):
        self.full, self.failures = full, 0
        real = checkpoint_module._write_file

        def write(path, data):
            if not self.full:
                return real(path, data)
            self.failures += 1
            with open(path, "wb") as f:
                f.write(bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(checkpoint_module, "_write_file", write)


class _Quiet:
    def handle(self, message):
        pass

    def say(self, line):
        pass


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def new_trainer(tmp_path, **settings) -> Trainer:
    trainer = Trainer(Config(runs_dir=str(tmp_path), **{**QUICK, **settings}))
    trainer.started = 0.0  # save() outside of run()
    return trainer


# --- 1. checkpoints: what each failure says ------------------------------------------------------
def test_a_failed_write_says_why_and_what_is_kept_truthfully(tmp_path, monkeypatch, capsys):
    trainer = new_trainer(tmp_path)
    disk = FullDisk(monkeypatch)
    latest = trainer.run_dir / "checkpoints" / "latest.pt"

    assert not trainer.save("latest.pt", 20)
    assert lines(capsys.readouterr().err) == [f"warning: latest.pt not written at step 20: {NO_SPACE}; there is no earlier latest.pt"]
    assert not latest.exists()

    disk.full = False
    assert trainer.save("latest.pt", 40)
    assert lines(capsys.readouterr().err) == ["latest.pt written again, at step 40"]

    disk.full = True
    assert not trainer.save("latest.pt", 60)
    assert lines(capsys.readouterr().err) == [f"warning: latest.pt not written at step 60: {NO_SPACE}; the previous latest.pt is kept, at step 40"]
    assert load(latest)["global_step"] == 40
    assert sorted(p.name for p in latest.parent.iterdir()) == ["latest.pt"], "no temp file left"

    # best.pt: no false "the previous best.pt is kept", and the best score stays that of best.pt.
    trainer.metrics = _Quiet()
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer._on_eval(Evaluation(60, 9.5, 1.0, 10.0, new_best=True, weights=weights))
    assert lines(capsys.readouterr().err) == [f"warning: best.pt not written at step 60: {NO_SPACE}; there is no earlier best.pt"]
    assert trainer.best_eval is None


def test_a_resumed_run_knows_the_step_of_the_checkpoint_it_keeps(tmp_path, monkeypatch, capsys):
    first = new_trainer(tmp_path)
    assert first.save("latest.pt", 1_000)
    first.run_lock.release()
    resumed = Trainer(Config(resume=str(first.run_dir), max_steps=5_000), explicit={"max_steps"})
    resumed.started = 0.0
    FullDisk(monkeypatch)
    assert not resumed.save("latest.pt", 1_200)
    assert f"{NO_SPACE}; the previous latest.pt is kept, at step 1,000" in capsys.readouterr().err


# --- 1. the end of a run whose final checkpoint was not written ----------------------------------
def test_an_unwritten_final_checkpoint_fails_the_run_and_its_last_line_names_the_last_good_one(tmp_path, monkeypatch, capsys):
    """Real training (one spawned worker), disk full from the start of the resumed run."""
    first = new_trainer(tmp_path)
    assert first.save("latest.pt", 40)
    first.run_lock.release()
    capsys.readouterr()
    FullDisk(monkeypatch)
    resumed = Trainer(Config(resume=str(first.run_dir), max_steps=400, checkpoint_interval=1000), explicit={"max_steps", "checkpoint_interval"})
    code = resumed.run()
    out, err = capsys.readouterr()
    latest = first.run_dir / "checkpoints" / "latest.pt"
    assert code == EXIT_FAILED
    assert "done:" not in out and "Traceback" not in err
    last = lines(err)[-1]
    assert last.startswith("error: the final checkpoint (step ")
    assert f"was not written: {NO_SPACE}; the last good checkpoint is {latest}, at step 40 (resume with: python train.py --resume {first.run_dir})" in last
    assert load(latest)["global_step"] == 40


def test_a_run_that_never_wrote_a_checkpoint_says_so(tmp_path, monkeypatch, capsys):
    FullDisk(monkeypatch)
    code = Trainer(Config(runs_dir=str(tmp_path), max_steps=200, checkpoint_interval=1000, **QUICK)).run()
    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert lines(err)[-1].endswith(f"was not written: {NO_SPACE}; this run has no checkpoint at all: its training is lost")
    assert "is kept" not in err


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_by_signal_without_its_final_checkpoint_is_a_failure_too(tmp_path, monkeypatch, capsys, stop_signal):
    trainer = new_trainer(tmp_path)
    assert trainer.save("latest.pt", 40)
    FullDisk(monkeypatch)
    assert not trainer.save("latest.pt", 80)
    capsys.readouterr()
    trainer.stop_signal = stop_signal
    assert trainer._report(None, 80, saved=False) == EXIT_FAILED
    out, err = capsys.readouterr()
    assert "stopped at step" not in out
    assert lines(err) == [f"error: the final checkpoint (step 80) was not written: {NO_SPACE}; the last good checkpoint is {trainer.run_dir / 'checkpoints' / 'latest.pt'}, at step 40 (resume with: python train.py --resume {trainer.run_dir})"]


# --- 2. TensorBoard events on a full disk --------------------------------------------------------
def fail_event_writes(monkeypatch):
    def no_space(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(RecordWriter, "write", no_space)


def thread_errors(monkeypatch) -> list:
    """Exceptions that reach threading.excepthook (printed as a traceback outside of pytest)."""
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    return seen


def metrics(run_dir, resumed=False) -> Metrics:
    return Metrics(run_dir, {"env_id": "CartPole-v1"}, 0, 10_000, lambda step: 1e-4, 10.0, resumed=resumed, sps_window=0.0)


def test_a_full_disk_under_the_event_files_stops_the_curves_with_one_line_not_the_run(tmp_path, monkeypatch, capsys):
    seen = thread_errors(monkeypatch)
    log = metrics(tmp_path)
    log.handle(Episode(10, 1.0, 5))
    log.flush()
    fail_event_writes(monkeypatch)
    for step in range(20, 400, 20):  # the writer thread dies on the first write; its caller must not
        log.handle(Episode(step, 1.0, 5))
        log.handle(Losses(step, 0.1, 0.2, 0.3, 0.4, 0.0, 0))
        log.tick(step)
        log.flush()
    log.close(400)
    err = capsys.readouterr().err
    assert len(lines(err)) == 1 and re.fullmatch(f"warning: TensorBoard events are no longer written to {tmp_path} \\({NO_SPACE}\\); the curves end near step (10|20), training and checkpoints go on", lines(err)[0]), err
    assert seen == [], "the writer thread's traceback is not printed"


def test_event_files_that_cannot_be_written_at_start_are_one_line_without_a_thread_traceback(tmp_path, monkeypatch, capsys):
    seen = thread_errors(monkeypatch)
    fail_event_writes(monkeypatch)
    with pytest.raises(OSError):
        metrics(tmp_path)
    assert seen == [] and capsys.readouterr().err == ""
    trainer = Trainer(Config(runs_dir=str(tmp_path / "runs"), max_steps=100, **QUICK))
    with pytest.raises(UsageError, match="cannot write TensorBoard events there .No space left on device.$"):
        trainer.run()
    assert seen == []


# --- on a real full disk: a small tmpfs (root only) -----------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A mount of a small tmpfs, made by a call: small_disk('8m') -> its path."""
    mounts = []

    def mount(size: str) -> Path:
        point = tmp_path / f"disk{len(mounts)}"
        point.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


class Train:
    """train.py on CartPole in its own session, its stderr collected as it comes."""

    def __init__(self, runs_dir: Path, *args):
        command = [sys.executable, str(REPO / "train.py"), "--runs-dir", str(runs_dir), "--env-id", "CartPole-v1", "--num-processes", "1", "--no-evaluator", *map(str, args)]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.err: list[str] = []
        self.reader = threading.Thread(target=lambda: self.err.extend(self.process.stderr), daemon=True)
        self.reader.start()

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.err))

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        try:
            out = self.process.stdout.read() if self.process.wait(timeout=timeout) is not None else ""
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.reader.join(timeout=10)
        return self.process.returncode, out, "".join(self.err)


@pytest.mark.slow
def test_on_a_disk_that_fills_up_training_goes_on_and_the_exit_names_the_last_good_checkpoint(small_disk):
    """The user's case: room for the first checkpoint (5 MB), not for a second one beside it;
    then the disk fills up completely (the event files too), training goes on, Ctrl-C."""
    disk = small_disk("8m")
    run = Train(disk, "--max-steps", 10**8, "--checkpoint-interval", 1)
    try:
        assert wait_for(lambda: any(disk.glob("*/checkpoints/latest.pt")), 120, interval=0.2), "no first checkpoint"
        subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=64k"], capture_output=True)
        assert wait_for(lambda: run.said("TensorBoard events are no longer written"), 60), run.err
        assert wait_for(lambda: run.said(f"{NO_SPACE}; the previous latest.pt is kept"), 60), run.err
        assert run.process.poll() is None, "training goes on"
        os.killpg(run.process.pid, signal.SIGINT)
    finally:
        code, out, err = run.finish()
    run_dir = only_run_dir(disk)
    latest = run_dir / "checkpoints" / "latest.pt"
    kept = load(latest)["global_step"]
    assert code == EXIT_FAILED, err
    assert "Traceback" not in err and "stopped at step" not in out
    assert f"{NO_SPACE}; the previous latest.pt is kept, at step {kept:,}" in err
    assert lines(err)[-1].startswith("error: the final checkpoint (step ")
    assert f"{NO_SPACE}; the last good checkpoint is {latest}, at step {kept:,}" in lines(err)[-1]


@pytest.mark.slow
def test_on_a_disk_too_small_for_event_files_the_start_is_one_line(small_disk):
    disk = small_disk("4k")  # config.json fits, the first event file does not
    code, out, err = Train(disk, "--max-steps", 100).finish()
    assert code == 2
    assert lines(err) == [f"train.py: error: {only_run_dir(disk)}: cannot write TensorBoard events there (No space left on device)"]


@pytest.mark.slow
@pytest.mark.parametrize("flag, says", [("--json", "cannot write the JSON results"), ("--plot", "cannot write the plot")])
def test_evaluate_on_a_full_disk_keeps_the_previous_results_file_whole(small_disk, tmp_path, flag, says):
    """evaluate.py --json/--plot over an earlier results file, on a disk that filled up meanwhile:
    one line, and the earlier file as it was (a plain write truncated it to 0 bytes first)."""
    from torch.utils.tensorboard import SummaryWriter

    trainer = new_trainer(tmp_path / "runs")
    assert trainer.save("latest.pt", 40)
    trainer.run_lock.release()
    with SummaryWriter(str(trainer.run_dir)) as writer:  # the curve --plot draws
        for step in range(0, 400, 20):
            writer.add_scalar("charts/episodic_return", 10 + step / 10, step)
    disk = small_disk("64k")
    results = disk / "results"
    results.write_text("the previous results\n")
    subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=4k"], capture_output=True)
    done = subprocess.run([sys.executable, str(REPO / "evaluate.py"), "--checkpoint", trainer.run_dir / "checkpoints" / "latest.pt", "--episodes", "1", flag, results], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert lines(done.stderr) == [f"evaluate.py: error: {results}: {says}: No space left on device"]
    assert results.read_text() == "the previous results\n"
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "results"], "no temp file left"
