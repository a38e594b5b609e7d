"""The only module that knows the transport: torch.distributed.rpc (TensorPipe).

Three calls cross machines: `pull` (a node's starting point), `push` (a sync) and `stop`. Rank 0
hosts the ParameterServer and calls it directly; the other ranks reach it over RPC. Replacing
RPC (it is in maintenance mode upstream) with another engine means rewriting this file only.

Security: RPC has no authentication and unpickles what it receives. Its ports must only be
reachable on a trusted private network; see docs/distributed.md.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
import warnings

import torch.distributed.rpc as rpc

from a3c_torch.errors import UsageError

SERVER_NAME = "node0"
JOIN_NOTICE_S = 30.0  # while joining the RPC world takes longer, a line says what it waits for
_server = None  # the ParameterServer, in rank 0's process only


def _serve_pull(node, identity, name):
    return _server.pull(node, identity, name)


def _serve_push(node, delta, steps, stats, optimizer_state, stop_reason, final):
    return _server.push(node, delta, steps, stats, optimizer_state, stop_reason, final)


def _serve_stop(reason):
    _server.request_stop(reason)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


class RpcTransport:
    def __init__(self, rank: int, world_size: int, master_addr: str, rpc_port: int, interface: str | None, timeout_s: float):
        self.rank, self.world_size = rank, world_size
        self.master_addr, self.rpc_port = master_addr, rpc_port
        self.interface, self.timeout_s = interface, timeout_s
        self.started = False

    def start(self, server=None) -> None:
        """Join the RPC world (blocks until every rank has). Rank 0 passes the server it hosts."""
        global _server
        if self.rank == 0:
            _server = server
        # TensorPipe listens on this interface's address: loopback for a single-machine run.
        interface = self.interface or ("lo" if is_loopback(self.master_addr) else None)
        if interface:
            os.environ["TP_SOCKET_IFNAME"] = interface
        # Under torchrun the RPC store must be our own (a fresh port per restart), not the agent's.
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
        # TCP only (libuv): TensorPipe's shared-memory transport busy-polls a whole core in every
        # process ("TP_SHM_reactor"), taking it from the workers of a node on the same machine.
        options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://{self.master_addr}:{self.rpc_port}", rpc_timeout=self.timeout_s, _transports=["uv"])
        # RPC's own start-up uses a deprecated Gloo call; the warning is torch's, not the user's.
        warnings.filterwarnings("ignore", message="You are using a Backend .* as a ProcessGroup")
        joined = threading.Event()
        threading.Thread(target=self._say_while_joining, args=(joined,), name="rpc-join-notice", daemon=True).start()
        try:
            rpc.init_rpc(f"node{self.rank}", rank=self.rank, world_size=self.world_size, rpc_backend_options=options)
        except RuntimeError as exc:
            raise UsageError(f"cannot join the RPC world at {self.master_addr}:{self.rpc_port}: {str(exc).splitlines()[0]}") from None
        finally:
            joined.set()
        self.started = True

    def _say_while_joining(self, joined: threading.Event) -> None:
        """init_rpc waits for every node without a word (up to 30 min): say what it waits for."""
        waited = 0.0
        while not joined.wait(JOIN_NOTICE_S):
            waited += JOIN_NOTICE_S
            print(f"node {self.rank}: waiting {waited:.0f} s for all {self.world_size} nodes to join the RPC world at {self.master_addr}:{self.rpc_port} "
                  "(a node that failed to start? a firewall on the RPC ports?)", file=sys.stderr, flush=True)

    def pull(self, identity: dict, name: str):
        if self.rank == 0:
            return _server.pull(0, identity, name)
        return rpc.rpc_sync(SERVER_NAME, _serve_pull, args=(self.rank, identity, name))

    def push(self, delta, steps, stats=(), optimizer_state=None, stop_reason=None, final=False):
        if self.rank == 0:
            return _server.push(0, delta, steps, list(stats), optimizer_state, stop_reason, final)
        return rpc.rpc_sync(SERVER_NAME, _serve_push, args=(self.rank, delta, steps, list(stats), optimizer_state, stop_reason, final))

    def stop(self, reason: str) -> None:
        if self.rank == 0:
            _server.request_stop(reason)
        else:
            rpc.rpc_sync(SERVER_NAME, _serve_stop, args=(reason,))

    def shutdown(self, graceful: bool) -> None:
        """Leave the world. Graceful waits for every rank to arrive (call it when all have pushed)."""
        if self.started:
            self.started = False
            rpc.shutdown(graceful=graceful, timeout=self.timeout_s) if graceful else rpc.shutdown(graceful=False)


