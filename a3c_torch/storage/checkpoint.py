"""Checkpoints: atomic writes, safe loads, and finding a run's checkpoint.

A checkpoint is a dict of tensors and plain values only, so it loads with `weights_only=True`:
loading a stranger's file never runs code. It is written to a temporary file in the same folder,
fsynced, then renamed over the old one: a crash leaves the previous checkpoint, never half of one.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import warnings
from pathlib import Path

import torch

from a3c_torch.errors import UsageError
from a3c_torch.storage.checks import check_checkpoint, is_policy
from a3c_torch.storage.files import fsync_dir, special_file_kind

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format_version", "model", "optimizer", "global_step", "config")
POLICY_KEYS = ("format_version", "model", "global_step", "config")  # a policy file has no optimizer
UNREADABLE = "not an a3c_torch checkpoint (unreadable: not a torch file, or truncated or corrupt)"


class NonFiniteWeights(ValueError):
    """The state to save holds NaN or inf: writing it would replace a good checkpoint with a dead one."""


class CheckpointWriteFailed(OSError):
    """The write failed (disk full, I/O error, ...); the previous checkpoint is untouched.

    `reason` says why in words ("no space left on device"), for a line of its own."""

    def __init__(self, message: str, reason: str = "", errno_: int | None = None):
        super().__init__(message)
        self.reason = reason or message
        self.errno = errno_


class CheckpointNotDurable(CheckpointWriteFailed):
    """The new checkpoint is in place, but its folder could not be fsynced after the rename: a
    power cut before the system writes the folder back could bring the previous one back."""


def save_checkpoint(path: str | os.PathLike, payload: dict) -> None:
    """Write atomically: temp file, fsync, rename. Refuses non-finite model or optimizer state."""
    path = Path(path)
    bad = non_finite_entries(payload.get("model", {})) + non_finite_entries(payload.get("optimizer", {}).get("state", {}), "optimizer.")
    if bad:
        raise NonFiniteWeights(f"{path.name} not written: non-finite values in {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        # Serialized in memory first: torch.save reports a full disk as an opaque RuntimeError
        # ("enforce fail at inline_container.cc ... unexpected pos"); a plain write says ENOSPC.
        buffer = io.BytesIO()
        torch.save({"format_version": FORMAT_VERSION, **payload}, buffer)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_file(tmp, buffer.getbuffer())
        os.replace(tmp, path)
    except Exception as exc:  # noqa: BLE001 - whatever failed, the previous checkpoint is untouched
        code, reason = _why(exc)
        raise CheckpointWriteFailed(f"{path.name} not written: {reason}", reason, code) from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    try:
        fsync_dir(path.parent)
    except OSError as exc:  # after the rename: the new file is there, only not durable yet
        code, reason = _why(exc)
        raise CheckpointNotDurable(f"{path.name} written but not synced: {reason}", reason, code) from exc


def _write_file(path: Path, data) -> None:
    """The bytes on disk, fsynced (where a full disk shows: ENOSPC from write, or from fsync)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _why(exc: BaseException) -> tuple[int | None, str]:
    """The errno and a lower-case reason of a failed write ("no space left on device")."""
    for cause in (exc, exc.__cause__, exc.__context__):
        if isinstance(cause, OSError) and cause.errno is not None:
            return cause.errno, _lower_first(cause.strerror or os.strerror(cause.errno))
    return None, _first_line(exc)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def remove_stale_temp_files(folder: str | os.PathLike) -> None:
    """Delete temp files of writes that a kill interrupted (the checkpoints themselves are whole)."""
    for stale in Path(folder).glob(".*.pt.tmp-*"):
        stale.unlink(missing_ok=True)


def non_finite_entries(state, prefix: str = "") -> list[str]:
    """Names of the floating-point tensors in a (nested) state dict that hold NaN or inf."""
    if isinstance(state, dict):
        return [name for key, value in state.items() for name in non_finite_entries(value, f"{prefix}{key}.")]
    if torch.is_tensor(state) and state.is_floating_point() and not all_finite(state):
        return [prefix.rstrip(".")]
    return []


def snapshot(state):
    """A copy of a (nested) state dict's tensors, taken once, so checks and the saved file agree."""
    if isinstance(state, dict):
        return {key: snapshot(value) for key, value in state.items()}
    if isinstance(state, list):
        return [snapshot(value) for value in state]
    return state.detach().clone() if torch.is_tensor(state) else state


def all_finite(tensor: torch.Tensor) -> bool:
    """Checked on a copy: isfinite reads each element twice (x == x), so on a tensor that another
    process is writing (Hogwild) it can report NaN where there is none."""
    return bool(torch.isfinite(tensor.detach().clone()).all())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _refuse_special_file(path: Path) -> None:
    """Opening a FIFO blocks until someone writes to it, and a device may never end: refused unopened."""
    kind = special_file_kind(path)
    if kind is not None:
        raise UsageError(f"{path}: is {kind}, not a checkpoint file")


def load_checkpoint(path: str | os.PathLike, resumable: bool = False) -> dict:
    """Load and check one of our checkpoints, or a policy file unless `resumable` is asked for
    (it has no optimizer state to go on with); anything else is a UsageError naming the path."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such checkpoint file")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, expected a checkpoint file")
    _refuse_special_file(path)
    try:
        with warnings.catch_warnings():  # torch warns about odd pickle protocols: the error says enough
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        blocked = re.search(r"unsupported GLOBAL (\S+)|Unsupported global: GLOBAL (\S+)", str(exc))
        if blocked:  # the file names a callable: unpickling it could run code
            name = blocked.group(1) or blocked.group(2)
            raise UsageError(f"{path}: not an a3c_torch checkpoint: it references {name} (refused: loading it could run code)") from None
        raise UsageError(f"{path}: {UNREADABLE}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except Exception:  # noqa: BLE001 - garbage makes torch.load raise anything (KeyError, IndexError, ...)
        raise UsageError(f"{path}: {UNREADABLE}") from None
    required = POLICY_KEYS if isinstance(data, dict) and is_policy(data) else REQUIRED_KEYS
    if not isinstance(data, dict) or any(key not in data for key in required):
        raise UsageError(f"{path}: not an a3c_torch checkpoint (missing {', '.join(k for k in required if not isinstance(data, dict) or k not in data)})")
    if resumable and is_policy(data):
        raise UsageError(f"{path}: is a policy file (weights, config and step, no optimizer state): evaluate.py plays it, but training cannot go on from it; resume from the run's checkpoints/latest.pt")
    if data["format_version"] != FORMAT_VERSION:
        raise UsageError(f"{path}: checkpoint format version {data['format_version']}, this a3c_torch reads version {FORMAT_VERSION}")
    check_checkpoint(data, path)  # every part's type, the config against Config, finite weights
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
    _refuse_special_file(path)
    return path


def newest_run(runs_dir: str | os.PathLike) -> Path:
    """The most recently written run directory that holds a checkpoint."""
    runs = [p for p in Path(runs_dir).glob("*/checkpoints/latest.pt")] + [p for p in Path(runs_dir).glob("*/checkpoints/best.pt")]
    if not runs:
        raise UsageError(f"{runs_dir}: no runs with a checkpoint found")
    return max(runs, key=lambda p: p.stat().st_mtime).parent.parent
