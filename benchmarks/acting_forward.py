"""The acting forward at batch K, one way against another, side by side in one process.

What a worker does for each agent step while acting: the local model's forward at batch K
(--envs-per-process) under `inference_mode`, then `sample_action` and the actions to numpy; per
rollout of T steps, whatever a variant must redo when the weights change. Variants:

eager    `model(obs, state)`: the worker before a3c_torch/acting.py
packed   `ActingForward` (a3c_torch/acting.py): the convolutions' weights reordered for oneDNN
         once per rollout (its cost is counted), ReLU fused; bit for bit the same outputs
trace    `torch.jit.trace(model)` (deprecated in torch 2.13; its parameters are the model's)
compile  `torch.compile(model)`, inductor's default mode; its compile time is printed apart
transposed   packed, and the fully connected and LSTM matrices copied once per rollout into
         the transposed layout MKL's small-batch GEMM is faster with (the copies counted): the
         same function, other rounding
fused-gates  packed, and the LSTM's two matrix products as one, over [x, h] with [W_ih, W_hh]
         (concatenated once per rollout, counted): the same function, other rounding

Each round runs every variant on the same rollout of real frames (K Pong games, the bare ALE of
benchmarks/limit.py), the LSTM state carried as in a worker, in turn (the order reversed every
other round), timed on the thread's CPU clock; the figure is the median over rounds of the first
variant's time over the other's in the same round, with its quartiles: on a shared machine only
such ratios, measured side by side, mean anything. The outputs of one rollout are compared with eager's, from
the same state and the same random numbers: the largest difference of logits, values and LSTM
state, and whether every sampled action is the same.

    python -m benchmarks.acting_forward [--envs 1 4] [--variants eager packed trace compile transposed fused-gates] [--rounds 150]
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from a3c_torch.acting import PACKED_TRUNKS, ActingForward  # noqa: E402
from a3c_torch.config import MODELS, Config, HelpFormatter  # noqa: E402
from a3c_torch.model import ActorCritic, sample_action  # noqa: E402
from benchmarks.network_breakdown import game_frames, positive_int  # noqa: E402

PROG = "acting_forward"
VARIANTS = ("eager", "packed", "trace", "compile", "transposed", "fused-gates")


class _Reshaped(ActingForward):
    """ActingForward with the fully connected layer and the LSTM cell computed from copies of their
    weights made at each refresh: `transposed` layouts, or the LSTM's matrices `fused`."""

    def __init__(self, model: ActorCritic, batch_size: int, fused: bool):
        self.fused = fused
        super().__init__(model, batch_size)

    def refresh(self) -> None:
        super().refresh()
        fc, lstm = self.fc, self.model.lstm
        with torch.no_grad():
            self.fc_t = fc.weight.t().contiguous()
            if self.fused:
                self.gates_t = torch.cat([lstm.weight_ih, lstm.weight_hh], 1).t().contiguous()
                self.gates_b = lstm.bias_ih + lstm.bias_hh
            else:
                self.ih_t, self.hh_t = lstm.weight_ih.t().contiguous(), lstm.weight_hh.t().contiguous()

    def __call__(self, obs, state):
        model, lstm = self.model, self.model.lstm
        x = self.conv2(self.conv1(model.image_input(obs))).flatten(1)
        x = torch.relu(torch.addmm(self.fc.bias, x, self.fc_t))
        h, c = state
        if self.fused:
            gates = torch.addmm(self.gates_b, torch.cat([x, h], 1), self.gates_t)
        else:  # as torch's lstm_cell sums them
            gates = torch.addmm(lstm.bias_hh, h, self.hh_t).add_(torch.addmm(lstm.bias_ih, x, self.ih_t))
        i, f, g, o = gates.unsafe_chunk(4, 1)
        c = (f.sigmoid_() * c).add_(i.sigmoid_() * g.tanh_())
        h = o.sigmoid_() * c.tanh()
        return F.linear(h, model.policy.weight, model.policy.bias), F.linear(h, model.value.weight, model.value.bias).squeeze(-1), (h, c)


