"""The classic A3C worker iteration, the baseline our worker is measured against.

Forward WITH autograd at every acting step (batch 1, one env), one backward per rollout, as the
popular A3C repositories do it. Same env semantics as a3c_torch.worker.RolloutCollector (LSTM
state zeroed at episode ends, truncation and rollout-cut bootstraps) and the same loss functions;
only the network work is organised differently. Used by profile_worker.py (its parts timed) and
throughput.py (steps/s next to train.py's).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F

from a3c_torch.losses import a3c_loss, gae, next_state_values
from a3c_torch.optim import hand_off_gradients
from a3c_torch.worker import copy_weights


class ClassicWorker:
    """One env, a local model and the shared model with its optimizer."""

    def __init__(self, env, local, shared, optimizer, seed: int):
        self.env, self.local, self.shared, self.optimizer = env, local, shared, optimizer
        self.obs, _ = env.reset(seed=seed)
        self.state = local.initial_state(1)
        self.episode_start = True

    def update(self, cfg, timers=None):
        """One rollout of cfg.num_steps and its update; `timers` (profile_worker's) times the parts.

        Network time = 'forward (autograd)' (timed by the timers' model hooks) + 'GAE + loss' + 'backward'.
        Returns (loss terms, grad norm).
        """
        section = timers.section if timers is not None else (lambda label: nullcontext())
        with section("weight sync"):
            copy_weights(self.shared, self.local)
        logits_list, values_list, actions, rewards, terminated, truncated, trunc_values = [], [], [], [], [], [], []
        with section("collect"):
            for _ in range(cfg.num_steps):
                logits, value, self.state = self.local(torch.as_tensor(self.obs).unsqueeze(0), self.state)
                action = int(torch.multinomial(F.softmax(logits.detach(), dim=-1), 1)[0, 0])
                obs, reward, term, trunc, _ = self.env.step(action)
                logits_list.append(logits)
                values_list.append(value)
                actions.append(action)
                rewards.append(float(reward))
                terminated.append(bool(term))
                truncated.append(bool(trunc and not term))
                trunc_values.append(0.0)
                if trunc and not term:
                    with torch.no_grad():
                        trunc_values[-1] = float(self.local(torch.as_tensor(obs).unsqueeze(0), self.state)[1])
                self.episode_start = bool(term or trunc)
                if self.episode_start:
                    obs, _ = self.env.reset()
                    self.state = self.local.initial_state(1)
                self.obs = obs
            # The LSTM state is carried into the next rollout, detached (truncated BPTT).
            self.state = (self.state[0].detach(), self.state[1].detach())
            with torch.no_grad():
                last_value = 0.0 if self.episode_start else float(self.local(torch.as_tensor(self.obs).unsqueeze(0), self.state)[1])
        with section("loss"):
            logits, values = torch.cat(logits_list), torch.cat(values_list)
            term_t, trunc_t = torch.tensor(terminated), torch.tensor(truncated)
            next_values = next_state_values(values.detach(), torch.tensor(last_value), term_t, trunc_t, torch.tensor(trunc_values))
            advantages, returns = gae(torch.tensor(rewards), values.detach(), next_values, term_t | trunc_t, cfg.gamma, cfg.gae_lambda)
            terms = a3c_loss(logits, values, torch.tensor(actions), advantages, returns, cfg.value_loss_coef, cfg.entropy_coef)
        with section("backward"):
            self.local.zero_grad(set_to_none=True)
            terms.total.backward()
        with section("clip"):
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.local.parameters(), cfg.max_grad_norm))
        with section("hand-off"):
            hand_off_gradients(self.local, self.shared)
        with section("optimizer.step"):
            self.optimizer.step()
        with section("stats"):
            stats = (terms.policy_loss.item(), terms.value_loss.item(), terms.entropy.item(), grad_norm)
        return terms, stats
