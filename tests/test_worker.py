"""The worker's rollout and update: recompute == step-by-step, bootstrapping, skipped updates."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from a3c_torch.losses import a3c_loss, gae, next_state_values
from a3c_torch.model import ActorCritic
from a3c_torch.optim import SharedAdam
from a3c_torch.worker import RolloutCollector, apply_update, rollout_loss


class ScriptedEnv(gym.Env):
    """Random vector observations; ends episodes at scripted step counts (terminated or truncated)."""

    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, ends):
        self.ends = dict(ends)  # global step index -> "terminated" | "truncated"
        self.t = 0
        self.rng = np.random.default_rng(0)

    def _obs(self):
        return self.rng.uniform(-1, 1, 4).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        return self._obs(), {}

    def step(self, action):
        end = self.ends.get(self.t)
        self.t += 1
        return self._obs(), float(action) - 1.0, end == "terminated", end == "truncated", {}


def step_by_step_loss(model, rollout, gamma=0.99, lam=1.0):
    """The classic A3C pattern: forward with autograd at every step, in order."""
    state = rollout.initial_state
    logits, values = [], []
    for t in range(len(rollout.actions)):
        if rollout.episode_starts[t]:
            state = model.initial_state(1)
        step_logits, step_value, state = model(rollout.obs[t : t + 1], state)
        logits.append(step_logits)
        values.append(step_value)
    logits, values = torch.cat(logits), torch.cat(values)
    next_values = next_state_values(values.detach(), rollout.last_value, rollout.terminated, rollout.truncated, rollout.truncation_values)
    adv, ret = gae(rollout.rewards, values.detach(), next_values, rollout.terminated | rollout.truncated, gamma, lam)
    return a3c_loss(logits, values, rollout.actions, adv, ret, 0.5, 0.01)


def make_collector(ends, seed=0):
    torch.manual_seed(seed)
    model = ActorCritic((4,), 3, hidden_size=32)
    return model, RolloutCollector(ScriptedEnv(ends), model, seed=0)


def test_rollout_records_ends_and_bootstrap_values():
    model, collector = make_collector({3: "terminated", 7: "truncated"})
    rollout = collector.collect(model, num_steps=10)
    assert rollout.terminated.tolist() == [t == 3 for t in range(10)]
    assert rollout.truncated.tolist() == [t == 7 for t in range(10)]
    assert rollout.episode_starts.tolist() == [t in (0, 4, 8) for t in range(10)]
    assert rollout.truncation_values[7] != 0 and rollout.truncation_values[[0, 3, 9]].abs().sum() == 0
    assert rollout.last_value != 0, "a rollout cut mid-episode bootstraps from V(s_T)"
    # The LSTM state goes on into the next rollout (not reset at a rollout boundary).
    following = collector.collect(model, num_steps=2)
    assert not following.episode_starts[0] and following.initial_state[0].abs().sum() > 0


def test_terminal_last_step_gives_no_bootstrap():
    model, collector = make_collector({4: "terminated"})
    rollout = collector.collect(model, num_steps=5)
    assert rollout.last_value == 0
    assert collector.episode_start and collector.state[0].abs().sum() == 0, "LSTM state reset at the episode end"


@pytest.mark.parametrize("ends", [{}, {2: "terminated", 9: "truncated"}, {0: "truncated", 19: "terminated"}])
def test_one_pass_recompute_gives_the_step_by_step_gradients(ends):
    model, collector = make_collector(ends)
    collector.collect(model, num_steps=3)  # start mid-episode with a non-zero LSTM state
    rollout = collector.collect(model, num_steps=20)
    fast = rollout_loss(model, rollout, 0.99, 1.0, 0.5, 0.01)
    model.zero_grad()
    fast.total.backward()
    fast_grads = [p.grad.clone() for p in model.parameters()]
    slow = step_by_step_loss(model, rollout)
    model.zero_grad()
    slow.total.backward()
    torch.testing.assert_close(fast.total, slow.total, rtol=1e-5, atol=1e-5)
    for a, b in zip(fast_grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_non_finite_update_is_skipped_and_leaves_weights_alone():
    local, shared = ActorCritic((4,), 3, 32), ActorCritic((4,), 3, 32)
    shared.share_memory()
    optimizer = SharedAdam(shared.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in shared.parameters()]
    loss = sum(p.sum() for p in local.parameters()) * float("nan")
    applied, _ = apply_update(local, shared, optimizer, loss, max_grad_norm=40.0)
    assert not applied
    assert all(torch.equal(a, b) for a, b in zip(before, shared.parameters()))
    applied, grad_norm = apply_update(local, shared, optimizer, sum(p.sum() for p in local.parameters()), max_grad_norm=40.0)
    assert applied and np.isfinite(grad_norm)
    assert any(not torch.equal(a, b) for a, b in zip(before, shared.parameters()))


def test_weight_copy_is_complete():
    """copy_weights copies parameters only: it is complete while the model has no buffers."""
    from a3c_torch.worker import copy_weights

    source, target = ActorCritic((42, 42), 6), ActorCritic((42, 42), 6)
    assert not list(source.buffers()), "a buffer was added: copy_weights must copy buffers too"
    copy_weights(source, target)
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_the_worker_steps_with_the_scheduled_learning_rate(schedule, monkeypatch):
    """The real worker loop (in this process) on CartPole: each update's lr follows the schedule."""
    import os
    import queue

    import torch.multiprocessing as mp

    from a3c_torch import worker
    from a3c_torch.config import Config
    from a3c_torch.processes import StepCounter, StopFlag

    monkeypatch.setattr(worker, "setup_child", lambda parent_pid: None)  # signals stay pytest's
    cfg = Config(env_id="CartPole-v1", num_processes=1, max_steps=200, lr=1e-3, lr_schedule=schedule)
    shared = ActorCritic((4,), 2, cfg.hidden_size)
    shared.share_memory()
    optimizer = SharedAdam(shared.parameters(), lr=cfg.lr)
    global_steps, seen = StepCounter(mp.get_context("spawn")), []
    step = optimizer.step
    monkeypatch.setattr(optimizer, "step", lambda: (seen.append((global_steps.value, optimizer.param_groups[0]["lr"])), step()))
    worker._work(0, cfg, shared, optimizer, global_steps, StopFlag(mp.get_context("spawn")), queue.Queue(), os.getppid(), None, None)
    assert [s for s, _ in seen] == list(range(0, 200, 20)), "one update per 20-step rollout"
    expected = [1e-3 if schedule == "constant" else 1e-3 * (1 - s / 200) for s, _ in seen]
    assert [lr for _, lr in seen] == pytest.approx(expected)
