"""Checkpoints: atomic writes that survive a full disk, refusal of NaN weights, safe loading, and
the worker state that makes a resume exact."""

import errno
import os
import pickle
import random
import time

import numpy as np
import pytest
import torch

from a3c_torch.config import Config
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.errors import UsageError
from a3c_torch.model import ActorCritic
from a3c_torch.optim import make_optimizer
import a3c_torch.storage.checkpoint as checkpoint_module
from a3c_torch.storage.checkpoint import CheckpointWriteFailed, NonFiniteWeights, all_finite, load_checkpoint, remove_stale_temp_files, save_checkpoint
from a3c_torch.trainer import Trainer
from a3c_torch.worker import RolloutCollector
from a3c_torch.worker_state import capture_env, capture_worker, decode, encode, pack, restore_env, restore_worker, unpack, worker_seed

REAL_TORCH_SAVE = torch.save


def payload(seed=0):
    torch.manual_seed(seed)
    model = ActorCritic((4,), 2, hidden_size=16)
    optimizer = make_optimizer("adam", model.parameters(), 1e-3)
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "global_step": 100, "config": Config(env_id="CartPole-v1").to_dict()}


@pytest.fixture
def good_checkpoint(tmp_path):
    path = tmp_path / "checkpoints" / "latest.pt"
    save_checkpoint(path, payload())
    return path


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != "latest.pt")


# --- disk full: the previous checkpoint survives --------------------------------------------------
def test_a_full_disk_midway_keeps_the_previous_checkpoint_and_no_temp_file(good_checkpoint, monkeypatch):
    before = good_checkpoint.read_bytes()

    def save_until_the_disk_is_full(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04" + b"\0" * 4096)  # some bytes made it to the file
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint_module.torch, "save", save_until_the_disk_is_full)
    with pytest.raises(CheckpointWriteFailed, match="no space left on device") as caught:
        save_checkpoint(good_checkpoint, payload(seed=1))
    assert caught.value.errno == errno.ENOSPC
    assert good_checkpoint.read_bytes() == before
    assert load_checkpoint(good_checkpoint)["global_step"] == 100
    assert leftovers(good_checkpoint.parent) == []


class FillsUpAfter:
    """A file that takes `room` bytes, then fails like a full disk."""

    def __init__(self, f, room):
        self.f, self.room = f, room

    def write(self, data):
        if self.room < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_a_full_disk_inside_torch_save_is_a_write_failure_too(good_checkpoint, monkeypatch):
    """torch.save turns the OSError of its file into a RuntimeError: still a failed write."""
    before = good_checkpoint.read_bytes()
    monkeypatch.setattr(checkpoint_module.torch, "save", lambda obj, f: REAL_TORCH_SAVE(obj, FillsUpAfter(f, 1000)))
    with pytest.raises(CheckpointWriteFailed):
        save_checkpoint(good_checkpoint, payload(seed=1))
    assert good_checkpoint.read_bytes() == before and leftovers(good_checkpoint.parent) == []


def test_non_finite_weights_are_never_written(good_checkpoint):
    before = good_checkpoint.read_bytes()
    bad = payload(seed=1)
    bad["model"]["value.bias"] = torch.tensor([float("nan")])
    with pytest.raises(NonFiniteWeights, match="value.bias"):
        save_checkpoint(good_checkpoint, bad)
    bad = payload(seed=1)
    next(iter(bad["optimizer"]["state"].values()))["exp_avg_sq"].fill_(float("inf"))
    with pytest.raises(NonFiniteWeights, match="optimizer"):
        save_checkpoint(good_checkpoint, bad)
    assert good_checkpoint.read_bytes() == before


def _keep_writing(tensor, started, stop):
    torch.set_num_threads(1)
    while not stop.value:
        tensor.add_(1.0)  # values change under any reader, and stay finite
        tensor.sub_(1.0)
        started.value = True


