"""Where a worker's network time goes: t_net split into the worker's phases, per agent step.

t_net (benchmarks/limit.py) is one number; this splits it into what a worker does around its
network, in the order a3c_torch.worker does it, each phase timed around the project's own function:

copy      `copy_weights`: the shared weights into the local model, once per rollout
act       the acting forward of the K envs under `inference_mode` (`ActingForward`, its weights
          packed once per rollout) with `sample_action`, one per step, and the last-value forward
          once per rollout (as `RolloutCollector.collect` does)
loss      `rollout_loss`: the one-pass recompute with autograd, GAE, the loss
backward  `zero_grad` and `loss.backward()`
clip      `clip_gradients` (the total norm; a rescale only above --max-grad-norm)
hand-off  `hand_off_gradients`: this rollout's gradients to the shared parameters
step      the shared optimizer's `step()` (SharedAdam, fused)

These are `apply_update`'s calls in its order (tests/test_network_breakdown.py holds the timed
phases' update equal to `apply_update`'s, bit for bit). No envs: the rollout holds real frames of
K Pong games (the bare ALE of benchmarks/limit.py, random actions) and no episode ends, so the
recompute is one fused LSTM pass, as in most of a Pong rollout. Every K is measured in this one
process with one thread (OMP_NUM_THREADS=1, torch.set_num_threads(1)), after a warm-up, in
interleaved blocks so that a shared machine's drift hits every K alike. Figures are microseconds
per agent step (a phase that runs once per rollout is divided by its T x K steps) of the thread's
CPU time (--clock wall: wall-clock time); the CPU share (CPU time / wall time) says how much of a
core the process got: under 0.9 other load shared the core and its caches, the figures are
inflated, and only their shares and ratios compare.

    python -m benchmarks.network_breakdown [--envs 1 4 8] [--acting packed eager] [--seconds 10] [--clock cpu|wall] [--json FILE]
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from a3c_torch.acting import ActingForward  # noqa: E402
from a3c_torch.config import MODELS, Config, HelpFormatter  # noqa: E402
from a3c_torch.model import ActorCritic, sample_action  # noqa: E402
from a3c_torch.optim import hand_off_gradients, make_optimizer  # noqa: E402
from a3c_torch.worker import Rollout, apply_update, clip_gradients, copy_weights, rollout_loss  # noqa: E402

PROG = "network_breakdown"
PHASES = ("copy", "act", "loss", "backward", "clip", "hand-off", "step")
NETWORK = ("act", "loss", "backward")  # the network's own arithmetic; the rest is bookkeeping around it
BLOCK_S = 0.5  # one interleaved block of each K


class PhaseTimes:
    """Accumulated wall and thread-CPU nanoseconds per phase, and the agent steps they cover."""

    def __init__(self):
        self.wall = dict.fromkeys(PHASES, 0)
        self.cpu = dict.fromkeys(PHASES, 0)
        self.steps = 0
        self.rollouts = 0
        self._phase = None

    def start(self, phase: str) -> None:
        """End the running phase (if any) and start `phase`."""
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        if self._phase is not None:
            self.wall[self._phase] += wall - self._wall
            self.cpu[self._phase] += cpu - self._cpu
        self._phase, self._wall, self._cpu = phase, wall, cpu

    def stop(self) -> None:
        self.start(None)

    def us_per_step(self, clock: str = "cpu") -> dict[str, float]:
        ns = self.cpu if clock == "cpu" else self.wall
        return {phase: ns[phase] / 1e3 / self.steps for phase in PHASES}

    def cpu_share(self) -> float:
        return sum(self.cpu.values()) / max(1, sum(self.wall.values()))


class NetworkPhases:
    """A worker's network and update for K envs, without the envs: the project's functions on the
    real ActorCritic, a shared model and its shared optimizer. `frames` is (T, K, S, S) uint8."""

    def __init__(self, cfg: Config, num_actions: int, frames: np.ndarray, seed: int = 0, packed: bool = True):
        torch.manual_seed(seed)
        self.cfg = cfg
        self.shared = ActorCritic((cfg.screen_size, cfg.screen_size), num_actions, cfg.hidden_size, cfg.model)
        self.shared.share_memory()
        self.optimizer = make_optimizer(cfg.optimizer, self.shared.parameters(), cfg.learning_rate, cfg.adam_beta1)
        self.local = ActorCritic.like(self.shared)
        self.acting = ActingForward(self.local, frames.shape[1], enabled=packed)
        self.frames = torch.from_numpy(frames)
        self.state = self.local.initial_state(frames.shape[1])

    def act(self) -> Rollout:
        """The rollout's acting forwards (with the sampled actions and the last value), as a Rollout."""
        forward, frames = self.acting, self.frames
        T, K = frames.shape[:2]
        actions = torch.empty((T, K), dtype=torch.int64)
        initial_state = state = self.state
        forward.refresh()  # as RolloutCollector.collect does after the weights are copied in
        with torch.inference_mode():
            for t in range(T):
                logits, _, state = forward(frames[t], state)
                actions[t] = sample_action(logits)
            last_value = forward(frames[-1], state)[1]
        self.state = state
        no = torch.zeros((T, K), dtype=torch.bool)
        return Rollout(
            obs=frames, actions=actions, rewards=torch.linspace(-1, 1, T * K).view(T, K), terminated=no, truncated=no,
            truncation_values=torch.zeros((T, K)), episode_starts=no,
            initial_state=(initial_state[0].clone(), initial_state[1].clone()), last_value=last_value.clone(),
        )  # fmt: skip

    def rollout(self, times: PhaseTimes | None = None) -> tuple[bool, float]:
        """One rollout's network work and update: with `times`, phase by phase (timed); without,
        through `apply_update` itself. Returns apply_update's (applied, grad norm)."""
        cfg, local = self.cfg, self.local
        if times is None:
            copy_weights(self.shared, local)
            rollout = self.act()
            terms = rollout_loss(local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
            return apply_update(local, self.shared, self.optimizer, terms.total, cfg.max_grad_norm)
        times.start("copy")
        copy_weights(self.shared, local)
        times.start("act")
        rollout = self.act()
        times.start("loss")
        terms = rollout_loss(local, rollout, cfg.gamma, cfg.gae_lambda, cfg.value_loss_coef, cfg.entropy_coef)
        times.start("backward")
        local.zero_grad(set_to_none=True)
        terms.total.backward()
        times.start("clip")
        grad_norm = clip_gradients(local, cfg.max_grad_norm)
        applied = bool(np.isfinite(grad_norm) and torch.isfinite(terms.total))
        if applied:
            times.start("hand-off")
            hand_off_gradients(local, self.shared)
            times.start("step")
            self.optimizer.step()
        times.stop()
        times.steps += rollout.num_steps
        times.rollouts += 1
        return applied, grad_norm


def game_frames(env_id: str, envs: int, cfg: Config, seed: int) -> tuple[np.ndarray, int]:
    """A rollout's worth of real frames of `envs` games (random actions), and the action count."""
    from benchmarks.limit import BareAle

    ale = BareAle(env_id, envs, cfg.screen_size, cfg.repeat_action_probability, cfg.full_action_space, np.random.default_rng(seed))
    frames = np.empty((cfg.num_steps, envs, cfg.screen_size, cfg.screen_size), np.uint8)
    for _ in range(50):  # past the first, blank, frames
        ale.step()
    for t in range(cfg.num_steps):
        ale.step()
        frames[t] = ale.observations
    return frames, len(ale.action_set)


def measure(env_id: str, envs_list: list[int], model: str, seconds: float, warmup: float, seed: int = 0, acting: tuple[str, ...] = ("packed",), clock: str = "cpu") -> list[dict]:
    """Every K's phases in this process, `seconds` of each K (and acting forward: `packed`, the
    worker's, or `eager`, the model's own) in interleaved blocks after `warmup`."""
    torch.set_num_threads(1)
    setups = []
    for envs in envs_list:
        cfg = Config(env_id=env_id, model=model, envs_per_process=envs)
        frames, num_actions = game_frames(env_id, envs, cfg, seed)
        for way in acting:
            setups.append(((envs, way), NetworkPhases(cfg, num_actions, frames, seed, packed=way == "packed"), PhaseTimes()))

    def block(net: NetworkPhases, times: PhaseTimes, duration: float) -> None:
        end = time.perf_counter() + duration
        while True:
            net.rollout(times)
            if time.perf_counter() >= end:
                break

    for _, net, times in setups:  # the first optimizer step of a process is slow: warm up
        for _ in range(2):
            net.rollout()
        block(net, times, warmup)
    setups = [(envs, net, PhaseTimes()) for envs, net, _ in setups]
    blocks = max(1, round(seconds / BLOCK_S))
    for _ in range(blocks):
        for _, net, times in setups:
            block(net, times, seconds / blocks)
    rows = []
    for (envs, way), net, times in setups:
        us = times.us_per_step(clock)
        total = sum(us.values())
        rows.append({"envs_per_process": envs, "acting": way if net.acting.packed or way == "eager" else "eager (cannot pack)", "model": model, "clock": clock, "num_steps": net.cfg.num_steps, "screen_size": net.cfg.screen_size,
                     "us_per_step": us, "total_us": total, "network_share": sum(us[p] for p in NETWORK) / total,
                     "rollouts": times.rollouts, "cpu_share": times.cpu_share()})  # fmt: skip
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\nus per agent step ({'thread CPU time' if rows[0]['clock'] == 'cpu' else 'wall clock'}), {rows[0]['model']}, rollouts of {rows[0]['num_steps']} steps, {rows[0]['screen_size']}x{rows[0]['screen_size']}, 1 thread")
    print("| K | acting | " + " | ".join(PHASES) + " | total | network share (act + loss + backward) | rollouts | CPU share |")
    print("|---|---|" + "---|" * (len(PHASES) + 4))
    for row in rows:
        cells = " | ".join(f"{row['us_per_step'][p]:.1f}" for p in PHASES)
        print(f"| {row['envs_per_process']} | {row['acting']} | {cells} | {row['total_us']:.1f} | {100 * row['network_share']:.1f}% | {row['rollouts']} | {row['cpu_share']:.2f} |")
    if any(row["cpu_share"] < 0.9 for row in rows):
        print("\nwarning: the process got less than 0.9 of a core: other load shared it (and its caches), so the figures are inflated; compare only their shares and ratios")


class _Parser(argparse.ArgumentParser):
    """One line and exit 2 for a bad flag, as everywhere in this project."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message}\n")


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python -m benchmarks.{PROG}", description=__doc__.split("\n\n")[0], allow_abbrev=False, formatter_class=HelpFormatter)
    parser.add_argument("--envs", type=positive_int, nargs="+", default=[1, 4], metavar="K", help="envs per worker to measure (train.py's --envs-per-process: 1 with 5+ workers, 4 with 1-2)")
    parser.add_argument("--model", choices=MODELS, default=Config.model, help="conv trunk (train.py's --model)")
    parser.add_argument("--env-id", default="ALE/Pong-v5", help="the Atari game whose frames fill the rollout")
    parser.add_argument("--seconds", type=positive_float, default=10.0, help="measured seconds per K")
    parser.add_argument("--warmup", type=positive_float, default=2.0, help="seconds per K before timing")
    parser.add_argument("--acting", nargs="+", choices=("packed", "eager"), default=["packed"], help="the acting forward: packed (the worker's ActingForward) or eager (the model's own forward, the worker before it); both: side by side")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="cpu: the thread's CPU time (waiting for a core on a shared machine not counted); wall: wall-clock time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows to this file")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from a3c_torch.envs import lean_stack_fits
    from a3c_torch.errors import UsageError

    try:
        fits = lean_stack_fits(args.env_id)
    except UsageError as exc:
        parser.error(str(exc))
    if not fits:
        parser.error(f"--env-id must be an Atari game with a screen (its frames fill the rollout), got {args.env_id!r}")
    print(f"{args.env_id} frames, model {args.model}, K = {' '.join(map(str, args.envs))}: warm-up {args.warmup:g} s + {args.seconds:g} s per K, interleaved; torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = measure(args.env_id, args.envs, args.model, args.seconds, args.warmup, args.seed, tuple(dict.fromkeys(args.acting)), args.clock)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
