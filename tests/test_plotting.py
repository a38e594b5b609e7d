"""Learning-curve PNGs from TensorBoard logs written the way the trainer writes them."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from a3c_torch.errors import UsageError
from a3c_torch.evaluation.plotting import PLOTTED_TAGS, moving_average, plot_learning_curve, smoothing_window, std_at
from a3c_torch.storage.scalars import EVAL_RETURN, EVAL_RETURN_STD, TRAIN_RETURN, read_scalars

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_log(run_dir: Path, train_points: int = 300, eval_every: int = 50, with_std: bool = True, other_tags_only: bool = False) -> Path:
    """A small synthetic run: noisy rising training returns, a periodic evaluation."""
    rng = np.random.default_rng(0)
    with SummaryWriter(str(run_dir)) as writer:
        for i in range(train_points):
            step = i * 100
            if other_tags_only:
                writer.add_scalar("charts/SPS", 1000.0, step)
                continue
            writer.add_scalar(TRAIN_RETURN, -21 + 40 * i / train_points + rng.normal(0, 3), step)
            if eval_every and i % eval_every == eval_every - 1:
                writer.add_scalar(EVAL_RETURN, -21 + 42 * i / train_points, step)
                if with_std:
                    writer.add_scalar(EVAL_RETURN_STD, 2.0, step)
    return run_dir


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 20_000, f"suspiciously small plot: {len(data)} bytes"


def test_curve_with_training_and_evaluation(tmp_path):
    run_dir = write_log(tmp_path / "run")
    out = plot_learning_curve(run_dir, tmp_path / "plots" / "curve.png")
    assert out == tmp_path / "plots" / "curve.png"
    assert_png(out)


def test_run_without_evaluation_still_plots(tmp_path):
    run_dir = write_log(tmp_path / "run", eval_every=0)
    assert_png(plot_learning_curve(run_dir, tmp_path / "curve.png"))


def test_evaluation_without_std_plots_without_a_band(tmp_path):
    run_dir = write_log(tmp_path / "run", with_std=False)
    assert_png(plot_learning_curve(run_dir, tmp_path / "curve.png"))


def test_read_scalars_gives_every_point_in_step_order(tmp_path):
    run_dir = write_log(tmp_path / "run", train_points=300, eval_every=50)
    series = read_scalars(run_dir, PLOTTED_TAGS)
    steps, values = series[TRAIN_RETURN]
    assert len(steps) == 300 and np.all(np.diff(steps) > 0)  # no reservoir sampling, sorted
    eval_steps, eval_means = series[EVAL_RETURN]
    assert eval_steps.tolist() == [i * 100 for i in range(49, 300, 50)]
    assert np.allclose(series[EVAL_RETURN_STD][1], 2.0)


def test_runs_that_cannot_be_plotted_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such run directory"):
        plot_learning_curve(tmp_path / "missing", tmp_path / "a.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no TensorBoard event files"):
        plot_learning_curve(tmp_path / "empty", tmp_path / "a.png")
    run_dir = write_log(tmp_path / "no-returns", train_points=5, other_tags_only=True)
    with pytest.raises(UsageError, match="nothing to plot yet"):
        plot_learning_curve(run_dir, tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def test_unwritable_output_is_usage_error(tmp_path):
    run_dir = write_log(tmp_path / "run", train_points=20)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="cannot write the plot"):
        plot_learning_curve(run_dir, tmp_path / "file" / "curve.png")


def test_moving_average_is_centred_and_keeps_every_point():
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert np.allclose(moving_average(values, 3), [1.5, 2.0, 3.0, 4.0, 4.5])
    assert np.allclose(moving_average(values, 1), values)
    assert np.allclose(moving_average(values, 100), 3.0)  # the window covers everything
    assert moving_average(np.array([]), 3).shape == (0,)


def test_smoothing_window_grows_with_the_curve_but_is_bounded():
    assert smoothing_window(5) == 1
    assert smoothing_window(1000) == 50
    assert smoothing_window(10**6) == 200


def test_std_band_needs_a_std_for_every_evaluation():
    steps = np.array([10, 20])
    assert std_at(steps, (np.array([10, 20]), np.array([1.0, 2.0]))).tolist() == [1.0, 2.0]
    assert std_at(steps, (np.array([10]), np.array([1.0]))) is None


def test_a_resumed_runs_purged_points_are_dropped_without_a_warning(tmp_path, caplog):
    """Like a run killed at step 500 after a checkpoint at 300, then resumed (purge_step=300)."""
    with SummaryWriter(str(tmp_path)) as writer:
        for step in range(0, 600, 100):
            writer.add_scalar(TRAIN_RETURN, 1.0, step)
    # A resumed run is a new process seconds later, so its event file's name (whole seconds,
    # then a per-process counter) sorts after the first one's. Two writers of one process in the
    # same second would not: the counter is not zero-padded ("...10" sorts before "...9"), and the
    # loader reads the files in name order. Start the second file in the next second.
    time.sleep(1.02 - time.time() % 1)
    with SummaryWriter(str(tmp_path), purge_step=300) as writer:
        for step in range(300, 700, 100):
            writer.add_scalar(TRAIN_RETURN, 2.0, step)
    caplog.set_level(logging.WARNING)  # what a user's terminal shows
    steps, values = read_scalars(tmp_path, [TRAIN_RETURN])[TRAIN_RETURN]
    assert steps.tolist() == [0, 100, 200, 300, 400, 500, 600]
    assert values.tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    assert "Purging" not in caplog.text
