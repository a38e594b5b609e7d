"""Where this node stands in the torchrun world, and the distributed flags."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Optional

from a3c_torch.errors import UsageError

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
LAUNCH_HINT = "start it with torchrun, e.g.: torchrun --standalone --nproc-per-node=3 -m a3c_torch.distributed --env-id CartPole-v1"


@dataclass
class World:
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    restart_count: int = 0  # torchrun --max-restarts: how many times this world was restarted
    run_id: str = "none"  # the rendezvous id: the same across the restarts of one launch

    @classmethod
    def from_environment(cls, env=os.environ) -> "World":
        missing = [name for name in TORCHRUN_VARIABLES if name not in env]
        if missing:
            raise UsageError(f"not started by torchrun ({', '.join(missing)} not set); {LAUNCH_HINT}")
        return cls(int(env["RANK"]), int(env["WORLD_SIZE"]), env["MASTER_ADDR"], int(env["MASTER_PORT"]),
                   int(env.get("TORCHELASTIC_RESTART_COUNT", "0")), env.get("TORCHELASTIC_RUN_ID", "none"))


@dataclass
class DistributedSettings:
    sync_interval: float = 2.0
    sync_updates: int = 100
    ps_workers: Optional[int] = None
    rpc_port: Optional[int] = None
    rpc_interface: Optional[str] = None
    rpc_timeout: float = 60.0

    def validate(self) -> None:
        if not self.sync_interval > 0:
            raise UsageError(f"--sync-interval must be positive, got {self.sync_interval}")
        if self.sync_updates <= 0:
            raise UsageError(f"--sync-updates must be a positive integer, got {self.sync_updates}")
        if self.ps_workers is not None and self.ps_workers < 0:
            raise UsageError(f"--ps-workers must be >= 0, got {self.ps_workers}")
        if self.rpc_port is not None and not 0 < self.rpc_port < 65536:
            raise UsageError(f"--rpc-port must be in 1..65535, got {self.rpc_port}")
        if not self.rpc_timeout > 0:
            raise UsageError(f"--rpc-timeout must be positive, got {self.rpc_timeout}")

    def rpc_port_for(self, world: World) -> int:
        # A restarted world needs a fresh RPC store address: the old one may still be held.
        return (self.rpc_port or world.master_port + 1) + world.restart_count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("distributed (one node process per machine, started by torchrun)")
    defaults = DistributedSettings()
    group.add_argument("--sync-interval", type=float, default=defaults.sync_interval, help="seconds between two syncs of a node with the parameter server (at most)")
    group.add_argument("--sync-updates", type=int, default=defaults.sync_updates, help="a node also syncs after this many updates of its workers (updates = its steps / --num-steps)")
    group.add_argument("--ps-workers", type=int, default=defaults.ps_workers, help="worker processes on rank 0, which also hosts the parameter server, the evaluator and the checkpoints (unset: --num-processes; 0: a dedicated server)")
    group.add_argument("--rpc-port", type=int, default=defaults.rpc_port, help="port of the RPC store on rank 0's machine (unset: torchrun's MASTER_PORT + 1; plus the restart count after a restart)")
    group.add_argument("--rpc-interface", default=defaults.rpc_interface, help="network interface RPC listens on, e.g. eth1 for a private network (unset: lo when the rendezvous host is loopback, else the interface of this host's name)")
    group.add_argument("--rpc-timeout", type=float, default=defaults.rpc_timeout, help="seconds before a sync that gets no answer fails the node")
