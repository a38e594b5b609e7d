"""Returns, GAE and the A3C loss: pure functions over tensors of one rollout (time-major: shape
(T,) for one env, or (T, K) for K envs played side by side; the envs never mix).

Bootstrapping follows gymnasium's semantics:
- `terminated` at step t: the return ends there, the next state's value is 0;
- `truncated` at step t (a time limit): the return is cut, but continues as V(final observation);
- the rollout cut after --num-steps: the last step bootstraps from V(next observation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


def next_state_values(
    values: torch.Tensor,
    last_value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    truncation_values: torch.Tensor,
) -> torch.Tensor:
    """V(s_{t+1}) for every step of a rollout, as the return recursion must see it.

    values: V(s_t) for t < T; last_value: V(s_T) after the rollout cut (shape () or (K,));
    truncation_values[t]: V(final observation) where truncated[t] (ignored elsewhere).
    """
    following = torch.cat([values[1:], last_value.reshape(1, *values.shape[1:])])
    following = torch.where(truncated, truncation_values, following)
    return torch.where(terminated, torch.zeros_like(following), following)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    episode_ends: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimates and returns (advantage + value).

    `episode_ends[t]` (terminated or truncated) stops the recursion from carrying the next
    episode's advantages back; `next_values` already says how each step bootstraps. With
    gae_lambda = 1 the returns are the n-step returns of the A3C paper.
    """
    deltas = rewards + gamma * next_values - values
    # The backward recursion runs in NumPy float64 over time steps, all envs at once: 20 steps of
    # tensor indexing cost more. (With one env this is the same arithmetic as Python floats.)
    delta_array = deltas.detach().double().numpy()
    ends = episode_ends.numpy()
    advantage_array, running = np.empty_like(delta_array), np.zeros_like(delta_array[0])
    for t in range(len(delta_array) - 1, -1, -1):
        running = delta_array[t] + np.where(ends[t], 0.0, (gamma * gae_lambda) * running)
        advantage_array[t] = running
    advantages = torch.from_numpy(advantage_array).to(deltas.dtype)
    return advantages, advantages + values


@dataclass
class LossTerms:
    total: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor


def a3c_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    actions: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    value_loss_coef: float,
    entropy_coef: float,
) -> LossTerms:
    """The A3C loss, summed over the rollout's steps (as in the paper's accumulated gradients).

    policy_loss = -sum log pi(a|s) * A      (A detached: the critic is trained by its own term)
    value_loss  = sum 0.5 * (R - V)^2       (weighted by value_loss_coef in `total`)
    entropy     = sum H(pi(.|s))            (a bonus: subtracted, weighted by entropy_coef)
    """
    log_probs = F.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1).sum()
    policy_loss = -(chosen * advantages.detach()).sum()
    value_loss = (0.5 * (returns.detach() - values).pow(2)).sum()
    total = policy_loss + value_loss_coef * value_loss - entropy_coef * entropy
    return LossTerms(total, policy_loss, value_loss, entropy)
