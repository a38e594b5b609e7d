"""What a power cut can undo (issue 38, item 12): a rename or a new directory is durable only once
its folder is fsynced. config.json and new run directories are synced like checkpoints, and a
folder sync that fails after a rename is reported as what it is (the new file is in place).

A power cut cannot be injected here; the fsyncs themselves are recorded, and their failure is.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from a3c_torch.config import Config
import a3c_torch.storage.checkpoint as checkpoint_module
from a3c_torch.storage.run_dir import create_run_dir
from a3c_torch.trainer import Trainer
from helpers import load

QUICK = dict(env_id="CartPole-v1", hidden_size=16, num_processes=1, evaluator=False)


def record_fsyncs(monkeypatch) -> list[Path]:
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_a_new_run_directory_and_its_config_json_are_synced_into_their_parents(tmp_path, monkeypatch):
    synced = record_fsyncs(monkeypatch)
    run_dir = create_run_dir(Config(runs_dir=str(tmp_path / "new" / "runs"), **QUICK))
    assert json.loads((run_dir / "config.json").read_text())["env_id"] == "CartPole-v1"
    assert any(path.parent == run_dir and path.name.startswith(".config.json.tmp") for path in synced), "config.json's data, before its rename"
    for folder in (run_dir, tmp_path / "new" / "runs", tmp_path / "new", tmp_path):
        assert folder in synced, f"{folder} not synced: {synced}"
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints", "config.json"], "no temp file left"


def test_a_folder_sync_that_fails_after_the_rename_says_the_new_checkpoint_is_in_place(tmp_path, monkeypatch, capsys):
    trainer = Trainer(Config(runs_dir=str(tmp_path), **QUICK))
    trainer.started = 0.0
    assert trainer.save("latest.pt", 20)

    def no_sync(folder):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(checkpoint_module, "fsync_dir", no_sync)
    capsys.readouterr()
    assert trainer.save("latest.pt", 40), "it is written"
    err = capsys.readouterr().err
    assert err.strip() == "warning: latest.pt written at step 40, but its folder could not be synced to disk (input/output error): a power cut may bring back the previous latest.pt"
    assert "is kept" not in err
    assert load(trainer.run_dir / "checkpoints" / "latest.pt")["global_step"] == 40
    trainer.run_lock.release()
