"""The node side of a sync: what this node's workers changed, and adopting the global parameters.

The shared model is written in place (`add_` under no_grad), never rebound: `.data = ...`,
`vector_to_parameters` or `load_state_dict` would give the node's process private tensors, and
its worker processes would silently go on training a model nobody reads.
"""

from __future__ import annotations

import time

import torch


def parameter_delta(current, base) -> list:
    """What changed since the last sync: current - base, tensor by tensor."""
    return [now - then for now, then in zip(current, base)]


@torch.no_grad()
def adopt_global(shared_params, sent_snapshot, global_params) -> None:
    """Move the shared parameters to the global ones, keeping the worker updates made after
    `sent_snapshot` was taken (they happened while the sync was in flight): p += global - sent."""
    for param, sent, new in zip(shared_params, sent_snapshot, global_params):
        param.add_(new.to(param.dtype) - sent)


class NodeSync:
    """Decides when this node syncs and keeps the bookkeeping between two syncs.

    `steps` is the node's StepCounter. It counts global steps as this node knows them: at each
    sync it is moved by what the other nodes did meanwhile, so workers stop near --max-steps and
    progress lines show the world's step.
    """

    def __init__(self, shared_params, steps, steps_per_update: int, every_updates: int, every_seconds: float):
        self.params = list(shared_params)
        self.steps = steps
        self.every_steps = every_updates * steps_per_update  # each worker update adds --num-steps x --envs-per-process steps
        self.every_seconds = every_seconds
        self.base = [p.detach().clone() for p in self.params]
        self.steps_base = steps.value
        self.next_time = time.monotonic() + every_seconds
        self.version = 0

    def start_from(self, params, global_step: int, version: int) -> None:
        """Before the workers start: take the global parameters and step as they are."""
        with torch.no_grad():
            for param, new in zip(self.params, params):
                param.copy_(new)
        self.base = [p.detach().clone() for p in self.params]
        self.steps.add(global_step - self.steps.value)
        self.steps_base = global_step
        self.version = version

    def due(self) -> bool:
        return self.steps.value - self.steps_base >= self.every_steps or time.monotonic() >= self.next_time

    def prepare(self) -> tuple[list, list, int, int]:
        """A snapshot of the shared parameters, the delta to push, the new steps, and the counter
        value they were read at."""
        counted = self.steps.value
        sent = [p.detach().clone() for p in self.params]
        return sent, parameter_delta(sent, self.base), counted - self.steps_base, counted

    def complete(self, sent, counted: int, reply) -> None:
        """Adopt the server's answer to the push of `sent`."""
        adopt_global(self.params, sent, reply.params)
        self.base = [p.clone() for p in reply.params]
        self.steps.add(reply.global_step - counted)  # what the other nodes did meanwhile
        self.steps_base = reply.global_step
        self.version = reply.version
        self.next_time = time.monotonic() + self.every_seconds
