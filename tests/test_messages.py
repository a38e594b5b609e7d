"""The processes' messages (a3c_torch/messages.py): typed, frozen, and unchanged by the trip
through a spawned process's queue; nothing in the package reads a message by position."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from a3c_torch.evaluation.games import EpisodeResult
from a3c_torch.messages import ChildFailed, Episode, Evaluation, GamePlayed, Losses, WorkerState

PACKAGE = Path(__file__).resolve().parents[1] / "a3c_torch"


def one_of_each() -> list:
    return [
        Episode(step=120, episode_return=21.0, length=812),
        Losses(step=200, policy_loss=-0.5, value_loss=0.25, entropy=1.6, grad_norm=3.0, staleness=1.0, skipped=2),
        WorkerState(rank=3, packed={"rng": torch.arange(4, dtype=torch.uint8), "step": 7}),
        ChildFailed(name="worker 1", traceback="Traceback (most recent call last):\n  ...\nValueError: boom\n"),
        Evaluation(step=400, mean=18.5, std=1.5, mean_length=3000.0, new_best=True, weights={"value.bias": torch.ones(1)}),
        Evaluation(step=500, mean=17.0, std=2.0, mean_length=2900.0),
        GamePlayed(index=4, result=EpisodeResult(episode_return=5.0, length=90, truncated=False)),
    ]


def same(a, b) -> bool:
    """Equal, comparing tensors by value."""
    if torch.is_tensor(a):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def _echo(inbox, outbox) -> None:
    """A spawned child: send back what it got."""
    while (message := inbox.get()) is not None:
        outbox.put(message)


def test_messages_come_back_unchanged_from_a_spawned_process():
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_echo, args=(inbox, outbox), daemon=True)
    child.start()
    try:
        sent = one_of_each()
        for message in sent:
            inbox.put(message)
        received = [outbox.get(timeout=60) for _ in sent]
        inbox.put(None)
        child.join(timeout=30)
    finally:
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert all(same(a, b) for a, b in zip(sent, received)), received


def test_messages_are_frozen():
    for message in one_of_each():
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, dataclasses.fields(message)[0].name, None)


def test_losses_are_the_mean_of_the_sums():
    losses = Losses.mean_of(300, np.array([1.0, 2.0, 3.0, 40.0, 7.0]), 10, skipped=1)
    assert losses == Losses(300, 0.1, 0.2, 0.3, 4.0, 0.7, 1)
    assert all(type(getattr(losses, f)) is float for f in ("policy_loss", "value_loss", "entropy", "grad_norm", "staleness"))


def test_no_message_is_read_by_position():
    """No `message[i]`, and no tuple whose first item names its kind, anywhere in the package."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"message\[|late\[|\.put\(\(\"", line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert found == []
