"""Bounds that train.py checks before its slow imports, beside config.validate().

--num-steps is the rollout length: a worker keeps every step of a rollout in memory (observations,
actions, rewards, LSTM states) and updates only at its end. 100,000 showed "step 0" for minutes
and would need about 11 GB per Atari worker; A3C uses 5 to 20, and 1000 stays near 110 MB.
"""

from __future__ import annotations

from a3c_torch.errors import UsageError

MAX_NUM_STEPS = 1000


def check_num_steps(cfg) -> None:
    if cfg.num_steps > MAX_NUM_STEPS:
        raise UsageError(f"--num-steps must be at most {MAX_NUM_STEPS}, got {cfg.num_steps} (each worker holds a whole rollout in memory and updates only at its end; A3C uses 5 to 20)")
