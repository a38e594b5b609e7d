"""Test-wide settings: one intra-op thread, as in the real workers, and Ctrl-C as in a terminal.

With torch's default thread count, in-process tests fight the worker processes of other tests
for the 2 cores of a CI machine and run many times slower.

A suite started in the background (`nohup make test &`, `cmd &` in a script) inherits SIGINT
ignored, and an ignored signal stays ignored across exec: every train.py and evaluate.py the
tests start would then shrug off the Ctrl-C the tests send (two Ctrl-C tests failed so, with
exit 0 instead of 130). A handler is reset to the default in a child, so the children get the
terminal's SIGINT back.

`read_only_dir` is a folder that takes no files, for the tests of every output flag.
"""

import os
import signal
import subprocess

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under `nohup make test`: a handler that does nothing keeps the suite alive when
# its terminal closes, and the train.py runs it starts get the default back, as a user's would.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)


@pytest.fixture
def read_only_dir(tmp_path):
    """An existing directory that takes no files, for root too (a read-only tmpfs mount)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
