"""The parameter server's state, hosted by rank 0: global parameters, version, global step, stop.

Sync semantics (local SGD with asynchronous delta pushes). Each node trains its own shared model
with its Hogwild workers and, every few seconds, pushes the change its workers made since its
last sync (`delta = params_now - params_at_last_sync`). The server adds that delta to the global
parameters and answers with the result, which the node adopts (keeping the updates its workers
made while the call was in flight, see sync.py). Nodes never wait for each other: a push is
applied on arrival, so a node's delta was computed against global parameters that are at most
one sync interval of the other nodes' work old (the staleness). With one node the global
parameters are the node's own (up to float rounding), so one node is the single-machine
algorithm.

No RPC here: transport.py serves this object to the other nodes, and rank 0 calls it directly.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

import torch

MAX_QUEUED_STATS = 100_000  # forwarded episode/loss messages waiting for rank 0's TensorBoard


@dataclass
class SyncReply:
    params: list  # the global parameters after this sync (copies: the caller may keep them)
    version: int  # how many pushes the server has applied in total
    global_step: int  # agent steps summed over every node
    stop: Optional[str]  # why the world is stopping, or None to go on
    optimizer_state: Optional[dict] = field(default=None)  # only in answer to the first pull


class ParameterServer:
    def __init__(self, params, global_step: int, max_steps: int, node_optimizers: Optional[dict] = None, version: int = 0):
        self._lock = threading.Lock()
        self._finished_changed = threading.Condition(self._lock)
        self.params = [p.detach().clone() for p in params]
        self.version = int(version)
        self.global_step = int(global_step)
        self.max_steps = int(max_steps)
        self.stop_reason: Optional[str] = None
        # Each node's optimizer state, as it last sent it: saved in checkpoints, returned on resume.
        self.node_optimizers: dict = dict(node_optimizers or {})
        self.finished: set = set()
        self.stats: deque = deque(maxlen=MAX_QUEUED_STATS)

    def pull(self, node: int) -> SyncReply:
        """A node's starting point: the global parameters, step and its saved optimizer state."""
        with self._lock:
            state = self.node_optimizers.get(node, self.node_optimizers.get(0))
            return SyncReply(self._copy(), self.version, self.global_step, self.stop_reason, state)

    def push(self, node: int, delta, steps: int, stats=(), optimizer_state=None, stop_reason=None, final=False) -> SyncReply:
        """Apply one node's delta and step count; answer with the new global state."""
        if len(delta) != len(self.params):
            raise ValueError(f"node {node} sent {len(delta)} tensors, the model has {len(self.params)}")
        with self._lock:
            with torch.no_grad():
                for global_param, change in zip(self.params, delta):
                    global_param.add_(change.to(global_param.dtype))
            self.version += 1
            self.global_step += int(steps)
            self.stats.extend(stats)
            if optimizer_state is not None:
                self.node_optimizers[node] = optimizer_state
            if stop_reason and self.stop_reason is None:
                self.stop_reason = f"node {node}: {stop_reason}"
            if self.global_step >= self.max_steps and self.stop_reason is None:
                self.stop_reason = f"reached --max-steps {self.max_steps:,}"
            if final:
                self.finished.add(node)
                self._finished_changed.notify_all()
            return SyncReply(self._copy(), self.version, self.global_step, self.stop_reason)

    def request_stop(self, reason: str) -> None:
        with self._lock:
            if self.stop_reason is None:
                self.stop_reason = reason

    def take_stats(self) -> list:
        with self._lock:
            taken = list(self.stats)
            self.stats.clear()
            return taken

    def wait_finished(self, nodes, timeout: float) -> set:
        """Wait until every node in `nodes` made its final push; returns those that did not."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not set(nodes) <= self.finished and time.monotonic() < deadline:
                self._finished_changed.wait(timeout=max(0.0, deadline - time.monotonic()))
            return set(nodes) - self.finished

    def snapshot(self) -> tuple[list, int, int, dict]:
        """Parameters, step, version and optimizer states, consistent with each other (for checkpoints)."""
        with self._lock:
            return self._copy(), self.global_step, self.version, dict(self.node_optimizers)

    def _copy(self) -> list:
        return [p.clone() for p in self.params]