class Variant:
    """A way to run the acting forward: `refresh()` once per rollout, `forward(obs, state)` per step."""

    def __init__(self, name: str, model: ActorCritic, frames: torch.Tensor, cold: bool = False):
        self.name, self.model = name, model
        self.compile_s = 0.0
        self.refresh = lambda: None
        if name == "eager":
            self.forward = model
        elif name == "packed":
            acting = ActingForward(model, frames.shape[1])
            if not acting.packed:
                raise ValueError(f"ActingForward does not pack the {model.trunk} trunk")
            self.forward, self.refresh = acting, acting.refresh
        elif name in ("transposed", "fused-gates"):
            acting = _Reshaped(model, frames.shape[1], fused=name == "fused-gates")
            if not acting.packed:
                raise ValueError(f"ActingForward does not pack the {model.trunk} trunk")
            self.forward, self.refresh = acting, acting.refresh
        elif name == "trace":
            with warnings.catch_warnings(), torch.inference_mode():
                warnings.simplefilter("ignore")  # its deprecation
                self.forward = torch.jit.trace(model, (frames[0], model.initial_state(frames.shape[1])), check_trace=False)
        elif name == "compile":
            if cold:  # compile from scratch, as a fresh machine's first worker does, not from inductor's cache on disk
                from torch._inductor import config as inductor_config

                inductor_config.force_disable_caches = True
            self.forward = torch.compile(model)
            started = time.perf_counter()
            with torch.inference_mode():
                self.forward(frames[0], model.initial_state(frames.shape[1]))
            self.compile_s = time.perf_counter() - started
        else:
            raise ValueError(name)

    def rollout(self, frames: torch.Tensor, state):
        """One rollout's acting: (logits, values, actions) of every step, and the final state."""
        self.refresh()
        logits, values, actions = [], [], []
        with torch.inference_mode():
            for obs in frames:
                step_logits, value, state = self.forward(obs, state)
                actions.append(sample_action(step_logits).numpy())
                logits.append(step_logits)
                values.append(value)
        return logits, values, actions, state


def compare(reference: Variant, other: Variant, frames: torch.Tensor, state, seed: int) -> tuple[float, bool]:
    """(largest |difference| of logits, values and LSTM state; every action the same) over one rollout."""
    torch.manual_seed(seed)
    ref = reference.rollout(frames, state)
    torch.manual_seed(seed)
    out = other.rollout(frames, state)
    pairs = list(zip(ref[0] + ref[1] + list(ref[3]), out[0] + out[1] + list(out[3])))
    diff = max(float((a - b).abs().max()) for a, b in pairs)
    return diff, all((a == b).all() for a, b in zip(ref[2], out[2]))


