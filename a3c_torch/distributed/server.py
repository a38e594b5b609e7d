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


def flag_name(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def identity_mismatch(ours: dict, theirs: dict) -> Optional[str]:
    """Why a node with settings `theirs` cannot join a world whose rank 0 has `ours` (the settings
    that fix the model and optimizer layout), or None if it can."""
    differences = [f"{flag_name(name)} {theirs.get(name)} where rank 0 has {value}" for name, value in ours.items() if theirs.get(name) != value]
    return "; ".join(differences) or None


@dataclass
class SyncReply:
    params: list  # the global parameters after this sync (copies: the caller may keep them)
    version: int  # how many pushes the server has applied in total
    global_step: int  # agent steps summed over every node
    stop: Optional[str]  # why the world is stopping, or None to go on
    optimizer_state: Optional[dict] = field(default=None)  # only in answer to the first pull
    refused: Optional[str] = field(default=None)  # why the pulling node may not join (then nothing else is set)


class ParameterServer:
    def __init__(self, params, global_step: int, max_steps: int, node_optimizers: Optional[dict] = None, version: int = 0,
                 identity: Optional[dict] = None, gone_after_s: float = 30.0):
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
        # Who is in the world: a node that does not sync for gone_after_s is reported gone.
        self.identity = dict(identity or {})  # rank 0's settings that every node must share
        self.gone_after_s = gone_after_s
        self.last_seen: dict = {}  # node -> monotonic time of its last call
        self.names: dict = {}  # node -> "host pid N", as it said at its pull
        self.gone: set = set()
        self.refused: set = set()
        self.news: list = []  # lines for rank 0 to print: refused, gone, back

    def expect(self, nodes) -> None:
        """From now on, nodes that do not call within gone_after_s are reported gone."""
        with self._lock:
            now = time.monotonic()
            for node in nodes:
                self.last_seen.setdefault(node, now)

    def _seen(self, node: int) -> None:
        self.last_seen[node] = time.monotonic()
        if node in self.gone:
            self.gone.discard(node)
            self.news.append(f"node {self._name(node)} is back")

    def _name(self, node: int) -> str:
        return f"{node} ({self.names[node]})" if node in self.names else str(node)

    def members(self) -> list:
        """The nodes training now (or still starting): neither refused nor gone."""
        return sorted(set(self.last_seen) - self.gone - self.refused)

    def check_gone(self) -> None:
        """Report the nodes silent for longer than gone_after_s (killed, their machine down, cut off)."""
        with self._lock:
            now = time.monotonic()
            for node, seen in self.last_seen.items():
                if node not in self.gone | self.refused and now - seen > self.gone_after_s:
                    self.gone.add(node)
                    self.news.append(f"node {self._name(node)} is gone: no sync for {now - seen:.0f} s; training goes on with node(s) {self.members()}")

    def take_news(self) -> list:
        with self._lock:
            news, self.news = self.news, []
            return news

    def pull(self, node: int, identity: Optional[dict] = None, name: str = "") -> SyncReply:
        """A node's starting point: the global parameters, step and its saved optimizer state;
        or a refusal, if the node's model or optimizer would not be rank 0's."""
        with self._lock:
            if name:
                self.names[node] = name
            why = identity_mismatch(self.identity, identity or {}) if identity is not None else None
            if why is not None:
                self.refused.add(node)
                self.news.append(f"node {self._name(node)} refused: {why}; training goes on without it")
                return SyncReply([], self.version, self.global_step, self.stop_reason, refused=why)
            self._seen(node)
            state = self.node_optimizers.get(node, self.node_optimizers.get(0))
            return SyncReply(self._copy(), self.version, self.global_step, self.stop_reason, state)

    def push(self, node: int, delta, steps: int, stats=(), optimizer_state=None, stop_reason=None, final=False) -> SyncReply:
        """Apply one node's delta and step count; answer with the new global state."""
        if len(delta) != len(self.params):
            raise ValueError(f"node {node} sent {len(delta)} tensors, the model has {len(self.params)}")
        with self._lock:
            self._seen(node)
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
