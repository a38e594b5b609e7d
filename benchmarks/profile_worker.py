"""Where one A3C worker's time goes, per agent step.

One process, no multiprocessing: a shared model with its shared optimizer, a local model and a
RolloutCollector on the training env stack, built as a worker builds them. Times are per agent
step, on this thread's CPU clock (`time.thread_time_ns`, so waiting for a core on a shared machine
is not counted; wall clock is printed next to it), with one torch thread, as in a worker.

1. The worker loop (a3c_torch.worker's code, each part timed): emulator, acting forward, the rest
   of acting, recompute forward, GAE + loss, backward, clip, hand-off, optimizer step, weight
   sync, stats; the instrumented total is checked against the same loop without instrumentation.
2. The one-pass recompute (the worker) against the classic pattern (forward with autograd while
   acting, one backward per rollout), as ratios.

The worker's speed-ups (fused LSTM recompute, fused SharedAdam, in-place weight sync, clip only
when needed, Gumbel-max sampling, GAE on floats) were prototyped and measured against the code of
the time by this script as it was at commit 055d83e; run it in a checkout of that commit
(`git worktree add /tmp/a3c-055d83e 055d83e`) for those before/after figures.

    .venv/bin/python -m benchmarks.profile_worker [--rollouts 60] [--env-id ALE/Breakout-v5] [--env-stack lean|gymnasium] [--json FILE]
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from a3c_torch.config import Config, default_envs_per_process  # noqa: E402
from a3c_torch.envs import EnvSettings, make_env  # noqa: E402
from a3c_torch.model import TRUNKS, ActorCritic  # noqa: E402
from a3c_torch.optim import hand_off_gradients, make_optimizer  # noqa: E402
from a3c_torch.worker import RolloutCollector, apply_update, clip_gradients, copy_weights, env_seed, rollout_loss, seed_everything  # noqa: E402
from benchmarks.classic_pattern import ClassicWorker  # noqa: E402

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


def time_acting(collector: RolloutCollector, timers: Timers, label: str) -> None:
    """Every call of the collector's acting forward (ActingForward, packing included) as `label`."""
    inner = collector.acting_forward

    def timed_acting(model):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        forward = inner(model)  # the weights packed for this rollout
        timers.add(label, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)

        def timed(*args):
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            result = forward(*args)
            timers.add(label, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)
            return result

        return timed

    collector.acting_forward = timed_acting


# =============================================================================== the worker
@dataclass
class Worker:
    envs: list[gym.Env]
    shared: ActorCritic
    optimizer: torch.optim.Optimizer
    local: ActorCritic
    collector: RolloutCollector
    timers: Timers | None


def make_worker(cfg: Config, seed: int, timers: Timers | None = None, forward_label: str = "acting forward", lean: bool = True) -> Worker:
    """What a3c_torch.worker._work and the trainer build, in one process; `timers` instruments it
    (env step and reset, every `local(...)` call as `forward_label`, local.forward_sequence).
    `lean` picks the Atari env stack: the lean one the workers play, or the gymnasium one."""
    seed_everything(seed)
    envs = [make_env(EnvSettings.from_config(cfg), seed=env_seed(seed, k), train=True, lean=lean) for k in range(cfg.envs_per_process)]
    if timers is not None:  # env.step and env.reset: the whole training env stack
        for env in envs:
            time_method(env, "step", timers, "emulator step")
            time_method(env, "reset", timers, "emulator step")
    shared = ActorCritic(envs[0].observation_space.shape, int(envs[0].action_space.n), cfg.hidden_size, cfg.model)
    shared.share_memory()
    optimizer = make_optimizer(cfg.optimizer, shared.parameters(), cfg.learning_rate)
    local = ActorCritic.like(shared)
    collector = RolloutCollector(envs, local, seed)
    if timers is not None:
        if forward_label == "acting forward":  # the worker acts through the collector's ActingForward
            time_acting(collector, timers, forward_label)
        else:
            time_model_calls(local, timers, forward_label)
        time_method(local, "forward_sequence", timers, "recompute forward")
    return Worker(envs, shared, optimizer, local, collector, timers)


def make_classic(cfg: Config, seed: int, timers: Timers, lean: bool = True) -> ClassicWorker:
    """The classic pattern with one env and the same trunk, its env and forward calls timed."""
    w = make_worker(dataclasses.replace(cfg, envs_per_process=1), seed, timers, forward_label="forward (autograd)", lean=lean)
    classic = ClassicWorker(w.envs[0], w.local, w.shared, w.optimizer, seed)
    classic.timers = timers
    return classic


def stats(terms, grad_norm: float, steps: int) -> tuple:
    """What the worker does with the loss terms after each update (.item() syncs, averaging)."""
    return (terms.policy_loss.item() / steps, terms.value_loss.item() / steps, terms.entropy.item() / steps, grad_norm)


