"""One node of a distributed run: the single-machine Trainer plus a sync with the parameter server.

Every node trains like `train.py`: a node-local shared model and shared optimizer, its Hogwild
workers. Rank 0 also hosts the ParameterServer, the evaluator, TensorBoard and the checkpoints.
Between the two, NodeSync pushes this node's progress every --sync-interval seconds or
--sync-updates updates, whichever comes first.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

from a3c_torch.config import IDENTITY_FIELDS, Config
from a3c_torch.distributed.server import ParameterServer
from a3c_torch.distributed.sync import NodeSync
from a3c_torch.distributed.transport import RpcTransport
from a3c_torch.distributed.world import DistributedSettings, World
from a3c_torch.errors import UsageError
from a3c_torch.run_end import EXIT_FAILED, EXIT_OK, STOP_SIGNALS
from a3c_torch.storage.checkpoint import snapshot
from a3c_torch.storage.run_dir import create_run_dir
from a3c_torch.trainer import Trainer

WORKER_RANKS_PER_NODE = 1000  # seeds: worker i of node r plays with SEED + 1000 r + i
OPTIMIZER_PUSH_INTERVAL_S = 60.0  # a node's optimizer state reaches rank 0's checkpoints this often
FINAL_PUSH_WAIT_S = 60.0  # rank 0 waits this long for the others' last push at the end of a run
FINAL_PUSH_WAIT_SIGNALLED_S = 5.0  # ... and this long when it was signalled (torchrun tearing down)
RUN_MARKER = "distributed.json"
# Rank 0 reports a node gone when it has not synced for this long (a node syncs every
# --sync-interval, 2 s by default; a slow start or a slow link stays well inside it).
NODE_GONE_AFTER_S = 15.0


def rpc_error(exc: Exception) -> str:
    """An RPC failure in a few words: its first line, without TensorPipe's source location."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first.split(" (this error originated at")[0]


def identity_of(cfg: Config) -> dict:
    """The settings every node must share with rank 0: they fix the model and optimizer layout."""
    return {name: getattr(cfg, name) for name in IDENTITY_FIELDS}


def node_config(cfg: Config, world: World, settings: DistributedSettings) -> Config:
    """Rank 0 keeps the user's config; the others have no evaluator and no run directory."""
    cfg = Config.from_dict(cfg.to_dict())
    if world.rank != 0:
        cfg.evaluator, cfg.target_eval_return, cfg.resume = False, None, None
    return cfg


