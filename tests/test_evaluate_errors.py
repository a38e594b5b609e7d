"""evaluate.py's answers to bad input, run as a user would: a checkpoint that is not one (random
bytes, a foreign dict, a future format, a truncated file, a pickle that would run code), missing
paths, an unusable device or destination, bad flags. Each is one line on stderr, exit code 2, no
traceback, and nothing is played."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from a3c_torch.config import Config
from a3c_torch.model import ActorCritic
from a3c_torch.storage.checkpoint import save_checkpoint
from test_evaluate_cli import CARTPOLE_RUN, assert_one_line_error, episode_lines, evaluate, runs  # noqa: F401, F811 (runs: the fixture, shared)


class Payload:
    """A pickle that runs a shell command when loaded without weights_only."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def bad_checkpoint(kind: str, folder: Path, good: Path) -> Path:
    path = folder / f"{kind}.pt"
    if kind == "random-bytes":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    elif kind == "foreign-dict":
        torch.save({"weights": torch.zeros(3), "step": 5}, path)
    elif kind == "future-version":
        model = ActorCritic((4,), 2, 64)
        save_checkpoint(path, {"format_version": 999, "model": model.state_dict(), "optimizer": {}, "global_step": 1, "config": Config(env_id="CartPole-v1").to_dict()})
    elif kind == "truncated":
        data = good.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "code-payload":
        torch.save({"model": Payload(folder / "payload-ran")}, path)
    return path


BAD_CHECKPOINTS = {
    "random-bytes": "not an a3c_torch checkpoint",
    "foreign-dict": "missing format_version",
    "future-version": "format version 999",
    "truncated": "truncated or corrupt",
    "code-payload": "could run code",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoint_file_is_one_line_error(kind, runs, tmp_path):
    good = runs / CARTPOLE_RUN / "checkpoints" / "latest.pt"
    path = bad_checkpoint(kind, tmp_path, good)
    result = evaluate("--checkpoint", path, "--episodes", 1)
    assert_one_line_error(result, str(path), BAD_CHECKPOINTS[kind])
    assert not (tmp_path / "payload-ran").exists(), "loading the checkpoint ran its code"


@pytest.mark.slow
def test_missing_checkpoint_file(tmp_path):
    missing = tmp_path / "nope.pt"
    assert_one_line_error(evaluate("--checkpoint", missing), str(missing), "no such")


@pytest.mark.slow
def test_no_runs_found(tmp_path):
    assert_one_line_error(evaluate("--runs-dir", tmp_path / "runs"), str(tmp_path / "runs"), "no runs")


@pytest.mark.slow
def test_run_dir_without_checkpoints(tmp_path):
    assert_one_line_error(evaluate("--run-dir", tmp_path), str(tmp_path), "no checkpoint")


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda(runs):
    assert_one_line_error(evaluate("--run-dir", runs / CARTPOLE_RUN, "--device", "cuda"), "--device cuda")


@pytest.mark.slow
def test_json_destination_is_checked_before_playing(runs, tmp_path):
    result = evaluate("--run-dir", runs / CARTPOLE_RUN, "--json", tmp_path)
    assert_one_line_error(result, str(tmp_path), "--json needs a file name")
    assert not episode_lines(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_a_results_file_in_a_read_only_folder_is_refused_before_playing(runs, read_only_dir, flag):
    result = evaluate("--run-dir", runs / CARTPOLE_RUN, "--episodes", 2, flag, read_only_dir / "results")
    assert_one_line_error(result, f"{read_only_dir}: {flag} cannot write there (")
    assert not episode_lines(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--checkpoint", "a.pt", "--run-dir", "b"], "not allowed with"),
        (["--episodes", "0"], "--episodes"),
        (["--episodes", "many"], "--episodes"),
    ],
)
def test_bad_flags(args, expected):
    assert_one_line_error(evaluate(*args), expected)