def test_a_tensor_that_another_process_is_writing_is_not_mistaken_for_nan():
    """torch.isfinite(x) reads x twice (x == x): on a tensor a Hogwild worker is writing it
    reported NaN in 45 of 300 checks here, which stopped healthy runs as diverged."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    tensor, started, stop = torch.rand(1_000_000).share_memory_(), ctx.RawValue("b", False), ctx.RawValue("b", False)
    writer = ctx.Process(target=_keep_writing, args=(tensor, started, stop), daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 60
        while not started.value and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.value, "the writer never started"
        assert all(all_finite(tensor) for _ in range(300))
    finally:
        stop.value = True
        writer.join(timeout=30)


def test_the_trainer_warns_and_keeps_going_when_a_checkpoint_cannot_be_written(tmp_path, monkeypatch, capsys):
    trainer = Trainer(Config(env_id="CartPole-v1", runs_dir=str(tmp_path), hidden_size=16, num_processes=1))
    trainer.started = 0.0
    assert trainer.save("latest.pt", 20)
    latest = trainer.run_dir / "checkpoints" / "latest.pt"
    before = latest.read_bytes()
    with torch.no_grad():
        trainer.model.value.bias.fill_(float("nan"))
    assert not trainer.save("latest.pt", 40)
    assert "non-finite values in value.bias" in capsys.readouterr().err
    with torch.no_grad():
        trainer.model.value.bias.zero_()
    monkeypatch.setattr(checkpoint_module.torch, "save", lambda obj, f: REAL_TORCH_SAVE(obj, FillsUpAfter(f, 1000)))
    assert not trainer.save("latest.pt", 60)
    assert "the previous latest.pt is kept" in capsys.readouterr().err
    assert latest.read_bytes() == before and leftovers(latest.parent) == []


def test_temp_files_of_an_interrupted_write_are_cleaned_up(good_checkpoint):
    (good_checkpoint.parent / ".latest.pt.tmp-12345").write_bytes(b"half")
    remove_stale_temp_files(good_checkpoint.parent)
    assert leftovers(good_checkpoint.parent) == []


# --- loading only what is ours, never running code ------------------------------------------------
class RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_with_a_code_payload_is_refused_without_running_it(tmp_path):
    marker, path = tmp_path / "pwned", tmp_path / "evil.pt"
    torch.save({**payload(), "extra": RunsCode(marker)}, path)
    with pytest.raises(UsageError, match="references posix.system .refused: loading it could run code") as caught:
        load_checkpoint(path)
    assert "\n" not in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize("content", [os.urandom(3000), b"", pickle.dumps({"model": 1}), b"PK\x03\x04 half a zip"], ids=["random", "empty", "plain-pickle", "truncated-zip"])
def test_files_that_are_not_checkpoints_are_one_line_errors(tmp_path, content):
    path = tmp_path / "x.pt"
    path.write_bytes(content)
    with pytest.raises(UsageError, match="not an a3c_torch checkpoint .unreadable") as caught:
        load_checkpoint(path)
    assert "\n" not in str(caught.value)


def test_no_garbage_makes_loading_raise_anything_but_a_usage_error(tmp_path):
    """torch.load raises KeyError, IndexError, UnicodeDecodeError, ... on some random inputs."""
    rng = random.Random(0)
    path = tmp_path / "garbage.pt"
    for i in range(600):
        prefix = rng.choice([b"", b"\x80\x02", b"\x80\x04", b"PK\x03\x04"])
        path.write_bytes(prefix + rng.randbytes(rng.randrange(1, 2000)))
        with pytest.raises(UsageError):
            load_checkpoint(path)


def test_a_torch_file_without_our_keys_is_refused(tmp_path):
    torch.save({"state_dict": {"w": torch.zeros(2)}}, tmp_path / "other.pt")
    with pytest.raises(UsageError, match="not an a3c_torch checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


# --- the worker state saved for an exact resume ---------------------------------------------------
def play(envs, collector, model, rollouts):
    """A few rollouts: everything the worker's RNGs and env produce, for comparison."""
    out = []
    for _ in range(rollouts):
        rollout = collector.collect(model, 20)
        out.append((rollout.obs.clone(), rollout.actions.clone(), rollout.rewards.clone(), rollout.terminated.clone(), rollout.truncated.clone()))
    out.append((torch.rand(3), torch.as_tensor(np.random.rand(3))))
    return out


