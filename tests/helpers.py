"""Running the commands as a user would, and reading what they leave behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


def run_command(script: str, *args, timeout: float = 240, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / script), *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def run_module(module: str, *args, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` from the repository root, as the tools of benchmarks/ and analysis/ are run."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def start_command(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO / script), *map(str, args)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def only_run_dir(runs_dir: Path) -> Path:
    runs = [p for p in runs_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def scalar_tags(run_dir: Path) -> dict[str, list]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: accumulator.Scalars(tag) for tag in accumulator.Tags()["scalars"]}


def children_of(pid: int) -> list[int]:
    """Direct child processes (Linux /proc), resource tracker excluded."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return [c for c in found if b"resource_tracker" not in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


def wait_for(condition, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def checkpointed_steps(run_parent: Path) -> int:
    """Global step of the newest latest.pt under run_parent (0 when there is none yet)."""
    for path in run_parent.glob("*/checkpoints/latest.pt"):
        try:
            return load(path)["global_step"]
        except Exception:  # noqa: BLE001 - being replaced right now; look again
            return 0
    return 0


def wait_for_progress(run_parent: Path, timeout: float = 120) -> None:
    """Until a run checkpointed with --checkpoint-interval 1 shows trained steps (slow start-up
    on a loaded machine is not a failure; no progress in `timeout` is)."""
    assert wait_for(lambda: checkpointed_steps(run_parent) > 0, timeout, interval=0.5), "no training progress"


def stop(process: subprocess.Popen, sig=signal.SIGINT, timeout: float = 30) -> tuple[int, str, str]:
    """Signal the whole process group, as a Ctrl-C in a terminal does."""
    os.killpg(process.pid, sig)
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err
