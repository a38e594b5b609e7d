"""The distributed sync's pieces, without a network: server arithmetic, in-place adoption, flags."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from a3c_torch.distributed.server import ParameterServer
from a3c_torch.distributed.sync import NodeSync, adopt_global, parameter_delta
from a3c_torch.distributed.world import DistributedSettings, World
from a3c_torch.errors import UsageError
from a3c_torch.messages import Episode
from a3c_torch.model import ActorCritic
from tests.helpers import REPO


class Counter:
    """StepCounter's interface without a multiprocessing context."""

    def __init__(self, value=0):
        self.value = value

    def add(self, steps):
        self.value += steps
        return self.value


def shared_model():
    model = ActorCritic((4,), 2, 8)
    model.share_memory()
    return model


def test_vector_to_parameters_unshares_the_model_which_is_why_the_sync_adds_in_place():
    model = shared_model()
    flat = torch.nn.utils.parameters_to_vector(model.parameters()) + 1
    torch.nn.utils.vector_to_parameters(flat, model.parameters())
    assert not all(p.is_shared() for p in model.parameters())  # the trap the sync must avoid


def test_every_sync_step_keeps_the_shared_model_shared_and_in_place():
    model = shared_model()
    addresses = [p.data_ptr() for p in model.parameters()]
    steps = Counter()
    sync = NodeSync(model.parameters(), steps, steps_per_update=20, every_updates=1, every_seconds=60)
    server = ParameterServer([p + 1 for p in model.parameters()], global_step=40, max_steps=10**6)
    reply = server.pull(1)
    sync.start_from(reply.params, reply.global_step, reply.version)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)  # what the workers did
    sent, delta, new_steps, counted = sync.prepare()
    sync.complete(sent, counted, server.push(1, delta, new_steps))
    assert all(p.is_shared() for p in model.parameters())
    assert [p.data_ptr() for p in model.parameters()] == addresses


def test_delta_and_adoption_against_a_hand_computation():
    params = [torch.full((2,), 3.0)]
    base = [torch.full((2,), 1.0)]
    assert torch.equal(parameter_delta(params, base)[0], torch.full((2,), 2.0))
    server = ParameterServer([torch.full((2,), 10.0)], global_step=500, max_steps=10**6)
    reply = server.push(1, [torch.full((2,), 2.0)], steps=40)
    assert torch.equal(reply.params[0], torch.full((2,), 12.0)) and reply.global_step == 540 and reply.version == 1
    # The workers moved the node's copy by +0.5 while the push was in flight: that is kept.
    live = [torch.full((2,), 3.5)]
    adopt_global(live, [torch.full((2,), 3.0)], reply.params)
    assert torch.equal(live[0], torch.full((2,), 12.5))


def test_node_bookkeeping_counts_its_own_steps_once_and_learns_the_others():
    model = shared_model()
    steps = Counter()
    sync = NodeSync(model.parameters(), steps, steps_per_update=20, every_updates=2, every_seconds=60)
    server = ParameterServer(model.parameters(), global_step=0, max_steps=10**6)
    sync.start_from(server.pull(1).params, 0, 0)
    assert not sync.due()
    steps.add(40)  # two updates of this node's workers
    assert sync.due()
    server.push(2, [torch.zeros_like(p) for p in model.parameters()], steps=100)  # another node
    sent, delta, new_steps, counted = sync.prepare()
    assert new_steps == 40
    sync.complete(sent, counted, server.push(1, delta, new_steps))
    assert server.global_step == 140 and steps.value == 140
    steps.add(20)
    sent, delta, new_steps, counted = sync.prepare()
    assert new_steps == 20  # not 140 again


def test_two_nodes_deltas_both_reach_the_global_parameters():
    server = ParameterServer([torch.zeros(3)], global_step=0, max_steps=10**6)
    server.push(1, [torch.tensor([1.0, 0.0, 0.0])], steps=20)
    reply = server.push(2, [torch.tensor([0.0, 2.0, 0.0])], steps=20)
    assert torch.equal(reply.params[0], torch.tensor([1.0, 2.0, 0.0])) and reply.global_step == 40


def test_one_node_reduces_to_the_single_machine_algorithm():
    """With one node the global parameters are the node's own: a sync changes nothing."""
    model = shared_model()
    steps = Counter()
    sync = NodeSync(model.parameters(), steps, steps_per_update=20, every_updates=1, every_seconds=60)
    server = ParameterServer(model.parameters(), global_step=0, max_steps=10**6)
    sync.start_from(server.pull(0).params, 0, 0)
    for _ in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.01)  # a worker update
        steps.add(20)
        before = [p.detach().clone() for p in model.parameters()]
        sent, delta, new_steps, counted = sync.prepare()
        sync.complete(sent, counted, server.push(0, delta, new_steps))
        for p, q, g in zip(model.parameters(), before, server.params):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-6)
            torch.testing.assert_close(g, q, rtol=0, atol=1e-6)
    assert server.global_step == steps.value == 100


