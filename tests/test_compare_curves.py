"""benchmarks/compare_curves.py: binned training-return means of runs, side by side."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from a3c_torch.errors import UsageError
from a3c_torch.plotting import TRAIN_RETURN

from helpers import run_command

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "compare_curves.py"
spec = importlib.util.spec_from_file_location("compare_curves", SCRIPT)
compare_curves = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_curves)


def write_run(run_dir: Path, points: dict[int, float]) -> Path:
    with SummaryWriter(str(run_dir)) as writer:
        for step, value in points.items():
            writer.add_scalar(TRAIN_RETURN, value, step)
    return run_dir


def test_binned_means_count_and_average_each_bin_and_mark_empty_ones():
    steps = np.array([0, 100, 250, 900])
    values = np.array([-21.0, -19.0, -10.0, 5.0])
    assert compare_curves.binned_means(steps, values, width=300, top=1200) == [(3, pytest.approx(-50 / 3)), (0, None), (0, None), (1, 5.0)]


def test_bins_stop_where_the_shortest_run_stops(tmp_path):
    fast = write_run(tmp_path / "fast", {step: step / 1e6 for step in range(0, 3_000_000, 100_000)})
    slow = write_run(tmp_path / "slow", {step: -step / 1e6 for step in range(0, 1_000_001, 100_000)})
    result = compare_curves.compare([str(fast), str(slow)], bin_millions=0.5, up_to_millions=None)
    assert result["bin_starts"] == [0.0, 500_000.0, 1_000_000.0]
    assert [games for games, _ in result["runs"][str(slow)]] == [5, 5, 1]
    assert result["runs"][str(fast)][1] == (5, pytest.approx(0.7))


def test_a_run_without_training_games_is_a_usage_error(tmp_path):
    empty = tmp_path / "empty"
    with SummaryWriter(str(empty)) as writer:
        writer.add_scalar("losses/entropy", 1.0, 0)
    with pytest.raises(UsageError, match="no charts/episodic_return"):
        compare_curves.compare([str(empty)], 0.5, None)


def test_command_line_prints_the_table_writes_json_and_rejects_bad_input(tmp_path):
    run = write_run(tmp_path / "run", {0: -21.0, 600_000: -15.0})
    result = run_command(str(SCRIPT), str(run), "--bin", "0.5", "--json", tmp_path / "out.json")
    assert result.returncode == 0, result.stderr
    assert "0.00-  0.50M" in result.stdout and "-21.00" in result.stdout and "-15.00" in result.stdout
    assert json.loads((tmp_path / "out.json").read_text())["bin_steps"] == 500_000
    for bad in ([str(tmp_path / "missing")], [str(run), "--bin", "0"]):
        result = run_command(str(SCRIPT), *bad)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "error:" in result.stderr