def worker_with_envs(settings, model, seed, num_envs):
    envs = [make_env(settings, seed=seed) for _ in range(num_envs)]
    return envs, RolloutCollector(envs, model, seed=seed)


@pytest.mark.parametrize("env_id, num_envs", [("CartPole-v1", 1), ("ALE/Breakout-v5", 1), ("ALE/Breakout-v5", 2)])
def test_a_restored_worker_continues_exactly(env_id, num_envs):
    settings = EnvSettings(env_id)
    torch.manual_seed(0)
    model = ActorCritic(make_env(settings).observation_space.shape, 4 if "ALE" in env_id else 2, hidden_size=16)
    envs, collector = worker_with_envs(settings, model, 3, num_envs)
    play(envs, collector, model, 10)
    saved = unpack(pack(capture_worker(collector)))  # through bytes, as on the stats queue
    expected = play(envs, collector, model, 15)

    fresh_envs, fresh = worker_with_envs(settings, model, 99, num_envs)
    assert restore_worker(saved, fresh)
    got = play(fresh_envs, fresh, model, 15)
    for a, b in zip(expected, got):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_worker_state_of_the_one_env_layout_still_restores():
    """Checkpoints written before workers had several envs held one env's state, unbatched."""
    settings = EnvSettings("CartPole-v1")
    torch.manual_seed(0)
    model = ActorCritic((4,), 2, hidden_size=16)
    envs, collector = worker_with_envs(settings, model, 3, 1)
    play(envs, collector, model, 3)
    current = capture_worker(collector)
    legacy = {"rngs": current["rngs"], "env": current["envs"][0], "obs": encode(decode(current["obs"])[0]), "lstm": current["lstm"], "episode_start": bool(collector.episode_starts[0])}
    expected = play(envs, collector, model, 5)
    fresh_envs, fresh = worker_with_envs(settings, model, 99, 1)
    assert restore_worker(unpack(pack(legacy)), fresh)
    got = play(fresh_envs, fresh, model, 5)
    for a, b in zip(expected, got):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_another_number_of_envs_resumes_with_fresh_episodes():
    settings = EnvSettings("CartPole-v1")
    model = ActorCritic((4,), 2, hidden_size=16)
    _, collector = worker_with_envs(settings, model, 3, 2)
    saved = capture_worker(collector)
    _, fewer = worker_with_envs(settings, model, 5, 1)
    obs_before = fewer.obs.copy()
    assert not restore_worker(saved, fewer)
    assert np.array_equal(fewer.obs, obs_before)


def test_the_worker_state_loads_with_weights_only(tmp_path):
    envs, collector = worker_with_envs(EnvSettings("ALE/Pong-v5"), ActorCritic((84, 84), 6, hidden_size=16), 1, 2)
    save_checkpoint(tmp_path / "c.pt", {**payload(), "worker_states": {0: capture_worker(collector)}})
    state = load_checkpoint(tmp_path / "c.pt")["worker_states"][0]
    assert [s["layers"][0] for s in state["envs"]] == ["ClipReward"] * 2 and state["lstm"][0].shape == (2, 16)


def test_an_env_of_another_stack_is_left_alone():
    cartpole = make_env(EnvSettings("CartPole-v1"))
    cartpole.reset(seed=1)
    saved = capture_env(cartpole)
    other = make_env(EnvSettings("Acrobot-v1"))
    other.reset(seed=1)
    before = other.unwrapped.state
    assert not restore_env(other, {**saved, "layers": ["Something"]})
    assert other.unwrapped.state is before


def test_worker_seeds_are_seed_plus_rank_and_new_after_a_resume_without_state():
    assert [worker_seed(7, rank, 0) for rank in range(3)] == [7, 8, 9]
    resumed = {worker_seed(7, rank, 5000) for rank in range(3)}
    assert len(resumed) == 3 and not resumed & {7, 8, 9}
    assert worker_seed(7, 0, 5000) != worker_seed(7, 0, 6000)


def test_step_of_reads_a_checkpoints_step_from_a_path_or_a_string(good_checkpoint):
    from a3c_torch.storage.run_dir import step_of

    assert step_of(good_checkpoint) == step_of(str(good_checkpoint)) == 100
    assert step_of(str(good_checkpoint.parent / "missing.pt")) is None
