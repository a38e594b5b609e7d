"""A run's final policy as a small file to publish: the weights, the config and the global step.

A checkpoint also holds the optimizer's state (with Adam, two more copies of the weights) and
every worker's RNG, env and LSTM state: what a resume needs, and most of its size. A policy
file drops them. `evaluate.py --checkpoint policy.pt` plays it like any checkpoint (it passes the
same checks, storage/checks.py); `train.py --resume` refuses it, as there is nothing to go on
from. It is written like a checkpoint: atomically, and never with non-finite weights.
"""

from __future__ import annotations

import os

from a3c_torch.storage.checkpoint import load_checkpoint, save_checkpoint
from a3c_torch.storage.checks import POLICY_KIND


def policy_of(checkpoint: dict) -> dict:
    """The part of a loaded checkpoint that plays (save_checkpoint adds the format version)."""
    return {
        "kind": POLICY_KIND,
        "model": checkpoint["model"],
        "config": checkpoint["config"],
        "global_step": int(checkpoint["global_step"]),
    }


def export_policy(checkpoint_path: str | os.PathLike, policy_path: str | os.PathLike) -> int:
    """Write the policy of a checkpoint file to `policy_path`; returns its global step."""
    policy = policy_of(load_checkpoint(checkpoint_path))
    save_checkpoint(policy_path, policy)
    return policy["global_step"]
