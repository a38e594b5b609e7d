"""The worker: play a rollout with a local copy of the shared model, then update the shared model.

One rollout, one update:
1. copy the shared weights into the local model;
2. play --num-steps steps in each of its --envs-per-process envs under `inference_mode` (no
   autograd while acting; one batched forward for the K envs per step, through
   `acting.ActingForward`: the model's forward bit for bit, its convolutions' weights packed once
   per rollout), carrying each env's LSTM state across rollouts and zeroing it where that env's
   episode ends;
3. recompute the rollout's logits and values in one pass with autograd (encoder batched over the
   rollout's T x K frames; the weights did not change in between, so the gradients are those of
   the step-by-step computation);
4. GAE returns, loss, zero local grads, backward, clip, hand exactly these gradients to the shared
   parameters, shared optimizer step (Hogwild, no lock), add the steps to the global counter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import torch

from a3c_torch.acting import ActingForward
from a3c_torch.child_context import WorkerContext
from a3c_torch.envs import EnvSettings, make_env
from a3c_torch.faults import with_faults
from a3c_torch.losses import LossTerms, a3c_loss, gae, next_state_values
from a3c_torch.messages import Episode, Losses, WorkerState
from a3c_torch.model import ActorCritic, State, sample_action
from a3c_torch.lr_schedule import LrSchedule
from a3c_torch.optim import hand_off_gradients
from a3c_torch.processes import parent_alive, run_child, setup_child
from a3c_torch.worker_state import capture_worker, pack, restore_worker

# Losses are averaged over this many updates before they go to the trainer.
UPDATES_PER_REPORT = 10
# This many non-finite updates in a row mean the run has diverged: stop instead of going on.
MAX_CONSECUTIVE_SKIPS = 50


@dataclass
class Rollout:
    """T steps of K envs, time-major: every per-step tensor is (T, K, ...)."""

    obs: torch.Tensor  # (T, K, *obs_shape), as the envs gave them
    actions: torch.Tensor  # (T, K) int64
    rewards: torch.Tensor  # (T, K) float32, as the learner sees them (clipped for Atari)
    terminated: torch.Tensor  # (T, K) bool
    truncated: torch.Tensor  # (T, K) bool
    truncation_values: torch.Tensor  # (T, K) V(final obs) where truncated, else 0
    episode_starts: torch.Tensor  # (T, K) bool: LSTM state zeroed before step t
    initial_state: State  # LSTM state before step 0, (K, H) each
    last_value: torch.Tensor  # (K,) V(s_T), used where step T-1 did not end an episode
    episodes: list = field(default_factory=list)  # (raw return, length) of games that ended

    @property
    def num_steps(self) -> int:
        """Agent steps in the rollout, over all its envs."""
        return self.actions.numel()


def env_seed(seed: int, index: int) -> int:
    """Seed of a worker's env `index`: the worker's own seed for the first, so that one env per
    worker plays what it always did; derived ones (distinct from every worker's) for the others."""
    return seed if index == 0 else int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


class RolloutCollector:
    """Plays K envs with one model (one batched forward per step), keeping each env's observation,
    LSTM state and episode-start flag between rollouts. K = 1 is the A3C paper's worker."""

    def __init__(self, envs: list, model: ActorCritic, seed: int):
        self.envs = list(envs)
        self.obs = np.stack([env.reset(seed=env_seed(seed, k))[0] for k, env in enumerate(self.envs)])
        self.state = model.initial_state(len(self.envs))
        self.episode_starts = np.ones(len(self.envs), dtype=bool)
        self._acting = None

    def acting_forward(self, model: ActorCritic) -> ActingForward:
        """The acting forward of `model` with its current weights (packed again on every call)."""
        if self._acting is None or self._acting.model is not model:
            self._acting = ActingForward(model, len(self.envs))
        else:
            self._acting.refresh()
        return self._acting

    def collect(self, model: ActorCritic, num_steps: int) -> Rollout:
        K = len(self.envs)
        forward = self.acting_forward(model)  # the weights are fixed from here to the end of the rollout
        observations = np.empty((num_steps, *self.obs.shape), dtype=self.obs.dtype)
        actions = np.empty((num_steps, K), dtype=np.int64)
        rewards = np.empty((num_steps, K), dtype=np.float32)
        terminated = np.zeros((num_steps, K), dtype=bool)
        truncated = np.zeros((num_steps, K), dtype=bool)
        truncation_values = np.zeros((num_steps, K), dtype=np.float32)
        starts = np.empty((num_steps, K), dtype=bool)
        episodes = []
        initial_state = self.state
        with torch.inference_mode():
            for t in range(num_steps):
                starts[t] = self.episode_starts
                observations[t] = self.obs
                logits, _, (h, c) = forward(torch.from_numpy(self.obs), self.state)
                actions[t] = sample_action(logits).numpy()
                for k, env in enumerate(self.envs):
                    obs, reward, term, trunc, info = env.step(int(actions[t, k]))
                    rewards[t, k] = reward
                    terminated[t, k] = term
                    truncated[t, k] = trunc and not term
                    if trunc and not term:
                        # A time limit is not the end of the task: the return goes on as V(s').
                        truncation_values[t, k] = float(forward(torch.from_numpy(obs)[None], (h[k : k + 1], c[k : k + 1]))[1])
                    if "episode" in info:
                        episodes.append((float(info["episode"]["r"]), int(info["episode"]["l"])))
                    if term or trunc:
                        obs, _ = env.reset()
                    self.obs[k] = obs
                self.episode_starts = terminated[t] | truncated[t]
                if self.episode_starts.any():
                    keep = torch.from_numpy(~self.episode_starts).to(h.dtype).unsqueeze(1)
                    h, c = h * keep, c * keep
                self.state = (h, c)
            last_values = forward(torch.from_numpy(self.obs), self.state)[1].numpy()
            last_values = np.where(self.episode_starts, 0.0, last_values).astype(np.float32)
        # Tensors made under inference_mode cannot enter autograd: the initial state is cloned.
        return Rollout(
            obs=torch.from_numpy(observations),
            actions=torch.from_numpy(actions),
            rewards=torch.from_numpy(rewards),
            terminated=torch.from_numpy(terminated),
            truncated=torch.from_numpy(truncated),
            truncation_values=torch.from_numpy(truncation_values),
            episode_starts=torch.from_numpy(starts),
            initial_state=(initial_state[0].clone(), initial_state[1].clone()),
            last_value=torch.from_numpy(last_values),
            episodes=episodes,
        )


def rollout_loss(model: ActorCritic, rollout: Rollout, gamma: float, gae_lambda: float, value_loss_coef: float, entropy_coef: float) -> LossTerms:
    """The A3C loss of a rollout (summed over its T x K steps), recomputed in one pass with autograd."""
    logits, values, _ = model.forward_sequence(rollout.obs, rollout.initial_state, rollout.episode_starts)
    detached = values.detach()
    next_values = next_state_values(detached, rollout.last_value, rollout.terminated, rollout.truncated, rollout.truncation_values)
    advantages, returns = gae(rollout.rewards, detached, next_values, rollout.terminated | rollout.truncated, gamma, gae_lambda)
    return a3c_loss(logits.flatten(0, 1), values.flatten(), rollout.actions.flatten(), advantages.flatten(), returns.flatten(), value_loss_coef, entropy_coef)


def clip_gradients(model: torch.nn.Module, max_grad_norm: float) -> float:
    """Scale the model's gradients down to a total norm of `max_grad_norm` where it is above;
    returns the norm before clipping (nan or inf when a gradient is not finite)."""
    norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    if norm > max_grad_norm:  # rescaling costs a pass over every gradient: only when needed
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), max_grad_norm, norm)
    return float(norm)


