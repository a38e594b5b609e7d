"""python -m analysis.compare_curves: binned training-return means of runs, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from a3c_torch.errors import UsageError
from a3c_torch.storage.scalars import TRAIN_RETURN
from analysis import compare_curves

from helpers import run_module

MODULE = "analysis.compare_curves"


def write_run(run_dir: Path, points: dict[int, float], sps: dict[int, float] | None = None, pause_after: int | None = None) -> Path:
    """A run's event file; with pause_after, every point logged after that step carries a wall
    time one hour later (a run stopped and resumed in another session)."""
    def wall_time(step):
        return 1_800_000_000.0 + step / 1000 + (3600 if pause_after is not None and step > pause_after else 0)

    with SummaryWriter(str(run_dir)) as writer:
        for step, value in points.items():
            writer.add_scalar(TRAIN_RETURN, value, step, walltime=wall_time(step))
        for step, rate in (sps or {}).items():
            writer.add_scalar(compare_curves.SPS, rate, step, walltime=wall_time(step))
    return run_dir


def test_binned_means_count_and_average_each_bin_and_mark_empty_ones():
    steps = np.array([0, 100, 250, 900])
    values = np.array([-21.0, -19.0, -10.0, 5.0])
    assert compare_curves.binned_means(steps, values, width=300, top=1200) == [(3, pytest.approx(-50 / 3)), (0, None), (0, None), (1, 5.0)]


def test_bins_stop_where_the_shortest_run_stops(tmp_path):
    fast = write_run(tmp_path / "fast", {step: step / 1e6 for step in range(0, 3_000_000, 100_000)})
    slow = write_run(tmp_path / "slow", {step: -step / 1e6 for step in range(0, 1_000_001, 100_000)})
    result = compare_curves.compare([str(fast), str(slow)], bin_width=0.5, up_to=None)
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
    result = run_module(MODULE, str(run), "--bin", "0.5", "--json", tmp_path / "out.json")
    assert result.returncode == 0, result.stderr
    assert "0.00-  0.50M" in result.stdout and "-21.00" in result.stdout and "-15.00" in result.stdout
    assert json.loads((tmp_path / "out.json").read_text())["bin_width"] == 500_000
    for bad in ([str(tmp_path / "missing")], [str(run), "--bin", "0"]):
        result = run_module(MODULE, *bad)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "error:" in result.stderr


def test_training_minutes_add_up_each_points_steps_at_its_own_rate():
    # 60k steps at 1,000/s (1 min), then 60k at 500/s (2 min), then 30k at 1,000/s (0.5 min)
    minutes = compare_curves.training_minutes(np.array([60_000, 120_000, 150_000]), np.array([1000.0, 500.0, 1000.0]))
    assert minutes == pytest.approx([1.0, 3.0, 3.5])
    # a reading of 0 steps/s (the first after a start or a resume) covers no time
    minutes = compare_curves.training_minutes(np.array([0, 60_000, 60_040, 120_040]), np.array([0.0, 1000.0, 0.0, 1000.0]))
    assert minutes == pytest.approx([0.0, 1.0, 1.0, 2.0])


def test_minute_bins_put_a_faster_run_ahead_and_ignore_pauses(tmp_path):
    """The same return curve per step, one run at twice the steps/s: per minute of training it is
    twice as far along. The slow run was paused for an hour (resumed later, as a long run is):
    its points' wall times jump, yet only its steps/s count."""
    returns = {step: step / 10_000 for step in range(10_000, 240_001, 10_000)}
    fast = write_run(tmp_path / "fast", returns, sps={step: 2000.0 for step in range(10_000, 240_001, 10_000)})
    slow = write_run(tmp_path / "slow", returns, sps={step: 1000.0 for step in range(10_000, 240_001, 10_000)}, pause_after=30_000)
    result = compare_curves.compare([str(fast), str(slow)], bin_width=1.0, up_to=None, minutes=True)
    # the fast run ends at 2 min (its last game opens the bin 2-3, as in step bins)
    assert result["unit"] == "minutes" and result["bin_starts"] == [0.0, 1.0, 2.0]
    fast_bins, slow_bins = result["runs"][str(fast)], result["runs"][str(slow)]
    # minute 0-1: the fast run's steps up to 120k, the slow run's up to 60k (the game at the bin's end goes to the next bin)
    assert fast_bins[0] == (11, pytest.approx(6.0)) and slow_bins[0] == (5, pytest.approx(3.0))
    assert fast_bins[1][1] > slow_bins[1][1]


def test_minute_bins_need_the_runs_steps_per_second(tmp_path):
    run = write_run(tmp_path / "run", {1000: 1.0})
    with pytest.raises(UsageError, match="no charts/SPS points"):
        compare_curves.compare([str(run)], 1.0, None, minutes=True)
    result = run_module(MODULE, str(run), "--minutes")
    assert result.returncode == 2 and "charts/SPS" in result.stderr


def write_length_points(run_dir: Path, points: dict[int, float]) -> None:
    """The episode lengths the trainer logs with each return (curve_from_events pairs them)."""
    with SummaryWriter(str(run_dir)) as writer:
        for step in points:
            writer.add_scalar("charts/episodic_length", 100.0, step, walltime=1_800_000_000.0 + step / 1000)


def test_a_published_curve_csv_gives_the_same_table_as_the_run_directory(tmp_path):
    """A slimmed run keeps only curve.csv: its table must be the one its events gave."""
    from a3c_torch.storage.curves import curve_from_events, write_curve

    points = {step: (step % 7) - 3.0 for step in range(0, 2_000_000, 37_000)}
    run = write_run(tmp_path / "run", points)
    write_length_points(run, points)
    published = tmp_path / "published"
    published.mkdir()
    write_curve(curve_from_events(run), published / "curve.csv")
    from_events = compare_curves.compare([str(run)], 0.5, 2.0)["runs"][str(run)]
    assert compare_curves.compare([str(published)], 0.5, 2.0)["runs"][str(published)] == from_events  # the folder
    assert compare_curves.compare([str(published / "curve.csv")], 0.5, 2.0)["runs"][str(published / "curve.csv")] == from_events  # the file
    with pytest.raises(UsageError, match="no training time"):
        compare_curves.compare([str(published)], 15, None, minutes=True)
