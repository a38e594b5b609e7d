"""ActorCritic shapes, and the one-pass rollout recompute against step-by-step calls."""

import pytest
import torch

from a3c_torch.model import TRUNKS, ActorCritic, sample_action
from helpers import REPO


@pytest.mark.parametrize("obs_shape, obs_dtype", [((42, 42), torch.uint8), ((4,), torch.float32)])
def test_forward_shapes(obs_shape, obs_dtype):
    model = ActorCritic(obs_shape, num_actions=6)
    obs = torch.zeros((3, *obs_shape), dtype=obs_dtype)
    logits, value, (h, c) = model(obs, model.initial_state(3))
    assert logits.shape == (3, 6) and value.shape == (3,) and h.shape == c.shape == (3, 256)


@pytest.mark.parametrize("trunk", TRUNKS)
def test_initial_policy_is_near_uniform(trunk):
    model = ActorCritic((42, 42), num_actions=6, trunk=trunk)
    obs = torch.randint(0, 255, (8, 42, 42), dtype=torch.uint8)
    logits, _, _ = model(obs, model.initial_state(8))
    probs = torch.softmax(logits, -1)
    assert torch.allclose(probs, torch.full_like(probs, 1 / 6), atol=0.02)


@pytest.mark.parametrize("trunk", TRUNKS)
@pytest.mark.parametrize("num_envs", [1, 3])
def test_forward_sequence_equals_step_by_step_with_resets(trunk, num_envs):
    """K envs whose episodes start at different steps: each env's LSTM is reset only at its own starts."""
    torch.manual_seed(0)
    model = ActorCritic((42, 42), num_actions=4, trunk=trunk)
    T = 12
    obs = torch.randint(0, 255, (T, num_envs, 42, 42), dtype=torch.uint8)
    starts = torch.zeros(T, num_envs, dtype=torch.bool)
    starts[[0, 5, 6], 0] = True
    if num_envs > 1:
        starts[[3, 11], 1] = True  # env 2 never resets
    state0 = (torch.randn(num_envs, 256), torch.randn(num_envs, 256))
    logits, values, final = model.forward_sequence(obs, state0, starts)
    assert logits.shape == (T, num_envs, 4) and values.shape == (T, num_envs)
    state = state0
    for t in range(T):
        keep = (~starts[t]).float().unsqueeze(1)
        state = (state[0] * keep, state[1] * keep)
        step_logits, step_value, state = model(obs[t], state)
        torch.testing.assert_close(logits[t], step_logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values[t], step_value, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final[0], state[0], rtol=1e-5, atol=1e-5)


LSTM_AND_HEADS = lambda features: 4 * 256 * (features + 256) + 2 * 4 * 256 + 257 * 6 + 257  # noqa: E731


@pytest.mark.parametrize(
    "trunk, size, parameters",
    [
        ("a3c", 84, (16 * 64 + 16) + (32 * 16 * 16 + 32) + (32 * 9 * 9 * 256 + 256) + LSTM_AND_HEADS(256)),
        ("a3c", 42, (16 * 64 + 16) + (32 * 16 * 16 + 32) + (32 * 3 * 3 * 256 + 256) + LSTM_AND_HEADS(256)),
        ("a3c-centred", 84, (16 * 64 + 16) + (32 * 16 * 16 + 32) + (32 * 9 * 9 * 256 + 256) + LSTM_AND_HEADS(256)),
        ("a3c-elu", 84, (16 * 64 + 16) + (32 * 16 * 16 + 32) + (32 * 9 * 9 * 256 + 256) + LSTM_AND_HEADS(256)),
        ("universe", 84, (32 * 9 + 32) + 3 * (32 * 32 * 9 + 32) + LSTM_AND_HEADS(32 * 6 * 6)),
    ],
)
def test_trunks_have_the_documented_layers(trunk, size, parameters):
    """The a3c trunk is the A3C paper's: conv 16 8x8/4, conv 32 4x4/2, FC 256 (then LSTM 256);
    a3c-elu is the same layers with ELU; universe has four 3x3/2 convolutions with ELU."""
    model = ActorCritic((size, size), num_actions=6, trunk=trunk)
    convs = [(m.out_channels, m.kernel_size[0], m.stride[0]) for m in model.encoder if isinstance(m, torch.nn.Conv2d)]
    assert convs == ([(16, 8, 4), (32, 4, 2)] if trunk.startswith("a3c") else [(32, 3, 2)] * 4)
    activations = {type(m) for m in model.encoder if isinstance(m, (torch.nn.ReLU, torch.nn.ELU))}
    assert activations == ({torch.nn.ReLU} if trunk in ("a3c", "a3c-centred") else {torch.nn.ELU})
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert ActorCritic.like(model).trunk == trunk


def test_trunk_errors():
    with pytest.raises(ValueError, match="unknown trunk"):
        ActorCritic((84, 84), 6, trunk="resnet")
    with pytest.raises(ValueError, match="at least 20x20"):
        ActorCritic((16, 16), 6, trunk="a3c")


def test_sample_action_greedy_and_sampled():
    logits = torch.tensor([[0.0, 10.0, 0.0]])
    assert sample_action(logits, greedy=True).item() == 1
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).expand(20000, 3)
    frequencies = torch.bincount(sample_action(logits), minlength=3).float() / 20000
    torch.testing.assert_close(frequencies, torch.tensor([0.2, 0.5, 0.3]), atol=0.015, rtol=0)


def test_a_checkpoint_from_before_the_model_choice_still_loads():
    """results/pong-84 was trained before --model existed: its config has no `model` key, and
    its weights are the universe trunk's. Config.from_dict fills in what the setting meant then."""
    from a3c_torch.storage.checkpoint import load_checkpoint
    from a3c_torch.config import Config

    checkpoint = load_checkpoint(REPO / "results" / "pong-84" / "policy.pt")  # its final checkpoint's weights and config
    assert "model" not in checkpoint["config"] and "envs_per_process" not in checkpoint["config"]
    cfg = Config.from_dict(checkpoint["config"])
    assert (cfg.model, cfg.envs_per_process) == ("universe", 1)
    model = ActorCritic((cfg.screen_size, cfg.screen_size), 6, cfg.hidden_size, cfg.model)
    model.load_state_dict(checkpoint["model"])  # raises if the layers do not match


def test_the_model_class_and_train_py_default_to_the_same_trunk():
    from a3c_torch.config import Config

    assert ActorCritic((84, 84), 6).trunk == Config.model


def test_the_centred_trunk_sees_frames_minus_their_mean():
    """a3c-centred: a uniform background is zero whatever its grey level, so shifting every
    pixel of a frame by the same amount changes nothing the trunk sees; the plain a3c trunk sees it."""
    torch.manual_seed(0)
    frames = torch.rand(3, 84, 84)
    centred, plain = ActorCritic((84, 84), 6, trunk="a3c-centred"), ActorCritic((84, 84), 6, trunk="a3c")
    torch.testing.assert_close(centred.encode(frames + 0.3), centred.encode(frames), atol=1e-5, rtol=0)
    assert not torch.allclose(plain.encode(frames + 0.3), plain.encode(frames), atol=1e-3)
    seen = centred.image_input((frames * 255).to(torch.uint8))
    assert seen.shape == (3, 1, 84, 84) and seen.mean(dim=(-2, -1)).abs().max() < 1e-5
