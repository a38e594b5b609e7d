"""TensorBoard's HParams tab: every run's hyperparameters in one row, with its last and its best
evaluation return, read back from a real TensorBoard over HTTP on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from a3c_torch.config import Config
from a3c_torch.messages import Evaluation
from a3c_torch.metrics import BEST_EVAL_TAG, Metrics, hparams_of


def write_run(run_dir: Path, lr: float, eval_means: list[float]) -> None:
    """What the trainer writes for a run, without training: the metrics of a few evaluations."""
    config = Config(env_id="CartPole-v1", lr=lr).to_dict()
    metrics = Metrics(run_dir, config, start_step=0, max_steps=10_000, learning_rate=lambda step: lr, log_interval=10.0, resumed=False)
    best = None
    for i, mean in enumerate(eval_means):
        new_best = best is None or mean > best  # as the evaluator decides it
        best = mean if new_best else best
        metrics.handle(Evaluation(1000 * (i + 1), mean, 1.0, 50.0, new_best))
    metrics.close(1000 * len(eval_means))


def test_hparams_values_are_numbers_and_strings_and_leave_out_where_a_run_is_kept():
    values = hparams_of({**Config(lr=1e-4).to_dict(), "resume": None})
    assert values["lr"] == 1e-4 and values["evaluator"] == "True" and values["env_id"] == "ALE/Breakout-v5"
    assert not {"runs_dir", "resume", "log_interval", "checkpoint_interval", "target_eval_return"} & set(values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


@pytest.mark.slow
def test_two_runs_side_by_side_in_a_real_tensorboard(tmp_path):
    write_run(tmp_path / "runs" / "run-a", 1e-3, [10.0, 30.0, 20.0])
    write_run(tmp_path / "runs" / "run-b", 3e-4, [5.0, 8.0])
    port = free_port()
    tensorboard = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path / "runs"), "--host", "127.0.0.1", "--port", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/data/plugin/hparams"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                experiment = post(f"{base}/experiment", {"experimentName": ""})
                break
            except OSError:
                assert time.monotonic() < deadline and tensorboard.poll() is None, "TensorBoard did not answer"
                time.sleep(1)
        assert {info["name"] for info in experiment["hparamInfos"]} >= {"lr", "env_id", "optimizer", "num_processes", "evaluator"}
        assert [m["name"]["tag"] for m in experiment["metricInfos"]] == ["eval/episodic_return", BEST_EVAL_TAG]
        groups = post(f"{base}/session_groups", {
            "experimentName": "", "startIndex": 0, "sliceSize": 10,
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
            "colParams": [{"hparam": "lr"}, {"metric": {"tag": "eval/episodic_return"}}, {"metric": {"tag": BEST_EVAL_TAG}}],
        })["sessionGroups"]
        rows = {g["name"]: (g["hparams"]["lr"], {m["name"]["tag"]: m["value"] for m in g["metricValues"]}) for g in groups}
        assert rows == {
            "run-a": (1e-3, {"eval/episodic_return": 20.0, BEST_EVAL_TAG: 30.0}),  # the last and the best evaluation
            "run-b": (3e-4, {"eval/episodic_return": 8.0, BEST_EVAL_TAG: 8.0}),
        }
    finally:
        tensorboard.kill()
        tensorboard.wait()
