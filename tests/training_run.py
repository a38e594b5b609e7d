"""train.py as the reliability tests run it: in a session of its own, its output collected as it
comes, every process it starts tagged in its environment, so that "no orphan processes" is checked
by looking for any live process with the tag, whoever its parent is now."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from a3c_torch.faults import FAULT_ENV_VAR
from helpers import REPO, alive, load, only_run_dir, wait_for

TAG_VAR = "A3C_TORCH_TEST_TAG"
CARTPOLE = ("--env-id", "CartPole-v1")
STARTUP_S = 120  # spawning and importing torch can take a while on a loaded machine


class Training:
    """train.py in its own session, its output collected as it comes, its processes tagged."""

    def __init__(self, runs_dir: Path, *args, fault: str | None = None, prefix: tuple = ()):
        self.tag = uuid.uuid4().hex
        env = {**os.environ, TAG_VAR: self.tag}
        env.pop(FAULT_ENV_VAR, None)
        if fault:
            env[FAULT_ENV_VAR] = fault
        command = [*prefix, sys.executable, str(REPO / "train.py"), "--runs-dir", str(runs_dir), *map(str, args)]
        self.process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.pid = self.process.pid
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True) for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(line)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    def said(self, text: str) -> bool:
        return text in self.stderr or text in self.stdout

    def wait(self, timeout: float = 120) -> int:
        code = self.process.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=10)
        return code

    def tagged_processes(self) -> list[int]:
        """Live processes (zombies excluded) started by this run: the trainer and its descendants."""
        found = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if f"{TAG_VAR}={self.tag}".encode() in environ.read_bytes().split(b"\0"):
                    found.append(int(environ.parent.name))
            except OSError:
                continue
        return [pid for pid in found if alive(pid)]

    def kill_everything(self) -> None:
        """Cleanup after a failed assertion: only this run's own processes."""
        for pid in self.tagged_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)


def latest(runs_dir: Path) -> dict:
    return load(only_run_dir(runs_dir) / "checkpoints" / "latest.pt")


def no_orphans(run: Training, within: float) -> bool:
    return wait_for(lambda: not run.tagged_processes(), within)