def worker_update(w: Worker, cfg: Config) -> None:
    """One iteration of a3c_torch.worker._work, unchanged and uninstrumented."""
    copy_weights(w.shared, w.local)
    rollout = w.collector.collect(w.local, cfg.num_steps)
    terms = rollout_loss(w.local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
    _, grad_norm = apply_update(w.local, w.shared, w.optimizer, terms.total, cfg.max_grad_norm)
    stats(terms, grad_norm, rollout.num_steps)


def clip(w: Worker, max_grad_norm: float) -> float:
    """apply_update's clipping: the total norm, and a rescale only when it is above the limit."""
    return clip_gradients(w.local, max_grad_norm)


def worker_update_timed(w: Worker, cfg: Config) -> None:
    """The same iteration with each part timed (apply_update's body inlined to split it)."""
    t = w.timers
    with t.section("weight sync"):
        copy_weights(w.shared, w.local)
    with t.section("collect"):
        rollout = w.collector.collect(w.local, cfg.num_steps)
    with t.section("loss"):
        terms = rollout_loss(w.local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
    with t.section("backward"):
        w.local.zero_grad(set_to_none=True)
        terms.total.backward()
    with t.section("clip"):
        grad_norm = clip(w, cfg.max_grad_norm)
        finite = bool(np.isfinite(grad_norm) and torch.isfinite(terms.total))
    if finite:
        with t.section("hand-off"):
            hand_off_gradients(w.local, w.shared)
        with t.section("optimizer.step"):
            w.optimizer.step()
    with t.section("stats"):
        stats(terms, grad_norm, rollout.num_steps)


# =============================================================================== classic pattern
def classic_update_timed(w: ClassicWorker, cfg: Config) -> None:
    """benchmarks/classic_pattern.py's iteration, its parts timed."""
    w.update(cfg, w.timers)


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
        "weight sync", "stats",
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


# =============================================================================== the run
def run_loops(args, cfg: Config) -> dict:
    """The whole loop in each variant, interleaved in blocks of rollouts."""
    t_worker, t_classic = Timers(), Timers()
    lean = args.env_stack == "lean"
    variants = {
        "worker": (make_worker(cfg, args.seed, lean=lean), worker_update),
        "worker (timed)": (make_worker(cfg, args.seed, t_worker, lean=lean), worker_update_timed),
        "classic (timed)": (make_classic(cfg, args.seed, t_classic, lean=lean), classic_update_timed),
    }
    for worker, update in variants.values():  # warm-up: lazy imports, first optimizer step, allocator
        for _ in range(args.warmup):
            update(worker, cfg)
    for timers in (t_worker, t_classic):
        timers.reset()
    per_block = {name: [] for name in variants}
    blocks = max(1, args.rollouts // args.block)
    for b in range(blocks):
        for name, (worker, update) in variants.items():
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(args.block):
                update(worker, cfg)
            steps = args.block * cfg.num_steps * (1 if name.startswith("classic") else cfg.envs_per_process)
            per_block[name].append(((time.thread_time_ns() - cpu) / steps / 1e3, (time.perf_counter_ns() - wall) / steps / 1e3))
        print(f"  block {b + 1}/{blocks} done", file=sys.stderr, flush=True)
    steps = blocks * args.block * cfg.num_steps
    totals = {name: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for name, v in per_block.items()}
    return {
        "steps_per_variant": steps,
        "median_block_us_per_step": {name: {"cpu": c, "wall": w} for name, (c, w) in totals.items()},
        "breakdown": {"worker": breakdown(t_worker, steps * cfg.envs_per_process), "classic": breakdown(t_classic, steps)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--env-id", default="ALE/Pong-v5")
    parser.add_argument("--num-steps", type=int, default=20, help="rollout length")
    parser.add_argument("--model", choices=TRUNKS, default=Config.model, help="conv trunk (train.py's --model)")
    parser.add_argument("--envs-per-process", type=int, default=default_envs_per_process(1),
                        help="envs of the worker (the classic pattern always plays one); default: train.py's with 1 worker (with N workers it takes fewer: config.default_envs_per_process)")
    parser.add_argument("--rollouts", type=int, default=150, help="measured rollouts per variant of the whole loop")
    parser.add_argument("--block", type=int, default=10, help="rollouts per interleaved block")
    parser.add_argument("--warmup", type=int, default=5, help="rollouts per variant before timing")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--env-stack", choices=("lean", "gymnasium"), default="lean", help="Atari env stack: the lean one (what the workers play) or the gymnasium one (its reference)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    cfg = Config(env_id=args.env_id, num_steps=args.num_steps, model=args.model, envs_per_process=args.envs_per_process)

    print(f"{args.env_id} ({args.env_stack} env stack), model {cfg.model}, {cfg.envs_per_process} envs per worker, rollouts of {cfg.num_steps} steps, torch {torch.__version__}, {torch.get_num_threads()} thread, load average {os.getloadavg()}", flush=True)
    print(f"whole loops: 3 variants x {args.rollouts} rollouts, interleaved ...", file=sys.stderr, flush=True)
    loops = run_loops(args, cfg)
    totals, rows = loops["median_block_us_per_step"], loops["breakdown"]
    worker, classic = rows["worker"], rows["classic"]

    print_breakdown("1. Worker loop, per agent step (a3c_torch.worker code, parts timed separately)", worker, (totals["worker"]["cpu"], totals["worker"]["wall"]))
    emulator = next(cpu for label, cpu, _ in worker if label == "emulator step")
    print(f"  the emulator alone is {emulator:.0f} us/step: the worker loop runs at {emulator / totals['worker']['cpu']:.2f} of the emulator's speed")

    print_breakdown("2a. Classic pattern (forward with autograd while acting, one backward per rollout)", classic)
    net_classic, net_worker = network_cpu(classic), network_cpu(worker)
    tot_classic, tot_worker = sum(r[1] for r in classic), sum(r[1] for r in worker)
    print("\n2b. One-pass recompute (the worker) vs classic, CPU us per agent step")
    print(f"  network time (forward(s) + GAE/loss + backward): classic {net_classic:.0f}, one-pass {net_worker:.0f}, classic/one-pass = {net_classic / net_worker:.2f}")
    print(f"  whole loop (with emulator, update, sync):        classic {tot_classic:.0f}, one-pass {tot_worker:.0f}, classic/one-pass = {tot_classic / tot_worker:.2f}")

    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), **loops}, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
