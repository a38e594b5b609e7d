"""ActorCritic shapes, and the one-pass rollout recompute against step-by-step calls."""

import pytest
import torch

from a3c_torch.model import ActorCritic, sample_action


@pytest.mark.parametrize("obs_shape, obs_dtype", [((42, 42), torch.uint8), ((4,), torch.float32)])
def test_forward_shapes(obs_shape, obs_dtype):
    model = ActorCritic(obs_shape, num_actions=6)
    obs = torch.zeros((3, *obs_shape), dtype=obs_dtype)
    logits, value, (h, c) = model(obs, model.initial_state(3))
    assert logits.shape == (3, 6) and value.shape == (3,) and h.shape == c.shape == (3, 256)


def test_initial_policy_is_near_uniform():
    model = ActorCritic((42, 42), num_actions=6)
    obs = torch.randint(0, 255, (8, 42, 42), dtype=torch.uint8)
    logits, _, _ = model(obs, model.initial_state(8))
    probs = torch.softmax(logits, -1)
    assert torch.allclose(probs, torch.full_like(probs, 1 / 6), atol=0.02)


def test_forward_sequence_equals_step_by_step_with_resets():
    torch.manual_seed(0)
    model = ActorCritic((42, 42), num_actions=4)
    T = 12
    obs = torch.randint(0, 255, (T, 42, 42), dtype=torch.uint8)
    starts = torch.zeros(T, dtype=torch.bool)
    starts[[0, 5, 6]] = True
    state0 = (torch.randn(1, 256), torch.randn(1, 256))
    logits, values, final = model.forward_sequence(obs, state0, starts)
    state = state0
    for t in range(T):
        if starts[t]:
            state = model.initial_state(1)
        step_logits, step_value, state = model(obs[t : t + 1], state)
        torch.testing.assert_close(logits[t : t + 1], step_logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values[t : t + 1], step_value, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final[0], state[0], rtol=1e-5, atol=1e-5)


def test_sample_action_greedy_and_sampled():
    logits = torch.tensor([[0.0, 10.0, 0.0]])
    assert sample_action(logits, greedy=True).item() == 1
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).expand(20000, 3)
    frequencies = torch.bincount(sample_action(logits), minlength=3).float() / 20000
    torch.testing.assert_close(frequencies, torch.tensor([0.2, 0.5, 0.3]), atol=0.015, rtol=0)