def test_the_server_stops_the_world_at_max_steps_and_keeps_the_first_reason():
    server = ParameterServer([torch.zeros(1)], global_step=0, max_steps=100)
    assert server.push(1, [torch.zeros(1)], steps=60).stop is None
    assert server.push(2, [torch.zeros(1)], steps=60).stop == "reached --max-steps 100"
    server.request_stop("later reason")
    assert server.pull(1).stop == "reached --max-steps 100"


def test_a_node_stop_request_stops_the_others():
    server = ParameterServer([torch.zeros(1)], global_step=0, max_steps=100)
    server.push(1, [torch.zeros(1)], steps=0, stop_reason="stopped by SIGINT", final=True)
    assert server.push(2, [torch.zeros(1)], steps=0).stop == "node 1: stopped by SIGINT"
    assert server.wait_finished({1, 2}, timeout=0.1) == {2}


def test_a_node_gets_its_own_optimizer_state_back_else_rank_0s():
    server = ParameterServer([torch.zeros(1)], 0, 100, node_optimizers={0: {"who": 0}, 2: {"who": 2}})
    assert server.pull(2).optimizer_state == {"who": 2}
    assert server.pull(1).optimizer_state == {"who": 0}


def test_forwarded_stats_are_handed_over_once():
    server = ParameterServer([torch.zeros(1)], 0, 100)
    server.push(1, [torch.zeros(1)], steps=20, stats=[Episode(20, 9.0, 9)])
    assert server.take_stats() == [Episode(20, 9.0, 9)]
    assert server.take_stats() == []


def test_world_comes_from_torchrun_variables():
    world = World.from_environment({"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "1"})
    assert (world.rank, world.world_size, world.restart_count) == (2, 3, 1)
    assert DistributedSettings().rpc_port_for(world) == 29502  # a fresh RPC port per restart
    with pytest.raises(UsageError, match="not started by torchrun"):
        World.from_environment({})


@pytest.mark.parametrize("flag, value", [("--sync-interval", "0"), ("--sync-updates", "0"), ("--ps-workers", "-1"), ("--rpc-port", "70000"), ("--rpc-timeout", "-1")])
def test_bad_distributed_flags_are_one_line_errors(flag, value):
    result = subprocess.run([sys.executable, "-m", "a3c_torch.distributed", flag, value], cwd=REPO, capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and flag in result.stderr, result.stderr


def test_without_torchrun_the_entry_point_says_how_to_start_it():
    result = subprocess.run([sys.executable, "-m", "a3c_torch.distributed", "--env-id", "CartPole-v1"], cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "torchrun" in result.stderr and "Traceback" not in result.stderr


def test_a_node_with_another_model_is_refused_at_its_pull_and_said_once():
    server = ParameterServer([torch.zeros(1)], 0, 100, identity={"env_id": "CartPole-v1", "hidden_size": 256})
    reply = server.pull(1, {"env_id": "Acrobot-v1", "hidden_size": 256}, "host-b pid 7")
    assert reply.refused == "--env-id Acrobot-v1 where rank 0 has CartPole-v1" and reply.params == []
    assert server.take_news() == ["node 1 (host-b pid 7) refused: --env-id Acrobot-v1 where rank 0 has CartPole-v1; training goes on without it"]
    assert server.pull(2, {"env_id": "CartPole-v1", "hidden_size": 256}).refused is None
    assert 1 not in server.members()


def test_a_silent_node_is_reported_gone_once_and_back_when_it_syncs_again():
    server = ParameterServer([torch.zeros(1)], 0, 100, gone_after_s=0.2)
    server.expect([1, 2])
    server.pull(1, name="host-b pid 7")
    time.sleep(0.3)
    server.push(2, [torch.zeros(1)], steps=0)
    server.check_gone()
    server.check_gone()
    assert server.take_news() == ["node 1 (host-b pid 7) is gone: no sync for 0 s; training goes on with node(s) [2]"]
    assert server.members() == [2]
    server.push(1, [torch.zeros(1)], steps=0)
    assert server.take_news() == ["node 1 (host-b pid 7) is back"] and server.members() == [1, 2]
