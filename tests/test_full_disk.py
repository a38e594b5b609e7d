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
import signal

import pytest

import a3c_torch.checkpoint as checkpoint_module
from a3c_torch.config import Config
from a3c_torch.trainer import EXIT_FAILED, Trainer
from helpers import load

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
    trainer._on_eval(("eval", 60, 9.5, 1.0, 10.0, weights))
    assert lines(capsys.readouterr().err) == [f"warning: best.pt not written at step 60: {NO_SPACE}; there is no earlier best.pt"]
    assert trainer.best_eval is None


def test_a_resumed_run_knows_the_step_of_the_checkpoint_it_keeps(tmp_path, monkeypatch, capsys):
    first = new_trainer(tmp_path)
    assert first.save("latest.pt", 1_000)
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
