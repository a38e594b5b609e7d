"""Checkpoints: atomic writes, safe loads, and finding a run's checkpoint.

A checkpoint is a dict of tensors and plain values only, so it loads with `weights_only=True`:
loading a stranger's file never runs code. It is written to a temporary file in the same folder,
fsynced, then renamed over the old one: a crash leaves the previous checkpoint, never half of one.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import torch

from a3c_torch.errors import UsageError

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format_version", "model", "optimizer", "global_step", "config")


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"format_version": FORMAT_VERSION, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Load and check one of our checkpoints; anything else is a UsageError naming the path."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such checkpoint file")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, expected a checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = str(exc).strip().splitlines()[0] if "Weights only load failed" not in str(exc) else "it holds objects other than tensors and plain values (refused: loading it could run code)"
        raise UsageError(f"{path}: not an a3c_torch checkpoint: {reason}") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: unreadable checkpoint (truncated or corrupt?): {first}") from None
    if not isinstance(data, dict) or any(key not in data for key in REQUIRED_KEYS):
        raise UsageError(f"{path}: not an a3c_torch checkpoint (missing {', '.join(k for k in REQUIRED_KEYS if not isinstance(data, dict) or k not in data)})")
    if data["format_version"] != FORMAT_VERSION:
        raise UsageError(f"{path}: checkpoint format version {data['format_version']}, this a3c_torch reads version {FORMAT_VERSION}")
    return data


def checkpoint_in(run_dir: str | os.PathLike, prefer_best: bool = False) -> Path:
    """The checkpoint file of a run directory: latest.pt (or best.pt first when preferred)."""
    folder = Path(run_dir) / "checkpoints"
    names = ("best.pt", "latest.pt") if prefer_best else ("latest.pt",)
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise UsageError(f"{run_dir}: no checkpoint found (looked for {', '.join(str(folder / n) for n in names)})")


def resolve_checkpoint(path: str | os.PathLike, prefer_best: bool = False) -> Path:
    """A checkpoint file, or a run directory's checkpoint."""
    path = Path(path)
    if path.is_dir():
        return checkpoint_in(path, prefer_best)
    if not path.exists():
        raise UsageError(f"{path}: no such run directory or checkpoint file")
    return path


def newest_run(runs_dir: str | os.PathLike) -> Path:
    """The most recently written run directory that holds a checkpoint."""
    runs = [p for p in Path(runs_dir).glob("*/checkpoints/latest.pt")] + [p for p in Path(runs_dir).glob("*/checkpoints/best.pt")]
    if not runs:
        raise UsageError(f"{runs_dir}: no runs with a checkpoint found")
    return max(runs, key=lambda p: p.stat().st_mtime).parent.parent
