"""Shared optimizers (DESIGN invariant 2) and the gradient hand-off (invariant 1)."""

import time

import pytest
import torch
import torch.multiprocessing as mp

from a3c_torch.optim import SharedAdam, SharedRMSprop, hand_off_gradients


def small_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def state_tensors(optimizer):
    return [(key, value) for state in optimizer.state.values() for key, value in state.items()]


@pytest.mark.parametrize("cls", [SharedAdam, SharedRMSprop])
def test_state_is_eager_shared_and_step_is_a_tensor(cls):
    model = small_model()
    optimizer = cls(model.parameters())
    assert len(optimizer.state) == len(list(model.parameters())), "state must exist before the first step"
    for key, value in state_tensors(optimizer):
        assert torch.is_tensor(value), key
        assert value.is_shared(), f"{key} is not in shared memory"
    assert all(torch.is_tensor(s["step"]) and s["step"].item() == 0 for s in optimizer.state.values())


@pytest.mark.parametrize("shared_cls, reference_cls, kwargs", [
    (SharedAdam, torch.optim.Adam, dict(lr=1e-2)),
    (SharedRMSprop, torch.optim.RMSprop, dict(lr=1e-2, alpha=0.99, eps=0.1)),
])
def test_matches_torch_optimizer_numerically(shared_cls, reference_cls, kwargs):
    ours, reference = small_model(), small_model()
    opt_ours, opt_ref = shared_cls(ours.parameters(), **kwargs), reference_cls(reference.parameters(), **kwargs)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        x = torch.randn(16, 4, generator=generator)
        for model, opt in ((ours, opt_ours), (reference, opt_ref)):
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
    for a, b in zip(ours.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
    assert all(s["step"].item() == 5 for s in opt_ours.state.values())


@pytest.mark.parametrize("cls", [SharedAdam, SharedRMSprop])
def test_still_shared_after_load_state_dict(cls):
    source = cls(small_model().parameters())
    for state in source.state.values():
        state["step"].fill_(7)
    model = small_model()
    optimizer = cls(model.parameters())
    optimizer.load_state_dict(source.state_dict())
    for key, value in state_tensors(optimizer):
        assert value.is_shared(), f"{key} lost shared memory in load_state_dict"
    assert all(s["step"].item() == 7 for s in optimizer.state.values())


def _step_in_child(model, optimizer):
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()


def test_a_child_process_steps_the_same_state():
    model = small_model()
    model.share_memory()
    optimizer = SharedAdam(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    ctx = mp.get_context("spawn")
    child = ctx.Process(target=_step_in_child, args=(model, optimizer))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert all(s["step"].item() == 1 for s in optimizer.state.values()), "the child's step did not reach the shared state"
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters())), "the child's update did not reach the shared weights"


class RecordingAdam(SharedAdam):
    """Records the gradient each shared parameter holds when step() is called."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self.seen = []

    def step(self, closure=None):
        self.seen.append([p.grad.clone() for g in self.param_groups for p in g["params"]])
        return super().step(closure)


def test_each_update_hands_off_exactly_its_own_gradient():
    """Invariant 1: the second update's optimizer sees the second gradient, not a sum, not the first."""
    shared, local = small_model(), small_model()
    shared.share_memory()
    optimizer = RecordingAdam(shared.parameters(), lr=1e-3)
    expected = []
    for scale in (1.0, -3.0):
        local.load_state_dict(shared.state_dict())
        local.zero_grad(set_to_none=True)
        for p in local.parameters():  # a known gradient: d/dp of scale * sum(p)
            (scale * p.sum()).backward()
        expected.append([torch.full_like(p, scale) for p in local.parameters()])
        hand_off_gradients(local, shared)
        optimizer.step()
    for step, grads in enumerate(optimizer.seen):
        for seen, want in zip(grads, expected[step]):
            torch.testing.assert_close(seen, want, msg=f"update {step} saw the wrong gradient")


def test_handed_off_gradients_have_the_shared_parameters_layout():
    """Fused Adam assumes grad and parameter share a memory layout; a mismatch updates silently wrong."""
    from a3c_torch.model import ActorCritic

    local, shared = ActorCritic((42, 42), 6), ActorCritic((42, 42), 6)
    shared.share_memory()
    obs = torch.randint(0, 255, (2, 42, 42), dtype=torch.uint8)
    logits, value, _ = local(obs, local.initial_state(2))
    (logits.sum() + value.sum()).backward()
    hand_off_gradients(local, shared)
    for param in shared.parameters():
        assert param.grad.stride() == param.stride() and param.grad.is_contiguous() == param.is_contiguous()


def _update_until_stopped(tensor, stop):
    torch.set_num_threads(1)
    direction = torch.randn(tensor.shape)
    while not stop.value:
        tensor.addcdiv_(direction, direction.abs() + 1, value=1e-4)
        tensor.addcdiv_(direction, direction.abs() + 1, value=-1e-4)


def test_finiteness_of_live_shared_weights_is_checked_on_a_snapshot():
    """Why every NaN guard here clones first: torch.isfinite(x) reads x twice (x == x), so on
    a tensor another process is updating it reports NaN where there is none. Two of our Pong
    runs were stopped as 'diverged' that way. If torch ever changes this, the clones can go."""
    tensor = torch.randn(1024, 288).share_memory_()
    ctx = mp.get_context("spawn")
    stop = ctx.RawValue("b", False)
    writer = ctx.Process(target=_update_until_stopped, args=(tensor, stop))
    writer.start()
    try:
        snapshot_false_alarms = 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            snapshot_false_alarms += not bool(torch.isfinite(tensor.clone()).all())
    finally:
        stop.value = True
        writer.join(timeout=30)
    assert snapshot_false_alarms == 0


@pytest.mark.parametrize("cls", [SharedAdam, SharedRMSprop])
def test_load_state_dict_keeps_the_learning_rate_it_was_built_with(cls):
    """A run resumed with a new --lr must train with it, not with the lr saved in the checkpoint."""
    saved = cls(small_model().parameters(), lr=1e-4).state_dict()
    optimizer = cls(small_model().parameters(), lr=3e-5)
    optimizer.load_state_dict(saved)
    assert [group["lr"] for group in optimizer.param_groups] == [3e-5]
