"""The worker: play a rollout with a local copy of the shared model, then update the shared model.

One rollout, one update:
1. copy the shared weights into the local model;
2. play --num-steps steps under `inference_mode` (no autograd while acting), carrying the LSTM
   state across rollouts and zeroing it where an episode ends;
3. recompute the rollout's logits and values in one pass with autograd (encoder batched over the
   rollout; the weights did not change in between, so the gradients are those of the step-by-step
   computation);
4. GAE returns, loss, zero local grads, backward, clip, hand exactly these gradients to the shared
   parameters, shared optimizer step (Hogwild, no lock), add the steps to the global counter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import torch

from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.faults import FaultPlan
from a3c_torch.losses import LossTerms, a3c_loss, gae, next_state_values
from a3c_torch.model import ActorCritic, State, sample_action
from a3c_torch.optim import hand_off_gradients, scheduled_lr, set_learning_rate
from a3c_torch.processes import parent_alive, run_child, setup_child
from a3c_torch.worker_state import capture_worker, pack, restore_worker

# Losses are averaged over this many updates before they go on the stats queue.
UPDATES_PER_REPORT = 10
# This many non-finite updates in a row mean the run has diverged: stop instead of going on.
MAX_CONSECUTIVE_SKIPS = 50


@dataclass
class Rollout:
    obs: torch.Tensor  # (T, *obs_shape), as the env gave them
    actions: torch.Tensor  # (T,) int64
    rewards: torch.Tensor  # (T,) float32, as the learner sees them (clipped for Atari)
    terminated: torch.Tensor  # (T,) bool
    truncated: torch.Tensor  # (T,) bool
    truncation_values: torch.Tensor  # (T,) V(final obs) where truncated, else 0
    episode_starts: torch.Tensor  # (T,) bool: LSTM state zeroed before step t
    initial_state: State  # LSTM state before step 0
    last_value: torch.Tensor  # () V(s_T), used when step T-1 did not end an episode
    episodes: list = field(default_factory=list)  # (raw return, length) of games that ended


class RolloutCollector:
    """Plays one env with a model, keeping the observation and LSTM state between rollouts."""

    def __init__(self, env, model: ActorCritic, seed: int):
        self.env = env
        self.obs, _ = env.reset(seed=seed)
        self.state = model.initial_state(1)
        self.episode_start = True

    def collect(self, model: ActorCritic, num_steps: int) -> Rollout:
        observations, actions, rewards = [], [], []
        terminated, truncated, truncation_values, starts, episodes = [], [], [], [], []
        initial_state = self.state
        with torch.inference_mode():
            for _ in range(num_steps):
                starts.append(self.episode_start)
                observations.append(self.obs)
                logits, _, self.state = model(torch.from_numpy(self.obs)[None], self.state)
                action = int(sample_action(logits)[0])
                obs, reward, term, trunc, info = self.env.step(action)
                actions.append(action)
                rewards.append(float(reward))
                terminated.append(bool(term))
                truncated.append(bool(trunc and not term))
                truncation_values.append(0.0)
                if trunc and not term:
                    # A time limit is not the end of the task: the return goes on as V(s').
                    truncation_values[-1] = float(model(torch.from_numpy(obs)[None], self.state)[1])
                if "episode" in info:
                    episodes.append((float(info["episode"]["r"]), int(info["episode"]["l"])))
                self.episode_start = bool(term or trunc)
                if self.episode_start:
                    obs, _ = self.env.reset()
                    self.state = model.initial_state(1)
                self.obs = obs
            last_value = 0.0 if self.episode_start else float(model(torch.from_numpy(self.obs)[None], self.state)[1])
        # Tensors made under inference_mode cannot enter autograd: the initial state is cloned.
        return Rollout(
            obs=torch.as_tensor(np.stack(observations)),
            actions=torch.tensor(actions, dtype=torch.int64),
            rewards=torch.tensor(rewards, dtype=torch.float32),
            terminated=torch.tensor(terminated),
            truncated=torch.tensor(truncated),
            truncation_values=torch.tensor(truncation_values, dtype=torch.float32),
            episode_starts=torch.tensor(starts),
            initial_state=(initial_state[0].clone(), initial_state[1].clone()),
            last_value=torch.tensor(last_value, dtype=torch.float32),
            episodes=episodes,
        )


def rollout_loss(model: ActorCritic, rollout: Rollout, gamma: float, gae_lambda: float, value_loss_coef: float, entropy_coef: float) -> LossTerms:
    """The A3C loss of a rollout, recomputed in one pass with autograd."""
    logits, values, _ = model.forward_sequence(rollout.obs, rollout.initial_state, rollout.episode_starts)
    detached = values.detach()
    next_values = next_state_values(detached, rollout.last_value, rollout.terminated, rollout.truncated, rollout.truncation_values)
    advantages, returns = gae(rollout.rewards, detached, next_values, rollout.terminated | rollout.truncated, gamma, gae_lambda)
    return a3c_loss(logits, values, rollout.actions, advantages, returns, value_loss_coef, entropy_coef)


def apply_update(local_model, shared_model, optimizer, loss: torch.Tensor, max_grad_norm: float) -> tuple[bool, float]:
    """Backward, clip, hand off, step. Returns (applied, grad norm); non-finite updates are skipped."""
    local_model.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad for p in local_model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads)
    if norm > max_grad_norm:  # rescaling costs a pass over every gradient: only when needed
        torch.nn.utils.clip_grads_with_norm_(local_model.parameters(), max_grad_norm, norm)
    grad_norm = float(norm)
    if not (np.isfinite(grad_norm) and torch.isfinite(loss)):
        return False, grad_norm
    hand_off_gradients(local_model, shared_model)
    optimizer.step()
    return True, grad_norm


def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """In place, parameter by parameter (the model has no buffers): cheaper than load_state_dict."""
    with torch.no_grad():
        for target_param, source_param in zip(target.parameters(), source.parameters()):
            target_param.copy_(source_param)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def worker_main(rank, cfg, shared_model, optimizer, global_steps, stop_event, stats_queue, parent_pid, seed=None, saved_state=None):
    """Process entry point (spawned): report any crash to the trainer, then exit non-zero.

    `saved_state` (from the checkpoint, see worker_state.py) continues the worker exactly.
    """
    run_child(f"worker {rank}", stats_queue, _work, rank, cfg, shared_model, optimizer, global_steps, stop_event, stats_queue, parent_pid, seed, saved_state)


def _work(rank, cfg, shared_model, optimizer, global_steps, stop_event, stats_queue, parent_pid, seed, saved_state):
    setup_child(parent_pid)
    seed = cfg.seed + rank if seed is None else seed
    seed_everything(seed)
    env = make_env(EnvSettings.from_config(cfg), seed=seed, train=True)
    local_model = ActorCritic(shared_model.obs_shape, shared_model.policy.out_features, shared_model.hidden_size)
    collector = RolloutCollector(env, local_model, seed)
    if saved_state is not None:
        restore_worker(saved_state, env, collector)
    faults = FaultPlan.for_worker(rank)  # A3C_TORCH_FAULT, for the reliability tests only
    sums, updates, skipped, consecutive_skips = np.zeros(4), 0, 0, 0
    while not stop_event.is_set() and global_steps.value < cfg.max_steps and parent_alive(parent_pid):
        copy_weights(shared_model, local_model)
        rollout = collector.collect(local_model, cfg.num_steps)
        terms = rollout_loss(local_model, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
        if cfg.lr_schedule != "constant":
            set_learning_rate(optimizer, scheduled_lr(cfg.learning_rate, cfg.lr_schedule, global_steps.value, cfg.max_steps))
        applied, grad_norm = apply_update(local_model, shared_model, optimizer, faults.on_update(terms.total, shared_model), cfg.max_grad_norm)
        if applied:
            consecutive_skips = 0
        else:
            skipped += 1
            consecutive_skips += 1
            if consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
                raise FloatingPointError(f"{consecutive_skips} updates in a row had a non-finite loss or gradient; the run has diverged (try a lower --lr)")
        step = global_steps.add(cfg.num_steps)
        for episode_return, length in rollout.episodes:
            stats_queue.put(("episode", step, episode_return, length))
        steps = float(cfg.num_steps)
        sums += (terms.policy_loss.item() / steps, terms.value_loss.item() / steps, terms.entropy.item() / steps, grad_norm)
        updates += 1
        if updates == UPDATES_PER_REPORT:
            stats_queue.put(("losses", step, *(sums / updates), skipped))
            sums, updates, skipped = np.zeros(4), 0, 0
    if parent_alive(parent_pid):  # stopped at a rollout boundary: the trainer checkpoints this
        stats_queue.put(("worker_state", rank, pack(capture_worker(env, collector))))
    env.close()
