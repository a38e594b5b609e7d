"""The worker's acting forward (a3c_torch/acting.py) is the model's forward, bit for bit: every trunk
it packs, batches 1 to 16, 42x42 and 84x84, after the weights change, and a whole rollout of the
collector with it equals one without it; what it cannot pack it leaves to the model."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c_torch import acting as acting_module
from a3c_torch import worker
from a3c_torch.acting import PACKED_TRUNKS, ActingForward, can_pack
from a3c_torch.model import TRUNKS, ActorCritic
from a3c_torch.worker import RolloutCollector, copy_weights


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view(torch.int32)


def assert_bit_for_bit(out, ref) -> None:
    (logits, value, (h, c)), (ref_logits, ref_value, (ref_h, ref_c)) = out, ref
    for a, b in ((logits, ref_logits), (value, ref_value), (h, ref_h), (c, ref_c)):
        assert a.shape == b.shape and torch.equal(bits(a), bits(b)), float((a - b).abs().max())


def frames(batch: int, size: int, seed: int) -> torch.Tensor:
    """Game-like frames: a flat grey background with a few bright objects."""
    g = torch.Generator().manual_seed(seed)
    x = torch.full((batch, size, size), 87, dtype=torch.uint8)
    for _ in range(3):
        r, c = torch.randint(0, size - 4, (2,), generator=g).tolist()
        x[:, r : r + 4, c : c + 2] = 236
    return x | torch.randint(0, 2, x.shape, generator=g, dtype=torch.uint8)


def state(batch: int, hidden: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, hidden, generator=g) * 0.5, torch.randn(batch, hidden, generator=g)


@pytest.mark.parametrize("trunk", PACKED_TRUNKS)
@pytest.mark.parametrize("size", [42, 84])
def test_the_packed_forward_is_the_models_forward_bit_for_bit(trunk, size):
    torch.manual_seed(0)
    model = ActorCritic((size, size), 6, trunk=trunk)
    with torch.no_grad():  # weights as training leaves them, not the init's tiny policy head
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    for batch in (1, 2, 4, 16):
        forward = ActingForward(model, batch)
        assert forward.packed
        with torch.inference_mode():
            for seed, b in enumerate((batch, 1)):  # the batch it was packed for, and a truncation's batch 1
                obs, hc = frames(b, size, seed), state(b, 256, seed)
                assert_bit_for_bit(forward(obs, hc), model(obs, hc))


def test_after_the_weights_change_refresh_makes_it_equal_again():
    torch.manual_seed(1)
    model, other = ActorCritic((84, 84), 6), ActorCritic((84, 84), 6)
    forward = ActingForward(model, 4)
    obs, hc = frames(4, 84, 0), state(4, 256, 0)
    copy_weights(other, model)  # what the worker does before each rollout
    with torch.inference_mode():
        stale = forward(obs, hc)
        assert not torch.equal(stale[0], model(obs, hc)[0])  # the convolutions still had the old weights
        forward.refresh()
        assert_bit_for_bit(forward(obs, hc), model(obs, hc))


@pytest.mark.parametrize("obs_shape, trunk", [((84, 84), "universe"), ((84, 84), "a3c-elu"), ((4,), "a3c-centred")])
def test_what_it_cannot_pack_is_left_to_the_model(obs_shape, trunk):
    model = ActorCritic(obs_shape, 3, trunk=trunk)
    forward = ActingForward(model, 2)
    assert not forward.packed and not can_pack(model)
    obs = torch.randint(0, 256, (2, *obs_shape), dtype=torch.uint8) if len(obs_shape) == 2 else torch.randn(2, *obs_shape)
    with torch.inference_mode():
        assert_bit_for_bit(forward(obs, state(2, 256, 0)), model(obs, state(2, 256, 0)))


@pytest.mark.filterwarnings("ignore:TF32 acceleration")  # torch's note on switching oneDNN off
def test_without_onednn_it_calls_the_model():
    model = ActorCritic((42, 42), 6)
    with torch.backends.mkldnn.flags(enabled=False):
        assert not ActingForward(model).packed
    assert not ActingForward(model, enabled=False).packed
    assert set(PACKED_TRUNKS) <= set(TRUNKS)


class ScriptedFrames(gym.Env):
    """42x42 frames; ends episodes at scripted steps (terminated or truncated)."""

    observation_space = gym.spaces.Box(0, 255, (42, 42), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def __init__(self, ends: dict, seed: int):
        self.ends, self.t, self.seed = ends, 0, seed

    def _obs(self):
        return frames(1, 42, self.seed * 1000 + self.t)[0].numpy()

    def reset(self, *, seed=None, options=None):
        return self._obs(), {}

    def step(self, action):
        end = self.ends.get(self.t)
        self.t += 1
        return self._obs(), float(action) - 1.5, end == "terminated", end == "truncated", {}


def test_a_rollout_with_the_packed_forward_is_the_rollout_without_it(monkeypatch):
    ends = [{3: "terminated"}, {5: "truncated"}, {}]
    rollouts = []
    for enabled in (True, False):
        monkeypatch.setattr(worker, "ActingForward", functools.partial(ActingForward, enabled=enabled))
        torch.manual_seed(4)
        model = ActorCritic((42, 42), 4)
        collector = RolloutCollector([ScriptedFrames(e, k) for k, e in enumerate(ends)], model, seed=0)
        torch.manual_seed(5)
        rollouts.append([collector.collect(model, 8), collector.collect(model, 8)])
        assert collector.acting_forward(model).packed is enabled
    assert rollouts[0][0].truncation_values[5, 1] != 0  # the batch-1 forward of a truncated env
    for packed, plain in zip(*rollouts):
        for name in ("obs", "actions", "rewards", "terminated", "truncated", "truncation_values", "episode_starts", "last_value"):
            assert torch.equal(getattr(packed, name), getattr(plain, name)), name
        for a, b in zip(packed.initial_state, plain.initial_state):
            assert torch.equal(bits(a), bits(b))


def test_where_a_probe_forward_disagrees_with_the_model_it_acts_with_the_model(monkeypatch):
    """Another CPU or torch build could run the convolutions elsewhere: then the model's own forward."""
    model = ActorCritic((42, 42), 6)
    real = torch.ops.mkldnn._convolution_pointwise

    class Ops:  # a oneDNN convolution one ulp off somewhere
        @staticmethod
        def _convolution_pointwise(*args):
            out = real(*args)
            return out.view(torch.int32).add(1).view(torch.float32)

    monkeypatch.setattr(acting_module.torch.ops, "mkldnn", Ops)
    forward = ActingForward(model, 4)
    assert not forward.packed
    obs, hc = frames(4, 42, 0), state(4, 256, 0)
    with torch.inference_mode():
        assert_bit_for_bit(forward(obs, hc), model(obs, hc))


def test_a_torch_without_the_packing_ops_acts_with_the_model(monkeypatch):
    def missing(*args):
        raise NotImplementedError("no oneDNN here")

    monkeypatch.setattr(acting_module.torch._C._nn, "mkldnn_reorder_conv2d_weight", missing)
    assert not ActingForward(ActorCritic((42, 42), 6), 2).packed
