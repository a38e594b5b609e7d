"""Returns and GAE against a plain NumPy loop; terminated vs truncated vs rollout cut; the loss."""

import numpy as np
import pytest
import torch

from a3c_torch.losses import a3c_loss, gae, next_state_values


def reference_returns(rewards, values, last_value, terminated, truncated, truncation_values, gamma, lam):
    """The textbook loop, written independently: walk back, restart at episode ends."""
    T = len(rewards)
    advantages = np.zeros(T)
    next_advantage = 0.0
    for t in reversed(range(T)):
        if terminated[t]:
            next_value, next_advantage = 0.0, 0.0
        elif truncated[t]:
            next_value, next_advantage = truncation_values[t], 0.0
        elif t == T - 1:
            next_value = last_value
        else:
            next_value = values[t + 1]
        delta = rewards[t] + gamma * next_value - values[t]
        advantages[t] = delta + gamma * lam * next_advantage
        next_advantage = advantages[t]
    return advantages, advantages + values


def run_ours(rewards, values, last_value, terminated, truncated, truncation_values, gamma, lam):
    as_t = lambda x, dtype=torch.float64: torch.tensor(x, dtype=dtype)  # noqa: E731
    next_values = next_state_values(as_t(values), as_t(last_value), as_t(terminated, torch.bool), as_t(truncated, torch.bool), as_t(truncation_values))
    adv, ret = gae(as_t(rewards), as_t(values), next_values, as_t(terminated, torch.bool) | as_t(truncated, torch.bool), gamma, lam)
    return adv.numpy(), ret.numpy()


@pytest.mark.parametrize("lam", [1.0, 0.95, 0.0])
@pytest.mark.parametrize("seed", range(5))
def test_gae_matches_numpy_loop(seed, lam):
    rng = np.random.default_rng(seed)
    T = 20
    terminated = rng.random(T) < 0.15
    truncated = (rng.random(T) < 0.15) & ~terminated
    args = (rng.normal(size=T), rng.normal(size=T), rng.normal(), terminated, truncated, rng.normal(size=T) * truncated, 0.99, lam)
    ours, reference = run_ours(*args), reference_returns(*args)
    np.testing.assert_allclose(ours[0], reference[0], atol=1e-10)
    np.testing.assert_allclose(ours[1], reference[1], atol=1e-10)


def test_hand_computed_cases():
    gamma = 0.5
    rewards, values = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]
    # Rollout cut: bootstrap from the last value.  R2 = 1 + 0.5*8 = 5; R1 = 1 + 0.5*5; R0 = 1 + 0.5*3.5
    _, ret = run_ours(rewards, values, 8.0, [False] * 3, [False] * 3, [0.0] * 3, gamma, 1.0)
    np.testing.assert_allclose(ret, [2.75, 3.5, 5.0])
    # Terminated at the last step: no bootstrap, whatever last_value says.
    _, ret = run_ours(rewards, values, 8.0, [False, False, True], [False] * 3, [0.0] * 3, gamma, 1.0)
    np.testing.assert_allclose(ret, [1.75, 1.5, 1.0])
    # Truncated at step 1: bootstrap from V(final obs) = 4, and step 2 belongs to a new episode.
    _, ret = run_ours(rewards, values, 8.0, [False] * 3, [False, True, False], [0.0, 4.0, 0.0], gamma, 1.0)
    np.testing.assert_allclose(ret, [1 + 0.5 * 3.0, 3.0, 5.0])
    # Terminated at step 0: the next episode's rewards never leak back.
    _, ret = run_ours(rewards, values, 8.0, [True, False, False], [False] * 3, [0.0] * 3, gamma, 1.0)
    np.testing.assert_allclose(ret, [1.0, 3.5, 5.0])


def test_loss_terms():
    logits = torch.tensor([[0.0, 0.0], [2.0, 0.0]], requires_grad=True)
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    actions = torch.tensor([0, 1])
    advantages = torch.tensor([1.0, -2.0])
    returns = torch.tensor([3.0, 0.0])
    terms = a3c_loss(logits, values, actions, advantages, returns, value_loss_coef=0.5, entropy_coef=0.01)
    log_p = torch.log_softmax(logits.detach(), -1)
    expected_policy = -(log_p[0, 0] * 1.0 + log_p[1, 1] * -2.0)
    expected_value = 0.5 * (2.0**2) + 0.5 * (2.0**2)
    expected_entropy = -(log_p.exp() * log_p).sum()
    torch.testing.assert_close(terms.policy_loss, expected_policy)
    torch.testing.assert_close(terms.value_loss, torch.tensor(expected_value))
    torch.testing.assert_close(terms.entropy, expected_entropy)
    torch.testing.assert_close(terms.total, expected_policy + 0.5 * expected_value - 0.01 * expected_entropy)
    terms.total.backward()
    # The advantage is a constant for the policy: the value gradient comes from the value term only.
    torch.testing.assert_close(values.grad, 0.5 * (values.detach() - returns))
