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
    """The classic A3C pattern, env by env: forward with autograd at every step, in order, one
    env's column of the rollout at a time (batch 1), and the envs' losses summed."""
    total = 0.0
    for k in range(rollout.actions.shape[1]):
        state = (rollout.initial_state[0][k : k + 1], rollout.initial_state[1][k : k + 1])
        logits, values = [], []
        for t in range(len(rollout.actions)):
            if rollout.episode_starts[t, k]:
                state = model.initial_state(1)
            step_logits, step_value, state = model(rollout.obs[t, k][None], state)
            logits.append(step_logits)
            values.append(step_value)
        logits, values = torch.cat(logits), torch.cat(values)
        column = lambda x: x[:, k]  # noqa: E731
        next_values = next_state_values(values.detach(), rollout.last_value[k], column(rollout.terminated), column(rollout.truncated), column(rollout.truncation_values))
        adv, ret = gae(column(rollout.rewards), values.detach(), next_values, column(rollout.terminated) | column(rollout.truncated), gamma, lam)
        total = total + a3c_loss(logits, values, column(rollout.actions), adv, ret, 0.5, 0.01).total
    return total


def make_collector(ends, seed=0, num_envs=1):
    """`ends` per env: one dict (every env alike) or a list of dicts, one per env."""
    torch.manual_seed(seed)
    model = ActorCritic((4,), 3, hidden_size=32)
    per_env = ends if isinstance(ends, list) else [ends] * num_envs
    return model, RolloutCollector([ScriptedEnv(e) for e in per_env], model, seed=0)


def test_rollout_records_ends_and_bootstrap_values():
    model, collector = make_collector({3: "terminated", 7: "truncated"})
    rollout = collector.collect(model, num_steps=10)
    assert rollout.terminated[:, 0].tolist() == [t == 3 for t in range(10)]
    assert rollout.truncated[:, 0].tolist() == [t == 7 for t in range(10)]
    assert rollout.episode_starts[:, 0].tolist() == [t in (0, 4, 8) for t in range(10)]
    assert rollout.truncation_values[7, 0] != 0 and rollout.truncation_values[[0, 3, 9], 0].abs().sum() == 0
    assert rollout.last_value[0] != 0, "a rollout cut mid-episode bootstraps from V(s_T)"
    # The LSTM state goes on into the next rollout (not reset at a rollout boundary).
    following = collector.collect(model, num_steps=2)
    assert not following.episode_starts[0, 0] and following.initial_state[0].abs().sum() > 0


def test_each_env_keeps_its_own_episode_bookkeeping():
    """Three envs ending at different steps: ends, resets and bootstraps are per env."""
    model, collector = make_collector([{3: "terminated"}, {5: "truncated"}, {}])
    rollout = collector.collect(model, num_steps=8)
    assert rollout.obs.shape == (8, 3, 4) and rollout.num_steps == 24
    assert rollout.terminated.nonzero().tolist() == [[3, 0]]
    assert rollout.truncated.nonzero().tolist() == [[5, 1]]
    assert rollout.episode_starts.nonzero().tolist() == [[0, 0], [0, 1], [0, 2], [4, 0], [6, 1]]
    assert rollout.truncation_values[5, 1] != 0 and rollout.truncation_values.count_nonzero() == 1
    assert rollout.last_value.count_nonzero() == 3
    # Env 2 never ended: its LSTM state was never zeroed, so it differs from a fresh one's.
    following = collector.collect(model, num_steps=1)
    assert following.initial_state[0].abs().sum(1).gt(0).all()


def test_terminal_last_step_gives_no_bootstrap():
    model, collector = make_collector([{4: "terminated"}, {}])
    rollout = collector.collect(model, num_steps=5)
    assert rollout.last_value[0] == 0 and rollout.last_value[1] != 0
    assert collector.episode_starts.tolist() == [True, False]
    assert collector.state[0][0].abs().sum() == 0, "LSTM state reset at the episode end"
    assert collector.state[0][1].abs().sum() > 0, "only the env whose episode ended"


@pytest.mark.parametrize(
    "ends",
    [{}, {2: "terminated", 9: "truncated"}, {0: "truncated", 19: "terminated"}, [{2: "terminated"}, {}, {9: "truncated", 10: "terminated"}]],
)
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
    slow.backward()
    torch.testing.assert_close(fast.total, slow, rtol=1e-5, atol=1e-5)
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


@pytest.mark.parametrize("schedule, envs", [("constant", 1), ("linear", 1), ("linear", 2)])
def test_the_worker_steps_with_the_scheduled_learning_rate(schedule, envs, monkeypatch):
    """The real worker loop (in this process) on CartPole: each update's lr follows the schedule."""
    import os
    import queue

    import torch.multiprocessing as mp

    from a3c_torch import worker
    from a3c_torch.child_context import WorkerContext
    from a3c_torch.config import Config
    from a3c_torch.processes import StepCounter, StopFlag

    monkeypatch.setattr(worker, "setup_child", lambda trainer_pid: None)  # signals stay pytest's
    cfg = Config(env_id="CartPole-v1", num_processes=1, envs_per_process=envs, max_steps=200, lr=1e-3, lr_schedule=schedule)
    shared = ActorCritic((4,), 2, cfg.hidden_size)
    shared.share_memory()
    optimizer = SharedAdam(shared.parameters(), lr=cfg.lr)
    global_steps, seen = StepCounter(mp.get_context("spawn")), []
    step = optimizer.step
    monkeypatch.setattr(optimizer, "step", lambda: (seen.append((global_steps.value, optimizer.param_groups[0]["lr"])), step()))
    worker._work(WorkerContext(cfg=cfg, shared_model=shared, global_steps=global_steps, stop_flag=StopFlag(mp.get_context("spawn")), to_trainer=queue.Queue(),
                               trainer_pid=os.getppid(), rank=0, optimizer=optimizer))
    assert [s for s, _ in seen] == list(range(0, 200, 20 * envs)), "one update per rollout of 20 steps x envs"
    expected = [1e-3 if schedule == "constant" else 1e-3 * (1 - s / 200) for s, _ in seen]
    assert [lr for _, lr in seen] == pytest.approx(expected)
