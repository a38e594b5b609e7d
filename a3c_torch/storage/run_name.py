"""The name of a new run directory, RUNS_DIR/<env>__<exp-name>__<seed>__<date-time>, and the
checks that --exp-name makes a valid one.

Light on purpose (no torch): train.py checks --exp-name before its slow imports, so a bad name
is one line at once, and no run directory is half made.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from a3c_torch.errors import UsageError

# Two runs started in the same second get "-2", "-3", ... (run_dir.create_run_dir): keep room for it.
SUFFIX_ROOM_BYTES = 4
DEFAULT_NAME_MAX = 255  # bytes per file name on ext4, xfs, btrfs, tmpfs


def run_dir_name(cfg, now: datetime | None = None) -> str:
    env = cfg.env_id.replace("/", "_")
    return f"{env}__{cfg.exp_name}__{cfg.seed}__{(now or datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def name_max(folder: Path) -> int:
    """The longest file name (in bytes) the file system of `folder`, or of its nearest existing
    parent when it is still to be made, allows."""
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def check_exp_name(cfg) -> None:
    """A UsageError naming --exp-name unless it makes a valid run directory name under --runs-dir."""
    name = cfg.exp_name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 reach Python as lone surrogates
        raise UsageError(f"--exp-name must be valid UTF-8 text, got {name!r}") from None
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise UsageError(f"--exp-name must not hold a newline, tab or other control character, got {name!r}")
    limit = name_max(Path(cfg.runs_dir))
    needed = len(run_dir_name(cfg).encode()) + SUFFIX_ROOM_BYTES
    if needed > limit:
        allowed = len(name.encode()) - (needed - limit)
        raise UsageError(f"--exp-name is too long: {len(name.encode())} bytes, and the run directory name made with it must fit the file system's {limit} bytes; use at most {max(allowed, 0)} bytes")