def measure(envs: int, variants: list[str], model_name: str, rounds: int, rollouts: int, seed: int = 0, cold_compile: bool = False) -> list[dict]:
    torch.set_num_threads(1)
    cfg = Config(env_id="ALE/Pong-v5", model=model_name, envs_per_process=envs)
    frames, num_actions = game_frames(cfg.env_id, envs, cfg, seed)
    frames = torch.from_numpy(frames)
    torch.manual_seed(seed)
    model = ActorCritic((cfg.screen_size, cfg.screen_size), num_actions, cfg.hidden_size, model_name)
    state = tuple(torch.randn(envs, cfg.hidden_size) * 0.1 for _ in range(2))  # mid-game, not zeros
    built = [Variant(name, model, frames, cold_compile) for name in variants]
    checks = {v.name: compare(built[0], v, frames, state, seed) for v in built}
    for v in built:  # warm-up
        v.rollout(frames, state)
    per_round = {v.name: [] for v in built}  # thread CPU us per step
    wall = {v.name: 0 for v in built}
    steps = rollouts * frames.shape[0] * envs
    for r in range(rounds):
        order = built if r % 2 == 0 else built[::-1]  # none always first
        for v in order:
            started, cpu = time.perf_counter_ns(), time.thread_time_ns()
            for _ in range(rollouts):
                v.rollout(frames, state)
            per_round[v.name].append((time.thread_time_ns() - cpu) / 1e3 / steps)
            wall[v.name] += time.perf_counter_ns() - started
    base = per_round[built[0].name]
    cpu_total = sum(sum(times) for times in per_round.values()) * steps
    rows = []
    for v in built:
        ratios = sorted(b / t for b, t in zip(base, per_round[v.name]))
        diff, same_actions = checks[v.name]
        rows.append({"envs": envs, "variant": v.name, "us_per_step": statistics.median(per_round[v.name]), "ratio": statistics.median(ratios),
                     "ratio_q1": ratios[len(ratios) // 4], "ratio_q3": ratios[(3 * len(ratios)) // 4],
                     "max_abs_diff": diff, "same_actions": bool(same_actions), "compile_s": v.compile_s,
                     "cpu_share": cpu_total / (sum(wall.values()) / 1e3)})  # fmt: skip
    return rows


def print_table(rows: list[dict], base: str) -> None:
    print(f"\n| K | variant | CPU us per step (median of rounds) | {base} / variant: median of rounds [quartiles] | largest difference from {base} | same actions | compile s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        diff = "0 (bit for bit)" if r["max_abs_diff"] == 0 else f"{r['max_abs_diff']:.1e}"
        compile_s = f"{r['compile_s']:.1f}" if r["variant"] == "compile" else ""
        print(f"| {r['envs']} | {r['variant']} | {r['us_per_step']:.1f} | {r['ratio']:.3f} [{r['ratio_q1']:.3f}, {r['ratio_q3']:.3f}] | {diff} | {'yes' if r['same_actions'] else 'no'} | {compile_s} |")
    shares = ", ".join(f"K={r['envs']}: {r['cpu_share']:.2f}" for r in rows if r["variant"] == rows[0]["variant"])
    print(f"\nCPU share of the measuring thread (CPU time / wall time): {shares}; under 0.9 other load shares the core, and only the ratios compare")


class _Parser(argparse.ArgumentParser):
    """One line and exit 2 for a bad flag, as everywhere in this project."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python -m benchmarks.{PROG}", description=__doc__.split("\n\n")[0], allow_abbrev=False, formatter_class=HelpFormatter)
    parser.add_argument("--envs", type=positive_int, nargs="+", default=[1, 4], metavar="K", help="batch sizes: envs per worker (1 with 5+ workers, 4 with 1-2)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["eager", "packed"], metavar="VARIANT", help=f"what to compare, the first one the base of the ratios: {', '.join(VARIANTS)}")
    parser.add_argument("--model", choices=MODELS, default=Config.model, help="conv trunk (train.py's --model)")
    parser.add_argument("--rounds", type=positive_int, default=150, help="interleaved rounds per K")
    parser.add_argument("--rollouts", type=positive_int, default=1, help="rollouts of 20 steps per variant and round")
    parser.add_argument("--cold-compile", action="store_true", help="compile without inductor's cache on disk (the compile time of a fresh machine's first worker)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if len(set(args.variants)) < 2:
        parser.error("--variants needs at least two different variants to compare")
    if args.model not in PACKED_TRUNKS and set(args.variants) & {"packed", "transposed", "fused-gates"}:
        parser.error(f"--model {args.model}: ActingForward packs only {', '.join(PACKED_TRUNKS)}; compare eager, trace and compile on it")
    print(f"Pong frames, model {args.model}, variants {' '.join(args.variants)}, {args.rounds} rounds x {args.rollouts} rollouts per variant and K; torch {torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for envs in args.envs:
        rows += measure(envs, list(dict.fromkeys(args.variants)), args.model, args.rounds, args.rollouts, args.seed, args.cold_compile)
    print_table(rows, args.variants[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
