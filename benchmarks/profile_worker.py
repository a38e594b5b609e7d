"""Where one A3C worker's time goes, per agent step, and what would make it faster.

One process, no multiprocessing: a shared ActorCritic (share_memory) with its SharedAdam, a
local model, and a RolloutCollector on the training env stack, exactly as a worker builds them,
running rollouts of --num-steps steps. All timings are per agent step (a rollout's time divided
by its steps) and taken with this thread's CPU clock (`time.thread_time_ns`), so that time spent
waiting for a core on a shared machine is not counted; wall-clock numbers are printed next to
them. Only one thread is used (`torch.set_num_threads(1)`, OMP_NUM_THREADS=1), as in a worker.

Sections of the report
----------------------
1. Breakdown of the current worker loop (the code of a3c_torch.worker: `load_state_dict`,
   `RolloutCollector.collect`, `rollout_loss`, and the parts of `apply_update`, timed one by one):
   emulator step, acting forward (inference_mode), the rest of acting (sampling, tensors,
   bookkeeping), recompute forward (`forward_sequence`), GAE + loss, backward, clip, hand-off,
   optimizer.step, weight sync, stats. The instrumented total is checked against the same loop
   run without any instrumentation.
2. One-pass recompute (current) against the classic pattern (forward with autograd while acting,
   one backward per rollout): network time per step and total time per step, as ratios.
3. Ideas, each measured in isolation before/after with interleaved repetitions (median), each
   checked for giving the same results:
   - recompute with the fused LSTM op (`torch.lstm`, oneDNN on CPU) split at episode starts,
     and with a small custom autograd Function (one matmul for the W_hh gradient);
   - weight sync: in-place parameter copies instead of `load_state_dict(state_dict())`;
   - optimizer.step: Adam with foreach=True or fused=True instead of the per-tensor loop;
   - gradient clipping that only rescales when the norm is above the limit;
   - action sampling with the Gumbel-max trick instead of softmax + multinomial;
   - `torch.from_numpy(obs)[None]` instead of `torch.as_tensor(obs).unsqueeze(0)`;
   - GAE on Python floats instead of a loop over tensor elements;
   - np.stack and the Rollout tensors (the cost of building them, for scale);
   - channels_last convolution weights for the acting forward.
4. The whole loop: current against "proposed" (the recommended ideas together), interleaved
   blocks of rollouts, with the proposed loop's breakdown.

Nothing in a3c_torch/ is changed: the proposed variants are written here.

Status: commit 92ffc64 adopted the recommended ideas in a3c_torch (fused LSTM recompute, fused
SharedAdam, in-place weight sync, clip only when needed, Gumbel-max, from_numpy, GAE on floats).
Since then "current" and "proposed" run nearly the same code, so sections 3 and 4 show ratios
near 1; to reproduce the before/after figures, run this script at commit 055d83e. The copies of
the prototypes here (flagged by `duplicates` against model.py and worker.py) can go once nobody
needs that comparison.

Run
---
    .venv/bin/python benchmarks/profile_worker.py                      # Pong, 150 rollouts per variant
    .venv/bin/python benchmarks/profile_worker.py --rollouts 60 --json /tmp/profile.json
    .venv/bin/python benchmarks/profile_worker.py --env-id ALE/Breakout-v5
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections import defaultdict  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from a3c_torch.config import Config  # noqa: E402
from a3c_torch.envs import EnvSettings, make_env  # noqa: E402
from a3c_torch.losses import a3c_loss, gae, next_state_values  # noqa: E402
from a3c_torch.model import ActorCritic  # noqa: E402
from a3c_torch.optim import SharedAdam, hand_off_gradients  # noqa: E402
from a3c_torch.worker import Rollout, RolloutCollector, apply_update, rollout_loss, seed_everything  # noqa: E402

torch.set_num_threads(1)


# =============================================================================== timing helpers
class Timers:
    """Accumulated thread-CPU and wall nanoseconds per label."""

    def __init__(self):
        self.cpu: dict[str, int] = defaultdict(int)
        self.wall: dict[str, int] = defaultdict(int)

    def add(self, label: str, cpu_ns: int, wall_ns: int) -> None:
        self.cpu[label] += cpu_ns
        self.wall[label] += wall_ns

    @contextmanager
    def section(self, label: str):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        yield
        self.add(label, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)

    def reset(self) -> None:
        self.cpu.clear()
        self.wall.clear()


class TimedEnv(gym.Wrapper):
    """Times env.step and env.reset (the whole training stack below it) as 'emulator'."""

    def __init__(self, env, timers: Timers):
        super().__init__(env)
        self.timers = timers

    def step(self, action):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        result = self.env.step(action)
        self.timers.add("emulator step", time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)
        return result

    def reset(self, **kwargs):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        result = self.env.reset(**kwargs)
        self.timers.add("emulator step", time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)
        return result


def time_model_calls(model: torch.nn.Module, timers: Timers, label: str) -> None:
    """Every `model(...)` call (the acting forward) is added to `label`."""
    started = {}

    def before(module, inputs):
        started["t"] = (time.thread_time_ns(), time.perf_counter_ns())

    def after(module, inputs, output):
        cpu, wall = started.pop("t")
        timers.add(label, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)

    model.register_forward_pre_hook(before)
    model.register_forward_hook(after)


def time_method(obj, name: str, timers: Timers, label: str) -> None:
    """Wrap obj.name (an instance attribute shadows the class's method) to time it as `label`."""
    inner = getattr(obj, name)

    def timed(*args, **kwargs):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        result = inner(*args, **kwargs)
        timers.add(label, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)
        return result

    setattr(obj, name, timed)


def interleaved(cases: dict, repeats: int, inner: int) -> dict[str, float]:
    """Median thread-CPU microseconds per call of each case, the cases run in turns."""
    samples = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.thread_time_ns()
            for _ in range(inner):
                fn()
            samples[name].append((time.thread_time_ns() - start) / inner / 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def in_acting_loop(cases: dict, env: gym.Env, model: ActorCritic, repeats: int, inner: int, after: str) -> dict[str, float]:
    """Like `interleaved`, for the acting path: each timed call comes right after a real env step
    (after="step": fn(obs, state)) or a real env step and acting forward (after="forward":
    fn(logits)), as in the worker, where the emulator has just evicted the network's data from the
    caches. (In a tight loop of its own, softmax + multinomial takes ~20 us; in the worker ~90.)"""
    obs, _ = env.reset()
    state = model.initial_state(1)
    samples = {name: [] for name in cases}
    with torch.inference_mode():
        for _ in range(repeats):
            for name, fn in cases.items():
                total = 0
                for _ in range(inner):
                    obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                    if terminated or truncated:
                        obs, _ = env.reset()
                    if after == "forward":
                        logits, _, state = model(torch.from_numpy(obs)[None], state)
                        start = time.thread_time_ns()
                        fn(logits)
                    else:
                        start = time.thread_time_ns()
                        fn(obs, state)
                    total += time.thread_time_ns() - start
                samples[name].append(total / inner / 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


# =============================================================================== the worker
@dataclass
class Worker:
    env: gym.Env
    shared: ActorCritic
    optimizer: torch.optim.Optimizer
    local: ActorCritic
    collector: RolloutCollector
    timers: Timers | None


def make_worker(env_id: str, seed: int, timers: Timers | None = None, adam: str = "loop", forward_label: str = "acting forward") -> Worker:
    """What a3c_torch.worker._work and the trainer build, in one process; `timers` instruments it
    (env step and reset, every `local(...)` call as `forward_label`, local.forward_sequence)."""
    seed_everything(seed)
    env = make_env(EnvSettings(env_id), seed=seed, train=True)
    if timers is not None:
        env = TimedEnv(env, timers)
    shared = ActorCritic(env.observation_space.shape, int(env.action_space.n))
    shared.share_memory()
    optimizer = SharedAdam(shared.parameters(), lr=1e-4)
    if adam != "loop":  # prototype: SharedAdam(..., foreach=True) or SharedAdam(..., fused=True)
        for group in optimizer.param_groups:
            group["foreach"], group["fused"] = adam == "foreach", adam == "fused"
    local = ActorCritic(shared.obs_shape, shared.policy.out_features, shared.hidden_size)
    if timers is not None:
        time_model_calls(local, timers, forward_label)
        time_method(local, "forward_sequence", timers, "recompute forward")
    return Worker(env, shared, optimizer, local, RolloutCollector(env, local, seed), timers)


def stats(terms, grad_norm: float, steps: int) -> tuple:
    """What the worker does with the loss terms after each update (.item() syncs, averaging)."""
    return (terms.policy_loss.item() / steps, terms.value_loss.item() / steps, terms.entropy.item() / steps, grad_norm)


def current_update(w: Worker, cfg: Config) -> None:
    """One iteration of a3c_torch.worker._work, unchanged and uninstrumented."""
    w.local.load_state_dict(w.shared.state_dict())
    rollout = w.collector.collect(w.local, cfg.num_steps)
    terms = rollout_loss(w.local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
    _, grad_norm = apply_update(w.local, w.shared, w.optimizer, terms.total, cfg.max_grad_norm)
    stats(terms, grad_norm, cfg.num_steps)


def current_update_timed(w: Worker, cfg: Config) -> None:
    """The same iteration with each part timed (apply_update's body inlined to split it)."""
    t = w.timers
    with t.section("weight sync (load_state_dict)"):
        w.local.load_state_dict(w.shared.state_dict())
    with t.section("collect"):
        rollout = w.collector.collect(w.local, cfg.num_steps)
    with t.section("loss"):
        terms = rollout_loss(w.local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
    with t.section("backward"):
        w.local.zero_grad(set_to_none=True)
        terms.total.backward()
    with t.section("clip"):
        grad_norm = float(torch.nn.utils.clip_grad_norm_(w.local.parameters(), cfg.max_grad_norm))
        finite = bool(np.isfinite(grad_norm) and torch.isfinite(terms.total))
    if finite:
        with t.section("hand-off"):
            hand_off_gradients(w.local, w.shared)
        with t.section("optimizer.step"):
            w.optimizer.step()
    with t.section("stats"):
        stats(terms, grad_norm, cfg.num_steps)


# =============================================================================== classic pattern
def classic_update_timed(w: Worker, cfg: Config) -> None:
    """The classic A3C iteration: forward WITH autograd at every acting step, one backward.

    Same env semantics as RolloutCollector.collect (LSTM state zeroed at episode ends, truncation
    and rollout-cut bootstraps), same loss functions; only the network work is organised
    differently. Network time = 'forward (autograd)' + 'GAE + loss' + 'backward'.
    """
    t, c = w.timers, w.collector
    with t.section("weight sync (load_state_dict)"):
        w.local.load_state_dict(w.shared.state_dict())
    logits_list, values_list, actions, rewards, terminated, truncated, trunc_values = [], [], [], [], [], [], []
    with t.section("collect"):
        for _ in range(cfg.num_steps):
            logits, value, c.state = w.local(torch.as_tensor(c.obs).unsqueeze(0), c.state)  # timed by the hooks
            action = int(torch.multinomial(F.softmax(logits.detach(), dim=-1), 1)[0, 0])
            obs, reward, term, trunc, info = c.env.step(action)
            logits_list.append(logits)
            values_list.append(value)
            actions.append(action)
            rewards.append(float(reward))
            terminated.append(bool(term))
            truncated.append(bool(trunc and not term))
            trunc_values.append(0.0)
            if trunc and not term:
                with torch.no_grad():
                    trunc_values[-1] = float(w.local(torch.as_tensor(obs).unsqueeze(0), c.state)[1])
            c.episode_start = bool(term or trunc)
            if c.episode_start:
                obs, _ = c.env.reset()
                c.state = w.local.initial_state(1)
            c.obs = obs
        # The LSTM state is carried into the next rollout, detached (truncated BPTT).
        c.state = (c.state[0].detach(), c.state[1].detach())
        with torch.no_grad():
            last_value = 0.0 if c.episode_start else float(w.local(torch.as_tensor(c.obs).unsqueeze(0), c.state)[1])
    with t.section("loss"):
        logits, values = torch.cat(logits_list), torch.cat(values_list)
        term_t, trunc_t = torch.tensor(terminated), torch.tensor(truncated)
        next_values = next_state_values(values.detach(), torch.tensor(last_value), term_t, trunc_t, torch.tensor(trunc_values))
        advantages, returns = gae(torch.tensor(rewards), values.detach(), next_values, term_t | trunc_t, cfg.gamma, cfg.gae_lambda)
        terms = a3c_loss(logits, values, torch.tensor(actions), advantages, returns, cfg.value_loss_coef, cfg.entropy_coef)
    with t.section("backward"):
        w.local.zero_grad(set_to_none=True)
        terms.total.backward()
    with t.section("clip"):
        grad_norm = float(torch.nn.utils.clip_grad_norm_(w.local.parameters(), cfg.max_grad_norm))
    with t.section("hand-off"):
        hand_off_gradients(w.local, w.shared)
    with t.section("optimizer.step"):
        w.optimizer.step()
    with t.section("stats"):
        stats(terms, grad_norm, cfg.num_steps)


# =============================================================================== proposed changes
def forward_sequence_torch_lstm(self: ActorCritic, obs, state, episode_starts):
    """Proposed ActorCritic.forward_sequence: the LSTM part as one fused `torch.lstm` call per
    episode segment (oneDNN kernel on CPU, forward and backward), sharing the LSTMCell's weights
    (same gate layout i, f, g, o). The state is zeroed where an episode starts."""
    features = self.encode(obs)
    starts = episode_starts.tolist()
    bounds = [0] + [t for t in range(1, len(starts)) if starts[t]] + [len(starts)]
    weights = [self.lstm.weight_ih, self.lstm.weight_hh, self.lstm.bias_ih, self.lstm.bias_hh]
    h, c = state
    hiddens = []
    for begin, end in zip(bounds[:-1], bounds[1:]):
        if starts[begin]:
            h, c = torch.zeros_like(h), torch.zeros_like(c)
        # torch.lstm(input (T, B, F), (h0, c0) (1, B, H), weights, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        out, h, c = torch.lstm(features[begin:end].unsqueeze(1), (h.unsqueeze(0), c.unsqueeze(0)), weights, True, 1, 0.0, True, False, False)
        hiddens.append(out.squeeze(1))
        h, c = h.squeeze(0), c.squeeze(0)
    logits, values = self.heads(torch.cat(hiddens))
    return logits, values, (h, c)


class LSTMSequence(torch.autograd.Function):
    """The LSTM recurrence over one env's rollout with a hand-written backward.

    Input gx = x @ W_ih^T + b_ih + b_hh for all T steps (computed outside, one matmul). Forward is
    the LSTMCell step by step; backward runs the recurrence in reverse with one (1, 4H) @ W_hh
    product per step and computes W_hh's gradient in ONE (4H, T) @ (T, H) matmul, instead of T
    outer products accumulated one by one. keep[t] False zeroes the state before step t.
    """

    @staticmethod
    def forward(ctx, gx, h0, c0, w_hh, keep):
        steps, hidden = gx.shape[0], gx.shape[1] // 4
        h_prev, c_prev = gx.new_empty(steps, hidden), gx.new_empty(steps, hidden)
        gates, cells, hiddens = torch.empty_like(gx), gx.new_empty(steps, hidden), gx.new_empty(steps, hidden)
        h, c, w_t = h0, c0, w_hh.t()
        for t in range(steps):
            if not keep[t]:
                h, c = h.new_zeros(1, hidden), c.new_zeros(1, hidden)
            h_prev[t], c_prev[t] = h[0], c[0]
            pre = torch.addmm(gx[t : t + 1], h, w_t)
            g = gates[t : t + 1]  # i, f, g, o after their nonlinearities
            torch.sigmoid(pre, out=g)
            torch.tanh(pre[:, 2 * hidden : 3 * hidden], out=g[:, 2 * hidden : 3 * hidden])
            c = torch.addcmul(g[:, hidden : 2 * hidden] * c, g[:, :hidden], g[:, 2 * hidden : 3 * hidden])
            h = g[:, 3 * hidden :] * torch.tanh(c)
            cells[t], hiddens[t] = c[0], h[0]
        ctx.save_for_backward(w_hh, h_prev, c_prev, gates, cells)
        ctx.keep = keep
        return hiddens, h, c

    @staticmethod
    def backward(ctx, d_hiddens, d_h, d_c):
        w_hh, h_prev, c_prev, gates, cells = ctx.saved_tensors
        steps, hidden = gates.shape[0], gates.shape[1] // 4
        i, f, g, o = gates.split(hidden, dim=1)
        tanh_c = torch.tanh(cells)
        # Everything that does not depend on the recurrence, for all steps at once.
        dc_from_dh = o * (1 - tanh_c * tanh_c)
        d_pre_scale = torch.cat([g * i * (1 - i), c_prev * f * (1 - f), i * (1 - g * g), tanh_c * o * (1 - o)], dim=1)
        d_pre = torch.empty_like(gates)
        d_h = d_h if d_h is not None else h_prev.new_zeros(1, hidden)
        d_c = d_c if d_c is not None else h_prev.new_zeros(1, hidden)
        d_hiddens = d_hiddens if d_hiddens is not None else h_prev.new_zeros(steps, hidden)
        for t in range(steps - 1, -1, -1):
            d_h = d_h + d_hiddens[t : t + 1]
            d_c = torch.addcmul(d_c, d_h, dc_from_dh[t : t + 1])
            torch.mul(torch.cat([d_c, d_c, d_c, d_h], dim=1), d_pre_scale[t : t + 1], out=d_pre[t : t + 1])
            d_h, d_c = d_pre[t : t + 1] @ w_hh, d_c * f[t : t + 1]
            if not ctx.keep[t]:  # the state was zeroed before step t: nothing flows further back
                d_h, d_c = torch.zeros_like(d_h), torch.zeros_like(d_c)
        return d_pre, d_h, d_c, d_pre.t() @ h_prev, None


def forward_sequence_custom(self: ActorCritic, obs, state, episode_starts):
    """Alternative proposed forward_sequence, with LSTMSequence (about 50 lines more code)."""
    features = self.encode(obs)
    lstm = self.lstm
    gx = torch.addmm(lstm.bias_ih + lstm.bias_hh, features, lstm.weight_ih.t())
    keep = [not start for start in episode_starts.tolist()]
    hiddens, h, c = LSTMSequence.apply(gx, state[0], state[1], lstm.weight_hh, keep)
    logits, values = self.heads(hiddens)
    return logits, values, (h, c)


RECOMPUTES = {"loop": None, "torch.lstm": forward_sequence_torch_lstm, "custom": forward_sequence_custom}


def sample_action_gumbel(logits: torch.Tensor) -> torch.Tensor:
    """Proposed sample_action (not greedy): argmax(logits + Gumbel noise) ~ Categorical(softmax(logits))."""
    return (logits - torch.empty_like(logits).exponential_().log()).argmax(dim=-1)


def sample_action_multinomial(logits: torch.Tensor) -> torch.Tensor:
    """Current sample_action (not greedy)."""
    return torch.multinomial(F.softmax(logits, dim=-1), 1).squeeze(-1)


def sync_in_place(local: torch.nn.Module, shared: torch.nn.Module) -> None:
    """Proposed weight sync: copy the shared parameters into the local ones (the model has no buffers)."""
    with torch.no_grad():
        for mine, theirs in zip(local.parameters(), shared.parameters()):
            mine.copy_(theirs)


def clip_if_needed(parameters, max_norm: float) -> torch.Tensor:
    """Proposed clipping: same result as clip_grad_norm_, but no rescaling pass when norm <= max_norm."""
    parameters = [p for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in parameters])
    if norm > max_norm:
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return norm


def gae_floats(rewards, values, next_values, episode_ends, gamma: float, gae_lambda: float):
    """Proposed losses.gae: the same recursion on Python floats (20 steps: no tensor ops per step)."""
    r, v, nv, ends = rewards.tolist(), values.tolist(), next_values.tolist(), episode_ends.tolist()
    advantages, running = [0.0] * len(r), 0.0
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * nv[t] - v[t] + (0.0 if ends[t] else gamma * gae_lambda * running)
        advantages[t] = running
    advantages = torch.tensor(advantages, dtype=values.dtype)
    return advantages, advantages + values


class ProposedCollector(RolloutCollector):
    """RolloutCollector.collect with the two acting-path changes (marked CHANGED)."""

    def collect(self, model: ActorCritic, num_steps: int) -> Rollout:
        observations, actions, rewards = [], [], []
        terminated, truncated, truncation_values, starts, episodes = [], [], [], [], []
        initial_state = self.state
        with torch.inference_mode():
            for _ in range(num_steps):
                starts.append(self.episode_start)
                observations.append(self.obs)
                logits, _, self.state = model(torch.from_numpy(self.obs)[None], self.state)  # CHANGED
                action = int(sample_action_gumbel(logits)[0])  # CHANGED
                obs, reward, term, trunc, info = self.env.step(action)
                actions.append(action)
                rewards.append(float(reward))
                terminated.append(bool(term))
                truncated.append(bool(trunc and not term))
                truncation_values.append(0.0)
                if trunc and not term:
                    truncation_values[-1] = float(model(torch.from_numpy(obs)[None], self.state)[1])
                if "episode" in info:
                    episodes.append((float(info["episode"]["r"]), int(info["episode"]["l"])))
                self.episode_start = bool(term or trunc)
                if self.episode_start:
                    obs, _ = self.env.reset()
                    self.state = model.initial_state(1)
                self.obs = obs
            last_value = 0.0 if self.episode_start else float(model(torch.from_numpy(self.obs)[None], self.state)[1])
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


def make_proposed_worker(env_id: str, seed: int, recompute: str, timers: Timers | None = None) -> Worker:
    w = make_worker(env_id, seed, timers, adam="fused")
    w.collector = ProposedCollector(w.env, w.local, seed)
    w.local.forward_sequence = types.MethodType(RECOMPUTES[recompute], w.local)
    if timers is not None:
        time_method(w.local, "forward_sequence", timers, "recompute forward")
    return w


def proposed_update(w: Worker, cfg: Config) -> None:
    """The worker iteration with every recommended change (timed when w.timers is set)."""
    t = w.timers if w.timers is not None else Timers()
    with t.section("weight sync (in-place copy)"):
        sync_in_place(w.local, w.shared)
    with t.section("collect"):
        rollout = w.collector.collect(w.local, cfg.num_steps)
    with t.section("loss"):
        logits, values, _ = w.local.forward_sequence(rollout.obs, rollout.initial_state, rollout.episode_starts)
        detached = values.detach()
        next_values = next_state_values(detached, rollout.last_value, rollout.terminated, rollout.truncated, rollout.truncation_values)
        advantages, returns = gae_floats(rollout.rewards, detached, next_values, rollout.terminated | rollout.truncated, cfg.gamma, cfg.gae_lambda)
        terms = a3c_loss(logits, values, rollout.actions, advantages, returns, cfg.value_loss_coef, cfg.entropy_coef)
    with t.section("backward"):
        w.local.zero_grad(set_to_none=True)
        terms.total.backward()
    with t.section("clip"):
        grad_norm = float(clip_if_needed(w.local.parameters(), cfg.max_grad_norm))
        finite = bool(np.isfinite(grad_norm) and torch.isfinite(terms.total))
    if finite:
        with t.section("hand-off"):
            hand_off_gradients(w.local, w.shared)
        with t.section("optimizer.step"):
            w.optimizer.step()
    with t.section("stats"):
        stats(terms, grad_norm, cfg.num_steps)


# =============================================================================== report helpers
def breakdown(timers: Timers, steps: int) -> list[tuple[str, float, float]]:
    """(label, cpu us/step, wall us/step), with nested sections turned into exclusive parts."""
    cpu, wall = dict(timers.cpu), dict(timers.wall)
    for d in (cpu, wall):
        inner = d.get("emulator step", 0) + d.get("acting forward", 0) + d.get("forward (autograd)", 0)
        d["acting: sampling, tensors, bookkeeping"] = d.pop("collect") - inner
        if "recompute forward" in d:
            d["GAE + loss"] = d.pop("loss") - d["recompute forward"]
        elif "forward (autograd)" in d:
            d["GAE + loss"] = d.pop("loss")
    order = [
        "emulator step", "acting forward", "forward (autograd)", "acting: sampling, tensors, bookkeeping",
        "recompute forward", "GAE + loss", "backward", "clip", "hand-off", "optimizer.step",
        "weight sync (load_state_dict)", "weight sync (in-place copy)", "stats",
    ]  # fmt: skip
    return [(label, cpu[label] / steps / 1e3, wall[label] / steps / 1e3) for label in order if label in cpu]


def print_breakdown(title: str, rows, uninstrumented: tuple[float, float] | None = None) -> None:
    total_cpu, total_wall = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"\n{title}")
    print(f"  {'part':42s} {'CPU us/step':>12} {'%':>6} {'wall us/step':>13} {'%':>6}")
    for label, cpu, wall in rows:
        print(f"  {label:42s} {cpu:12.1f} {100 * cpu / total_cpu:6.1f} {wall:13.1f} {100 * wall / total_wall:6.1f}")
    print(f"  {'total (instrumented)':42s} {total_cpu:12.1f} {100.0:6.1f} {total_wall:13.1f} {100.0:6.1f}")
    if uninstrumented:
        print(f"  {'total, same loop without instrumentation':42s} {uninstrumented[0]:12.1f} {'':6s} {uninstrumented[1]:13.1f}")


def network_cpu(rows) -> float:
    parts = ("acting forward", "forward (autograd)", "recompute forward", "GAE + loss", "backward")
    return sum(cpu for label, cpu, _ in rows if label in parts)


def max_rel_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max() / (y.abs().max() + 1e-12)) for x, y in zip(a, b))


# =============================================================================== sections
def run_loops(args, cfg: Config) -> dict:
    """Sections 1, 2 and 4: the whole loop in each variant, interleaved in blocks of rollouts."""
    t_current, t_classic, t_proposed = Timers(), Timers(), Timers()
    variants = {
        "current": (make_worker(args.env_id, args.seed), current_update),
        "current (timed)": (make_worker(args.env_id, args.seed, t_current), current_update_timed),
        "classic (timed)": (make_worker(args.env_id, args.seed, t_classic, forward_label="forward (autograd)"), classic_update_timed),
        "proposed": (make_proposed_worker(args.env_id, args.seed, args.recompute), proposed_update),
        "proposed (timed)": (make_proposed_worker(args.env_id, args.seed, args.recompute, t_proposed), proposed_update),
    }
    for worker, update in variants.values():  # warm-up: lazy imports, first optimizer step, allocator
        for _ in range(args.warmup):
            update(worker, cfg)
    for timers in (t_current, t_classic, t_proposed):
        timers.reset()
    per_block = {name: [] for name in variants}
    blocks = max(1, args.rollouts // args.block)
    for b in range(blocks):
        for name, (worker, update) in variants.items():
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(args.block):
                update(worker, cfg)
            steps = args.block * cfg.num_steps
            per_block[name].append(((time.thread_time_ns() - cpu) / steps / 1e3, (time.perf_counter_ns() - wall) / steps / 1e3))
        print(f"  block {b + 1}/{blocks} done", file=sys.stderr, flush=True)
    steps = blocks * args.block * cfg.num_steps
    totals = {name: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for name, v in per_block.items()}
    return {
        "steps_per_variant": steps,
        "median_block_us_per_step": {name: {"cpu": c, "wall": w} for name, (c, w) in totals.items()},
        "breakdown": {name: breakdown(t, steps) for name, t in (("current", t_current), ("classic", t_classic), ("proposed", t_proposed))},
    }


def real_rollout(args, cfg: Config):
    """A worker and a real 20-step rollout from the middle of a game, for the micro-benchmarks."""
    w = make_worker(args.env_id, args.seed + 7)
    for _ in range(30):
        current_update(w, cfg)
    w.local.load_state_dict(w.shared.state_dict())
    return w, w.collector.collect(w.local, cfg.num_steps)


def check_recompute(model: ActorCritic, rollout: Rollout, cfg: Config) -> dict:
    """Loss and gradients of each float32 recompute (the current loop included) against the
    current loop run in float64, on several episode-start patterns. The weights are changed in
    place before each pattern, as the worker's weight sync does, so a kernel that cached the old
    weights would show up as a difference. Returns the worst relative gradient error per recompute."""

    def loss_and_grads(net, fn, dtype, probe):
        net.forward_sequence = types.MethodType(fn or ActorCritic.forward_sequence, net)
        net.zero_grad(set_to_none=True)
        terms = rollout_loss(net, probe, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
        terms.total.backward()
        del net.forward_sequence
        return terms.total.item(), [p.grad.to(torch.float64) for p in net.parameters()]

    results = {name: {"max_rel_grad_err": 0.0, "max_abs_loss_err": 0.0} for name in RECOMPUTES}
    for pattern in ([], [0], [5, 13], [19]):
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn_like(param) * 0.01)
        reference = ActorCritic(model.obs_shape, model.policy.out_features, model.hidden_size).double()
        reference.load_state_dict(model.state_dict())
        reference.encode = lambda obs: reference.encoder((obs.double() / 255.0).unsqueeze(1))  # encode() casts to float32
        starts = torch.zeros(cfg.num_steps, dtype=torch.bool)
        starts[pattern] = True
        state = (rollout.initial_state[0] + 0.1, rollout.initial_state[1] - 0.1)  # a non-zero start state
        probe = Rollout(**{**rollout.__dict__, "episode_starts": starts, "initial_state": state})
        as_double = {key: getattr(probe, key).double() for key in ("rewards", "truncation_values", "last_value")}
        probe64 = Rollout(**{**probe.__dict__, **as_double, "initial_state": (state[0].double(), state[1].double())})
        ref_loss, ref_grads = loss_and_grads(reference, None, torch.float64, probe64)
        for name, fn in RECOMPUTES.items():
            loss, grads = loss_and_grads(model, fn, torch.float32, probe)
            entry = results[name]
            entry["max_rel_grad_err"] = max(entry["max_rel_grad_err"], max_rel_diff(grads, ref_grads))
            entry["max_abs_loss_err"] = max(entry["max_abs_loss_err"], abs(loss - ref_loss))
    return results


def check_adam(env_obs_shape, num_actions, channels_last_grads: bool = False) -> dict:
    """foreach/fused SharedAdam vs the current per-tensor loop: same parameters after 5 steps, state
    still shared. channels_last_grads: hand 4-D grads over in channels_last layout (as a
    channels_last local model would) to contiguous shared parameters."""
    torch.manual_seed(0)
    grads = [[torch.randn_like(p) for p in ActorCritic(env_obs_shape, num_actions).parameters()] for _ in range(5)]
    out, base = {}, None
    for kind in ("loop", "foreach", "fused"):
        torch.manual_seed(1)
        model = ActorCritic(env_obs_shape, num_actions)
        model.share_memory()
        opt = SharedAdam(model.parameters(), lr=1e-3)
        for group in opt.param_groups:
            group["foreach"], group["fused"] = kind == "foreach", kind == "fused"
        for step_grads in grads:
            for p, g in zip(model.parameters(), step_grads):
                p.grad = g.contiguous(memory_format=torch.channels_last) if channels_last_grads and g.dim() == 4 else g.clone()
            opt.step()
        params = [p.detach().clone() for p in model.parameters()]
        base = base or params
        shared = all(v.is_shared() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
        out[kind] = {"max_rel_param_diff_vs_loop": max_rel_diff(params, base), "state_still_shared": shared, "step": float(next(iter(opt.state.values()))["step"])}
    return out


def check_gumbel(num_actions: int) -> float:
    """Largest difference between Gumbel-max sample frequencies and softmax probabilities."""
    torch.manual_seed(0)
    logits = torch.randn(1, num_actions)
    counts = torch.bincount(torch.cat([sample_action_gumbel(logits) for _ in range(20000)]), minlength=num_actions)
    return float((counts / 20000 - F.softmax(logits, -1)[0]).abs().max())


def run_ideas(args, cfg: Config) -> dict:
    """Section 3: each idea against the current code, in isolation (median CPU us per call)."""
    w, rollout = real_rollout(args, cfg)
    model, shared, T = w.local, w.shared, cfg.num_steps
    reps, ideas = args.micro_repeats, []

    def record(name, unit_divisor, results, recommended, note=""):
        """results: label -> us per call, the current code first; unit_divisor: calls -> per agent step."""
        rows = [(label, us / unit_divisor) for label, us in results.items()]
        ideas.append({"idea": name, "rows": rows, "recommended": recommended, "note": note})

    # Recompute: forward_sequence + GAE + loss + backward, per agent step.
    def fwd_bwd(fn):
        def run():
            model.forward_sequence = types.MethodType(fn or ActorCritic.forward_sequence, model)
            model.zero_grad(set_to_none=True)
            rollout_loss(model, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef).total.backward()
            del model.forward_sequence

        return run

    res = interleaved({f"forward_sequence {k}": fwd_bwd(fn) for k, fn in RECOMPUTES.items()}, reps, 5)
    check = check_recompute(model, rollout, cfg)
    record("recompute (forward_sequence + loss + backward)", T, res, args.recompute,
           "errors vs the current loop in float64: " + "; ".join(f"{k}: grads {v['max_rel_grad_err']:.1e} (rel), loss {v['max_abs_loss_err']:.1e}" for k, v in check.items()))  # fmt: skip

    # Only the recompute forward (no backward), for the breakdown's "recompute forward" line.
    def fwd_only(fn):
        def run():
            fn(model, rollout.obs, rollout.initial_state, rollout.episode_starts)

        return run

    res = interleaved({f"forward only, {k}": fwd_only(fn or ActorCritic.forward_sequence) for k, fn in RECOMPUTES.items()}, reps, 5)
    record("recompute forward only (with autograd graph)", T, res, args.recompute)

    # Weight sync, per rollout.
    res = interleaved({"load_state_dict(shared.state_dict())": lambda: model.load_state_dict(shared.state_dict()),
                       "in-place param.copy_ loop": lambda: sync_in_place(model, shared)}, reps, 10)  # fmt: skip
    record("weight sync", T, res, "in-place param.copy_ loop", "the model has no buffers; both give identical weights")

    # optimizer.step on the shared model, per rollout.
    for p in shared.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    opts = {}
    for kind in ("loop", "foreach", "fused"):
        opt = SharedAdam(shared.parameters(), lr=1e-9)  # tiny lr: the weights barely move
        for group in opt.param_groups:
            group["foreach"], group["fused"] = kind == "foreach", kind == "fused"
        opts[kind] = opt
    res = interleaved({f"SharedAdam {k}": opt.step for k, opt in opts.items()}, reps, 10)
    check = check_adam(shared.obs_shape, shared.policy.out_features)
    record("optimizer.step (Adam)", T, res, "SharedAdam fused",
           "; ".join(f"{k}: params max rel diff vs loop {v['max_rel_param_diff_vs_loop']:.1e}, state shared {v['state_still_shared']}" for k, v in check.items()))  # fmt: skip

    # Clipping, per rollout (with the rollout's real gradients).
    model.zero_grad(set_to_none=True)
    rollout_loss(model, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef).total.backward()
    norm_now = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
    res = interleaved({"clip_grad_norm_": lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm),
                       "norm, rescale only if > max": lambda: clip_if_needed(model.parameters(), cfg.max_grad_norm)}, reps, 10)  # fmt: skip
    record("gradient clipping", T, res, "norm, rescale only if > max", f"this rollout's grad norm {norm_now:.2f} vs max {cfg.max_grad_norm}; same result either way")

    # Acting path, per step, each call right after a real env step (see in_acting_loop).
    env = w.env
    res = in_acting_loop({"softmax + multinomial": lambda logits: int(sample_action_multinomial(logits)[0]),
                          "Gumbel-max": lambda logits: int(sample_action_gumbel(logits)[0])}, env, model, reps, 40, after="forward")  # fmt: skip
    record("action sampling (after env step + forward)", 1, res, "Gumbel-max", f"max |frequency - softmax prob| over 20000 samples: {check_gumbel(shared.policy.out_features):.4f}")
    res = in_acting_loop({"torch.as_tensor(obs).unsqueeze(0)": lambda obs, state: torch.as_tensor(obs).unsqueeze(0),
                          "torch.from_numpy(obs)[None]": lambda obs, state: torch.from_numpy(obs)[None]}, env, model, reps, 40, after="step")  # fmt: skip
    record("obs to tensor (after env step)", 1, res, "torch.from_numpy(obs)[None]")

    # channels_last convolution weights: acting forward and recompute, with EVERY model in that format.
    channels_last = ActorCritic(model.obs_shape, model.policy.out_features).to(memory_format=torch.channels_last)
    channels_last.load_state_dict(model.state_dict())
    res = in_acting_loop({"acting forward, NCHW conv weights": lambda obs, state: model(torch.from_numpy(obs)[None], state),
                          "acting forward, channels_last conv weights": lambda obs, state: channels_last(torch.from_numpy(obs)[None], state)}, env, model, reps, 40, after="step")  # fmt: skip
    trap = check_adam(shared.obs_shape, shared.policy.out_features, channels_last_grads=True)["fused"]["max_rel_param_diff_vs_loop"]
    record("acting forward, conv weight memory format (after env step)", 1, res, "-",
           "optional; only with ActorCritic itself in channels_last (shared, local, evaluator alike): a channels_last local model "
           f"handing grads to a contiguous shared model makes fused Adam wrong (max rel param diff {trap:.1e} in check_adam)")  # fmt: skip

    def fwd_bwd_on(net):
        def run():
            net.zero_grad(set_to_none=True)
            net.forward_sequence = types.MethodType(forward_sequence_torch_lstm, net)
            rollout_loss(net, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef).total.backward()
            del net.forward_sequence

        return run

    res = interleaved({"recompute torch.lstm, NCHW": fwd_bwd_on(model), "recompute torch.lstm, channels_last": fwd_bwd_on(channels_last)}, reps, 5)
    record("recompute + backward, conv weight memory format", T, res, "-")

    # GAE, per rollout.
    values = torch.randn(T)
    next_values = next_state_values(values, rollout.last_value, rollout.terminated, rollout.truncated, rollout.truncation_values)
    ends = rollout.terminated | rollout.truncated
    a_tensor, _ = gae(rollout.rewards, values, next_values, ends, cfg.gamma, cfg.gae_lambda)
    a_float, _ = gae_floats(rollout.rewards, values, next_values, ends, cfg.gamma, cfg.gae_lambda)
    res = interleaved({"losses.gae (tensor ops per step)": lambda: gae(rollout.rewards, values, next_values, ends, cfg.gamma, cfg.gae_lambda),
                       "gae on Python floats": lambda: gae_floats(rollout.rewards, values, next_values, ends, cfg.gamma, cfg.gae_lambda)}, reps, 20)  # fmt: skip
    record("GAE", T, res, "gae on Python floats", f"max abs diff {float((a_tensor - a_float).abs().max()):.1e}")

    # Building the Rollout's tensors, per rollout (for scale; nothing proposed).
    frames = [o.numpy() for o in rollout.obs]
    res = interleaved({"np.stack + as_tensor of 20 frames": lambda: torch.as_tensor(np.stack(frames)),
                       "the 6 small tensors of a Rollout": lambda: [torch.tensor([0.0] * T), torch.tensor([1] * T, dtype=torch.int64), torch.tensor([False] * T),
                                                                  torch.tensor([False] * T), torch.tensor([False] * T), torch.tensor([0.0] * T)]}, reps, 50)  # fmt: skip
    record("building the Rollout (nothing proposed)", T, res, "-")
    return {"ideas": ideas}


def print_ideas(ideas: list[dict]) -> None:
    print("\n3. Ideas, each in isolation (median thread-CPU us per agent step; interleaved repetitions)")
    for idea in ideas:
        rows = idea["rows"]
        before = rows[0][1]
        print(f"  {idea['idea']}" + (f"   [recommended: {idea['recommended']}]" if idea["recommended"] != "-" else ""))
        for label, us in rows:
            delta = "" if label == rows[0][0] else f"  ({us - before:+.1f} us/step, x{before / us:.2f})"
            print(f"    {label:48s} {us:9.2f}{delta}")
        if idea["note"]:
            print(f"    check: {idea['note']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--num-steps", type=int, default=20, help="rollout length")
    parser.add_argument("--rollouts", type=int, default=150, help="measured rollouts per variant of the whole loop")
    parser.add_argument("--block", type=int, default=10, help="rollouts per interleaved block")
    parser.add_argument("--warmup", type=int, default=5, help="rollouts per variant before timing")
    parser.add_argument("--micro-repeats", type=int, default=9, help="interleaved repetitions of each micro-benchmark")
    parser.add_argument("--recompute", choices=("torch.lstm", "custom"), default="torch.lstm", help="the recompute used by the proposed loop")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    cfg = Config(env_id=args.env_id, num_steps=args.num_steps)

    print(f"{args.env_id}, rollouts of {cfg.num_steps} steps, torch {torch.__version__}, {torch.get_num_threads()} thread, load average {os.getloadavg()}", flush=True)
    print("ideas in isolation ...", file=sys.stderr, flush=True)
    ideas = run_ideas(args, cfg)
    print(f"whole loops: 5 variants x {args.rollouts} rollouts, interleaved ...", file=sys.stderr, flush=True)
    loops = run_loops(args, cfg)
    totals = loops["median_block_us_per_step"]
    rows = loops["breakdown"]

    print_breakdown("1. Current worker loop, per agent step (a3c_torch.worker code, parts timed separately)", rows["current"], (totals["current"]["cpu"], totals["current"]["wall"]))

    classic, current = rows["classic"], rows["current"]
    net_classic, net_current = network_cpu(classic), network_cpu(current)
    print_breakdown("2a. Classic pattern (forward with autograd while acting, one backward per rollout)", classic)
    print("\n2b. One-pass recompute (current) vs classic, CPU us per agent step")
    print(f"  network time (forward(s) + GAE/loss + backward): classic {net_classic:.0f}, one-pass {net_current:.0f}, classic/one-pass = {net_classic / net_current:.2f}")
    tot_classic, tot_current = sum(r[1] for r in classic), sum(r[1] for r in current)
    print(f"  whole loop (with emulator, update, sync):        classic {tot_classic:.0f}, one-pass {tot_current:.0f}, classic/one-pass = {tot_classic / tot_current:.2f}")
    net_proposed = network_cpu(rows["proposed"])
    print(f"  with the proposed recompute ({args.recompute}), network time {net_proposed:.0f}: classic/one-pass = {net_classic / net_proposed:.2f}")

    print_ideas(ideas["ideas"])

    print_breakdown(f"4a. Proposed loop (recompute={args.recompute}, fused Adam, in-place sync, clip only if needed, Gumbel sampling, from_numpy, float GAE)", rows["proposed"], (totals["proposed"]["cpu"], totals["proposed"]["wall"]))
    cur, prop = totals["current"], totals["proposed"]
    print("\n4b. Whole loop, uninstrumented, median over interleaved blocks (us per agent step)")
    print(f"  {'':10s} {'CPU':>8} {'wall':>8} {'steps per CPU-s':>16}")
    for name, value in (("current", cur), ("proposed", prop)):
        print(f"  {name:10s} {value['cpu']:8.0f} {value['wall']:8.0f} {1e6 / value['cpu']:16.0f}")
    print(f"  speed-up (CPU): x{cur['cpu'] / prop['cpu']:.2f}   (wall: x{cur['wall'] / prop['wall']:.2f}; wall includes waiting for a core on a shared machine)")
    emulator = next(cpu for label, cpu, _ in current if label == "emulator step")
    print(f"  emulator alone costs {emulator:.0f} us/step here: the current loop reaches {emulator / cur['cpu']:.2f} of the emulator's speed, the proposed {emulator / prop['cpu']:.2f}")

    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "ideas": ideas["ideas"], **loops}, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
