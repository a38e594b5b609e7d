"""What `python evaluate.py` reports: the summary of the games, as a table and as JSON.

The JSON (`--json FILE`, or `--json -` for stdout) is the table's content for machines: the
scores, the checkpoint and its step, and the env settings the games were played under.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

from a3c_torch.envs import ATARI_FRAME_SKIP, EnvSettings, is_atari
from a3c_torch.errors import UsageError
from a3c_torch.evaluation.games import summarize
from a3c_torch.storage.files import NotDurable, write_atomically


def describe_env(settings: EnvSettings) -> dict:
    if not is_atari(settings.env_id):
        return {"env_id": settings.env_id, "atari": False}
    return {
        "env_id": settings.env_id,
        "atari": True,
        "repeat_action_probability": settings.repeat_action_probability,
        "frame_skip": ATARI_FRAME_SKIP,
        "screen_size": settings.screen_size,
        "full_action_space": settings.full_action_space,
    }


def build_report(results, seeds: list[int], checkpoint_path: Path, checkpoint: dict, settings: EnvSettings, args, device: torch.device) -> dict:
    """`results` of the games reset with `seeds`: all --episodes of them, or fewer after a Ctrl-C."""
    return {
        **summarize(results),
        "lengths": [r.length for r in results],
        "checkpoint": str(checkpoint_path),
        "global_step": int(checkpoint["global_step"]),
        "env_settings": describe_env(settings),
        "greedy": bool(args.greedy),
        "device": str(device),
        "seed": args.seed,
        "seeds": seeds,
        "interrupted": len(results) < args.episodes,
        "requested_episodes": args.episodes,
    }


def format_table(report: dict) -> str:
    env = report["env_settings"]
    rows = [
        ("checkpoint", report["checkpoint"]),
        ("global step", f"{report['global_step']:,}"),
        ("env id", env["env_id"]),
    ]
    if env["atari"]:
        rows += [
            ("sticky actions", f"{env['repeat_action_probability']:g}"),
            ("frame skip", str(env["frame_skip"])),
            ("screen size", f"{env['screen_size']}x{env['screen_size']}"),
            ("action space", "full (18 actions)" if env["full_action_space"] else "minimal (the game's own)"),
        ]
    seeds = report["seeds"]
    # Games played side by side end out of order: a Ctrl-C can leave gaps in the seeds.
    contiguous = seeds == list(range(seeds[0], seeds[0] + len(seeds)))
    seeds_shown = f"seeds {seeds[0]}..{seeds[-1]}" if contiguous else f"seeds {', '.join(map(str, seeds))}"
    stopped = f" of {report['requested_episodes']}, stopped by Ctrl-C" if report["interrupted"] else ""
    rows += [
        ("policy", f"{'greedy (argmax)' if report['greedy'] else 'sampling'} on {report['device']}"),
        ("episodes", f"{report['episodes']}{stopped} ({seeds_shown})"),
        ("mean return", number(report["mean"])),
        ("std", number(report["std"])),
        ("std error of mean", number(report["standard_error"]) if report["standard_error"] is not None else "n/a (one game)"),
        ("median", number(report["median"])),
        ("min", number(report["min"])),
        ("max", number(report["max"])),
        ("mean length", f"{report['mean_length']:,.1f} steps"),
        ("time-limit cuts", f"{report['truncated']} of {report['episodes']}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def number(value: float) -> str:
    return f"{value:,.2f}" if math.isfinite(value) else str(value)


def write_json(report: dict, destination: str) -> None:
    """The results, whole or not at all: a full disk never leaves a 0-byte or cut file."""
    text = json.dumps(report, indent=2) + "\n"
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomically(destination, text.encode())
    except NotDurable as exc:
        print(f"warning: {destination} is written, but its folder could not be synced to disk ({exc.strerror}): a power cut may lose it", file=sys.stderr, flush=True)
    except OSError as exc:
        raise UsageError(f"{destination}: cannot write the JSON results: {exc.strerror or exc}") from None
