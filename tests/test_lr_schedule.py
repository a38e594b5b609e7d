"""The learning rate: resolved once (config.with_resolved_lr), and one schedule (LrSchedule) for
the workers, the metrics and the checkpoints."""

from __future__ import annotations

import pytest
import torch

from a3c_torch.config import Config, with_resolved_lr
from a3c_torch.lr_schedule import LrSchedule, rate_change_on_resume
from a3c_torch.optim import SharedAdam


def small_model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def test_scheduled_learning_rates():
    assert LrSchedule(1e-3, "constant", 1000).at(900) == 1e-3
    assert LrSchedule(1e-3, "linear", 1000).at(0) == 1e-3
    assert LrSchedule(1e-3, "linear", 1000).at(250) == pytest.approx(7.5e-4)
    assert LrSchedule(1e-3, "linear", 1000).at(1000) == 0.0
    assert LrSchedule(1e-3, "linear", 1000).at(1040) == 0.0, "the last rollouts past --max-steps do not go negative"
    assert not LrSchedule(1e-3, "constant", 1000).varies and LrSchedule(1e-3, "linear", 1000).varies
    with pytest.raises(ValueError):
        LrSchedule(1e-3, "cosine", 1000)


def test_the_schedule_of_a_config_starts_at_its_resolved_rate():
    assert LrSchedule.of(Config(num_processes=2, max_steps=1000)) == LrSchedule(4e-4, "linear", 1000)
    assert LrSchedule.of(Config(lr=3e-5, lr_schedule="constant")) == LrSchedule(3e-5, "constant", 20_000_000)


def test_the_rate_is_resolved_once_into_a_new_config():
    given = Config(num_processes=8)
    resolved = with_resolved_lr(given)
    assert given.lr is None, "the config given is left as it is"
    assert resolved.lr == pytest.approx(2e-4) and resolved.learning_rate == resolved.lr
    assert with_resolved_lr(Config(lr=3e-5)).lr == 3e-5, "an explicit --lr is kept"
    assert {**resolved.to_dict(), "lr": None} == given.to_dict(), "nothing else changes"


def test_a_worker_sets_the_scheduled_rate_in_its_optimizer():
    optimizer = SharedAdam(small_model().parameters(), lr=1e-3)
    LrSchedule(1e-3, "linear", 1000).set(optimizer, 250)
    assert [g["lr"] for g in optimizer.param_groups] == [pytest.approx(7.5e-4)]


def test_a_saved_state_shows_the_scheduled_rate():
    optimizer = SharedAdam(small_model().parameters(), lr=5e-5)
    assert [g["lr"] for g in LrSchedule(5e-5, "linear", 10_000).in_saved_state(optimizer.state_dict(), 2500)["param_groups"]] == [pytest.approx(3.75e-5)]
    assert [g["lr"] for g in LrSchedule(5e-5, "constant", 10_000).in_saved_state(optimizer.state_dict(), 2500)["param_groups"]] == [5e-5]
    assert [g["lr"] for g in optimizer.param_groups] == [5e-5], "the live optimizer is left as it is"


def test_a_resume_that_moves_the_rate_in_use_says_so():
    finished = Config(lr=4e-4, lr_schedule="linear", max_steps=10_000_000)
    longer = Config(lr=4e-4, lr_schedule="linear", max_steps=20_000_000)
    assert rate_change_on_resume(finished, longer, 10_000_000) == ["learning rate at step 10,000,000: 0 -> 0.0002"]
    assert rate_change_on_resume(finished, Config(lr=4e-4, lr_schedule="linear", max_steps=10_000_000, log_interval=5), 6_000_000) == []
    constant = Config(lr=4e-4, lr_schedule="constant", max_steps=10_000_000)
    assert rate_change_on_resume(constant, Config(lr=4e-4, lr_schedule="constant", max_steps=30_000_000), 6_000_000) == [], "a constant rate does not follow --max-steps"