def find_run_of_launch(runs_dir: str, run_id: str) -> Path | None:
    """The run directory an earlier attempt of this torchrun launch created (for restarts)."""
    for marker in sorted(Path(runs_dir).glob(f"*/{RUN_MARKER}"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            if json.loads(marker.read_text()).get("run_id") == run_id:
                return marker.parent
        except (OSError, ValueError):
            continue
    return None


class DistributedNode(Trainer):
    def __init__(self, cfg: Config, explicit: set[str], world: World, settings: DistributedSettings):
        self.world, self.settings = world, settings
        self.node_optimizers, self.outbox, self.world_stop = {}, [], None
        self.server_gone = None  # why a sync with rank 0 failed: it is not tried again
        self.round_trips = []  # seconds per push (a local call on rank 0)
        self.server_version = 0  # pushes applied by the parameter server, across restarts
        cfg = node_config(cfg, world, settings)
        if world.rank == 0 and world.restart_count > 0 and cfg.resume is None:
            earlier = find_run_of_launch(cfg.runs_dir, world.run_id)
            if earlier is not None and (earlier / "checkpoints" / "latest.pt").exists():
                print(f"restart {world.restart_count} of this launch: resuming {earlier}", flush=True)
                cfg.resume = str(earlier)
        super().__init__(cfg, explicit)
        self.worker_rank_offset = world.rank * WORKER_RANKS_PER_NODE
        self.sps_window = max(1.0, 2 * settings.sync_interval)  # the step count moves at syncs
        if world.rank == 0 and settings.ps_workers is not None:
            self.num_workers = settings.ps_workers
        self.param_names = [name for name, _ in self.model.named_parameters()]
        assert len(self.param_names) == len(self.model.state_dict()), "the sync moves parameters only: the model must have no buffers"
        self.server = None
        if world.rank == 0:
            self.server = ParameterServer(self.model.parameters(), self.start_step, self.cfg.max_steps, self.node_optimizers, version=self.server_version,
                                          identity=identity_of(self.cfg), gone_after_s=max(NODE_GONE_AFTER_S, 5 * settings.sync_interval))
        self.transport = RpcTransport(world.rank, world.world_size, world.master_addr, settings.rpc_port_for(world), settings.rpc_interface, settings.rpc_timeout)
        self.transport.start(self.server)
        if self.server is not None:
            self.server.expect(range(1, world.world_size))  # every node has joined RPC: now each must sync
        self.next_optimizer_push = time.monotonic()  # the first sync sends it

    def _new_run_dir(self):
        if self.world.rank != 0:
            return None  # only rank 0 writes a run directory
        run_dir = create_run_dir(self.cfg)
        (run_dir / RUN_MARKER).write_text(json.dumps({"run_id": self.world.run_id, "world_size": self.world.world_size}) + "\n")
        return run_dir

    def _restore(self, checkpoint: dict) -> None:
        super()._restore(checkpoint)
        self.node_optimizers = dict(checkpoint.get("node_optimizers") or {})
        self.server_version = int(checkpoint.get("ps_version", 0))

    # --- start: every node begins from the global state ---
    def _create_processes(self) -> None:
        reply = self.transport.pull(identity_of(self.cfg), f"{socket.gethostname()} pid {os.getpid()}")
        if reply.refused:
            raise UsageError(f"node {self.world.rank} refused by rank 0: {reply.refused}")
        self.start_step = reply.global_step  # before the workers' seeds are derived from it
        super()._create_processes()  # created, not started: they get the state we load now
        self.sync = NodeSync(self.model.parameters(), self.global_steps, self.cfg.num_steps * self.cfg.envs_per_process, self.settings.sync_updates, self.settings.sync_interval)
        self.sync.start_from(reply.params, reply.global_step, reply.version)
        if reply.optimizer_state is not None and self.world.rank != 0:
            self.optimizer.load_state_dict(reply.optimizer_state)
            self.optimizer.share_memory()  # load_state_dict gives private tensors
        print(f"node {self.world.rank}/{self.world.world_size}: {self.num_workers} workers, starting at global step {reply.global_step:,} (version {reply.version})", flush=True)

    def _on_signal(self, signum, frame):
        if self.world.rank != 0 and self.stop_signal is None:
            # Quietly: this node writes no checkpoint, and when rank 0 is gone its launcher
            # signals it right away; its last line says how it stopped.
            self.stop_signal = signum
            return
        super()._on_signal(signum, frame)

    # --- while training ---
    def _on_stats(self, message) -> None:
        self.metrics.handle(message)
        if self.world.rank != 0:
            self.outbox.append(message)  # for rank 0's TensorBoard, with the next push

    def _world_says_stop(self):
        if self.server is not None:
            for message in self.server.take_stats():
                self.metrics.handle(message)
            self.server.check_gone()
            for line in self.server.take_news():
                self.metrics.say(line)
        if not self.sync.due():
            return False
        try:
            reply = self._push()
        except RuntimeError as exc:  # RPC: rank 0 gone, timed out
            self.server_gone = rpc_error(exc)
            return "sync with the parameter server", self.server_gone
        if reply.stop:
            self.world_stop = reply.stop
            self.metrics.say(f"node {self.world.rank}: the world is stopping ({reply.stop})")
            return True
        return False

    def _push(self, stop_reason=None, final=False):
        sent, delta, steps, counted = self.sync.prepare()
        optimizer_state = None
        if final or time.monotonic() >= self.next_optimizer_push:
            optimizer_state = snapshot(self.optimizer.state_dict())
            self.next_optimizer_push = time.monotonic() + OPTIMIZER_PUSH_INTERVAL_S
        outbox, self.outbox = self.outbox, []
        started = time.perf_counter()
        reply = self.transport.push(delta, steps, outbox, optimizer_state, stop_reason, final)
        self.round_trips.append(time.perf_counter() - started)
        self.sync.complete(sent, counted, reply)
        return reply

    # --- the end ---
    def _why_this_node_stops(self) -> str | None:
        """What this node's stop means for the world (None: the server knows, e.g. --max-steps)."""
        if self.stop_signal is not None:
            return f"stopped by {signal.Signals(self.stop_signal).name}"
        if self.target_reached:
            return f"evaluation reached --target-eval-return {self.cfg.target_eval_return:g}"
        return None

    def _finish_world(self) -> None:
        """After this node's workers stopped: push their last updates, then (rank 0) wait for
        the others' last pushes, so the final checkpoint holds every node's work."""
        self.all_pushed = False
        if self.server_gone:
            return
        try:
            self._push(stop_reason=self._why_this_node_stops(), final=True)
        except Exception as exc:  # noqa: BLE001 - rank 0 gone or the world torn down: keep what we have
            self.server_gone = rpc_error(exc)
            return
        if self.server is None:
            self.all_pushed = True
            return
        self.server.request_stop("rank 0 stopped")  # e.g. after a crash of its own: a no-op if a reason is known
        others = set(self.server.members()) - {0}  # a node refused or gone sends nothing more
        wait = FINAL_PUSH_WAIT_SIGNALLED_S if self.stop_signal is not None else FINAL_PUSH_WAIT_S
        missing = self.server.wait_finished(others, wait)
        if missing:
            print(f"warning: no last push from node(s) {sorted(missing)} within {wait:.0f} s; the checkpoint has their work up to their previous sync", file=sys.stderr, flush=True)
        self.all_pushed = not missing and len(self.server.members()) == self.world.world_size
        self.global_steps.add(self.server.global_step - self.global_steps.value)

    def save(self, name: str, global_step: int, model_state=None, worker_states=None) -> bool:
        if self.world.rank != 0:
            return True  # checkpoints are rank 0's
        if model_state is None:  # latest.pt: the global parameters, not this node's copy of them
            params, global_step, version, self.node_optimizers = self.server.snapshot()
            model_state = dict(zip(self.param_names, params))
            self.server_version = version
        return super().save(name, global_step, model_state, worker_states)

    def _extra_checkpoint_fields(self) -> dict:
        return {"node_optimizers": self.node_optimizers, "ps_version": self.server_version, "world_size": self.world.world_size}

    def run(self) -> int:
        try:
            return super().run()
        finally:
            # Graceful waits for every rank: only when the run ended normally. After a signal
            # (torchrun tearing the world down after a crash) a node may be gone for good.
            self.transport.shutdown(graceful=getattr(self, "all_pushed", False) and self.stop_signal is None)

    def _report(self, failure, step: int, saved: bool) -> int:
        if self.round_trips:
            trips = sorted(self.round_trips)
            kind = "local calls" if self.world.rank == 0 else "RPC round trips"
            print(f"node {self.world.rank}: {len(trips)} syncs; {kind}: median {1000 * trips[len(trips) // 2]:.1f} ms, max {1000 * trips[-1]:.1f} ms", flush=True)
        if self.run_dir is not None:
            return super()._report(failure, step, saved)
        if self.server_gone:  # one line: the C++ side of the error says nothing more a user can act on
            print(f"error: node {self.world.rank}: the parameter server on rank 0 ({self.world.master_addr}) is gone ({self.server_gone}); "
                  f"this node stopped at step {step:,}, and rank 0's checkpoints hold its work up to its last sync", file=sys.stderr, flush=True)
            return EXIT_FAILED
        if failure:
            name, detail = failure
            print(f"error: node {self.world.rank}: {name} failed at step {step:,}\n{detail}", file=sys.stderr, flush=True)
            return EXIT_FAILED
        if self.stop_signal is not None:
            print(f"node {self.world.rank}: stopped at step {step:,}", flush=True)
            return STOP_SIGNALS[self.stop_signal]
        print(f"node {self.world.rank}: done at step {step:,} ({self.world_stop or 'training ended'})", flush=True)
        return EXIT_OK
