"""write_atomically (a3c_torch/storage/files.py): a results file is the old one or the new one, whole."""

from __future__ import annotations

import errno
import os
import threading

import pytest

import a3c_torch.storage.files as files
from a3c_torch.storage.files import NotDurable, write_atomically


def fail_fsync_of_files(monkeypatch):
    """fsync of a file fails as on a full disk (the data did not fit); folders sync as usual."""
    real = os.fsync

    def fsync(fd):
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)


def test_a_new_file_that_does_not_fit_is_not_left_behind(tmp_path, monkeypatch):
    fail_fsync_of_files(monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(tmp_path / "results.json", b"{}")
    assert list(tmp_path.iterdir()) == [], "no 0-byte file, no temp file"


def test_an_existing_file_is_kept_whole_when_the_new_one_does_not_fit(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_bytes(b"old")
    fail_fsync_of_files(monkeypatch)
    with pytest.raises(OSError):
        write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]


def test_a_symlink_is_followed_and_kept(tmp_path):
    (tmp_path / "real.json").write_bytes(b"old")
    (tmp_path / "link.json").symlink_to("real.json")
    write_atomically(tmp_path / "link.json", b"new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_bytes() == b"new"


def test_a_fifo_is_written_to_not_replaced(tmp_path):
    """`--json >(jq .)`: the shell hands over a pipe, which cannot be renamed over."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_atomically(fifo, b"results")
    reader.join(timeout=30)
    assert received == [b"results"]


def test_a_folder_that_cannot_be_synced_after_the_rename_is_not_reported_as_a_failed_write(tmp_path, monkeypatch):
    def no_sync(folder):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(files, "fsync_dir", no_sync)
    with pytest.raises(NotDurable):
        write_atomically(tmp_path / "results.json", b"new")
    assert (tmp_path / "results.json").read_bytes() == b"new", "in place, only not synced"