def apply_update(local_model, shared_model, optimizer, loss: torch.Tensor, max_grad_norm: float) -> tuple[bool, float]:
    """Backward, clip, hand off, step. Returns (applied, grad norm); non-finite updates are skipped.
    benchmarks/network_breakdown.py times these calls one by one, in this order."""
    local_model.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = clip_gradients(local_model, max_grad_norm)
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


def worker_main(context: WorkerContext) -> None:
    """Process entry point (spawned): report any crash to the trainer, then exit non-zero."""
    run_child(context.name, context.to_trainer, _work, context)


def _work(context: WorkerContext) -> None:
    cfg, shared_model, optimizer, global_steps, to_trainer = context.cfg, context.shared_model, context.optimizer, context.global_steps, context.to_trainer
    setup_child(context.trainer_pid)
    seed = cfg.seed + context.rank if context.seed is None else context.seed
    seed_everything(seed)
    envs = [make_env(EnvSettings.from_config(cfg), seed=env_seed(seed, k), train=True) for k in range(cfg.envs_per_process)]
    local_model = ActorCritic.like(shared_model)
    collector = RolloutCollector(envs, local_model, seed)
    if context.saved_state is not None:
        restore_worker(context.saved_state, collector)
    update = with_faults(apply_update, context.rank)  # apply_update itself unless a test asks for a fault
    schedule = LrSchedule.of(cfg)
    sums, updates, skipped, consecutive_skips = np.zeros(5), 0, 0, 0
    while not context.stop_flag.is_set() and global_steps.value < cfg.max_steps and parent_alive(context.trainer_pid):
        updates_at_copy = global_steps.updates
        copy_weights(shared_model, local_model)
        rollout = collector.collect(local_model, cfg.num_steps)
        terms = rollout_loss(local_model, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
        if schedule.varies:
            schedule.set(optimizer, global_steps.value)
        applied, grad_norm = update(local_model, shared_model, optimizer, terms.total, cfg.max_grad_norm)
        if applied:
            consecutive_skips = 0
            # Staleness: the other workers' updates that landed between this copy and this update.
            staleness = global_steps.add_update() - 1 - updates_at_copy
        else:
            staleness = 0.0
            skipped += 1
            consecutive_skips += 1
            if consecutive_skips >= MAX_CONSECUTIVE_SKIPS:
                raise FloatingPointError(f"{consecutive_skips} updates in a row had a non-finite loss or gradient; the run has diverged (try a lower --lr)")
        step = global_steps.add(rollout.num_steps)
        for episode_return, length in rollout.episodes:
            to_trainer.put(Episode(step, episode_return, length))
        steps = float(rollout.num_steps)  # losses are reported per agent step
        sums += (terms.policy_loss.item() / steps, terms.value_loss.item() / steps, terms.entropy.item() / steps, grad_norm, staleness)
        updates += 1
        if updates == UPDATES_PER_REPORT:
            to_trainer.put(Losses.mean_of(step, sums, updates, skipped))
            sums, updates, skipped = np.zeros(len(sums)), 0, 0
    if parent_alive(context.trainer_pid):  # stopped at a rollout boundary: the trainer checkpoints this
        to_trainer.put(WorkerState(context.rank, pack(capture_worker(collector))))
    for env in envs:
        env.close()
