"""Fault injection for the reliability tests (tests/test_reliability.py), read only by workers.

    A3C_TORCH_FAULT=<kind>:<update>[:<rank>]

makes worker <rank> (every worker when omitted) misbehave from its <update>-th update on (1 is the
first), and say so on stderr once. Kinds:

    worker_raise        raise InjectedFault: crash reporting and shutdown
    worker_nan_loss     every loss is NaN: skipped-update accounting and the divergence stop
    worker_nan_weights  write NaN into the shared model once: the trainer's finiteness guard
    worker_hang         sleep forever, ignoring the stop flag: bounded shutdown, the second Ctrl-C

Unset (every normal run) it costs one environment lookup when the worker starts: `with_faults`
then gives the worker `apply_update` itself, and its update line is the same as without this module.
"""

from __future__ import annotations

import os
import sys
import time

import torch

FAULT_ENV_VAR = "A3C_TORCH_FAULT"
KINDS = ("worker_raise", "worker_nan_loss", "worker_nan_weights", "worker_hang")


class InjectedFault(RuntimeError):
    """Raised on purpose by A3C_TORCH_FAULT=worker_raise:..."""


class FaultPlan:
    def __init__(self, kind: str | None = None, at_update: int = 0, rank: int = 0):
        self.kind, self.at_update, self.rank = kind, at_update, rank
        self.updates = 0

    @classmethod
    def for_worker(cls, rank: int, spec: str | None = None) -> "FaultPlan":
        spec = os.environ.get(FAULT_ENV_VAR, "") if spec is None else spec
        if not spec:
            return cls()
        parts = spec.split(":")
        if len(parts) not in (2, 3) or parts[0] not in KINDS or not all(p.isdigit() for p in parts[1:]):
            raise ValueError(f"{FAULT_ENV_VAR}={spec!r}: expected <kind>:<update>[:<rank>] with kind in {', '.join(KINDS)}")
        if len(parts) == 3 and int(parts[2]) != rank:
            return cls()
        return cls(parts[0], int(parts[1]), rank)

    def on_update(self, loss: torch.Tensor, shared_model: torch.nn.Module) -> torch.Tensor:
        """Call once per update with the loss about to be backpropagated; returns the loss to use."""
        self.updates += 1
        if self.kind is None or self.updates < self.at_update:
            return loss
        if self.updates == self.at_update:
            print(f"{FAULT_ENV_VAR}: worker {self.rank}: {self.kind} at update {self.updates}", file=sys.stderr, flush=True)
        if self.kind == "worker_raise":
            raise InjectedFault(f"{FAULT_ENV_VAR}: injected crash at update {self.updates}")
        if self.kind == "worker_hang":
            while True:
                time.sleep(1.0)
        if self.kind == "worker_nan_weights":
            if self.updates == self.at_update:
                with torch.no_grad():
                    next(shared_model.parameters()).fill_(float("nan"))
            return loss
        return loss * float("nan")


def with_faults(apply_update, rank: int):
    """The update function worker `rank` uses: `apply_update` itself, unless A3C_TORCH_FAULT names
    this worker; then the same update, with the fault injected into its loss first."""
    plan = FaultPlan.for_worker(rank)
    if plan.kind is None:
        return apply_update

    def update_with_fault(local_model, shared_model, optimizer, loss, max_grad_norm):
        return apply_update(local_model, shared_model, optimizer, plan.on_update(loss, shared_model), max_grad_norm)

    return update_with_fault
