"""How many of a conv trunk's units never switch on, on one game's frames.

For each activation layer of the encoder (ReLU or ELU) it counts the units (a conv channel, or
an FC unit) whose input is never above zero on any of --frames probe frames of the training stack
(a uniform-random policy, fixed seed), and the share of all (frame, position, unit) inputs above
zero. Under ReLU such a unit is dead: its output and its gradient are zero on every frame, so
it never learns again. Under ELU the same unit still passes a gradient (exp(x) > 0), so the count
says how much of the trunk sits on the negative side, not that it is lost.

    .venv/bin/python -m analysis.dead_units results/pong-a3c-k4-lr4e-4/*/checkpoints/latest.pt
    .venv/bin/python -m analysis.dead_units --fresh a3c a3c-elu --env-id ALE/Pong-v5

A checkpoint's own game is probed unless --env-id is given; --fresh probes new models (weights
from --seed) of the named trunks.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from a3c_torch.config import MODELS, Config  # noqa: E402
from a3c_torch.envs import EnvSettings, probe_spaces, random_policy_frames  # noqa: E402
from a3c_torch.errors import UsageError  # noqa: E402
from a3c_torch.model import ActorCritic  # noqa: E402
from a3c_torch.storage.checkpoint import load_checkpoint  # noqa: E402

ACTIVATIONS = (nn.ReLU, nn.ELU)


def activity(model: ActorCritic, frames: torch.Tensor) -> list[dict]:
    """Per activation layer of the encoder: units, units never above zero, share of inputs above zero."""
    rows = []
    with torch.inference_mode():
        x = model.image_input(frames)
        for index, layer in enumerate(model.encoder):
            if isinstance(layer, ACTIVATIONS):
                # Units are dim 1 (conv channels or FC units); every other dim is frames and positions.
                above = (x > 0).transpose(0, 1).reshape(x.shape[1], -1)
                rows.append({
                    "layer": f"{index - 1}:{type(model.encoder[index - 1]).__name__}+{type(layer).__name__}",
                    "units": int(above.shape[0]),
                    "never_above_zero": int((~above.any(dim=1)).sum()),
                    "share_above_zero": round(float(above.float().mean()), 4),
                })
            x = layer(x)
    return rows


def probe(label: str, model: ActorCritic, settings: EnvSettings, frame_count: int) -> dict:
    frames = torch.as_tensor(random_policy_frames(settings, frame_count))
    return {"model": label, "trunk": model.trunk, "env_id": settings.env_id, "frames": frame_count, "layers": activity(model, frames)}


def from_checkpoint(path: str, env_id: str | None) -> tuple[ActorCritic, EnvSettings, int]:
    checkpoint = load_checkpoint(path)
    cfg = Config.from_dict(checkpoint["config"])
    settings = EnvSettings(env_id or cfg.env_id, cfg.screen_size, cfg.repeat_action_probability, cfg.full_action_space)
    obs_shape, num_actions = probe_spaces(settings)
    model = ActorCritic(obs_shape, num_actions, cfg.hidden_size, cfg.model)
    if not model.is_image:
        raise UsageError(f"{path}: a model of vector observations ({cfg.env_id}) has no conv trunk to probe")
    model.load_state_dict(checkpoint["model"])
    return model, settings, int(checkpoint["global_step"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.dead_units", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="*", help="checkpoint files to probe")
    parser.add_argument("--fresh", nargs="+", choices=MODELS, default=[], help="also probe new models of these trunks")
    parser.add_argument("--env-id", default=None, help="the game whose frames to probe (default: each checkpoint's own; ALE/Pong-v5 for --fresh)")
    parser.add_argument("--frames", type=int, default=2000, help="probe frames")
    parser.add_argument("--seed", type=int, default=1, help="weights of the --fresh models (train.py's default seed)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if not args.checkpoints and not args.fresh:
        parser.error("give checkpoints, --fresh trunks, or both")
    torch.set_num_threads(1)
    results = []
    try:
        for name in args.fresh:
            settings = EnvSettings(args.env_id or "ALE/Pong-v5")
            obs_shape, num_actions = probe_spaces(settings)
            torch.manual_seed(args.seed)  # as train.py makes a new run's weights
            results.append(probe(f"fresh {name}", ActorCritic(obs_shape, num_actions, trunk=name), settings, args.frames))
        for path in args.checkpoints:
            model, settings, step = from_checkpoint(path, args.env_id)
            results.append(probe(f"{path} ({step:,} steps)", model, settings, args.frames))
    except (UsageError, OSError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    for result in results:
        print(f"{result['model']}: {result['env_id']}, {result['frames']} frames")
        for row in result["layers"]:
            print(f"  {row['layer']:<18} {row['never_above_zero']:>4} of {row['units']:>4} units never above zero;"
                  f" {100 * row['share_above_zero']:5.1f}% of inputs above zero")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
