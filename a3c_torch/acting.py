"""The worker's acting forward: `model(obs, state)`, bit for bit, at less cost per step.

While acting, a worker calls its local model once per step at batch K (1 to 4 envs) under
`inference_mode`, with weights that stay fixed for the whole rollout. At such batches the two
convolutions of the a3c trunks cost more than their arithmetic: each call hands oneDNN a weight in
torch's plain layout, which it reorders into its own blocked layout first. `ActingForward` does
that reorder once per rollout (`refresh`, after the weights are copied in) and calls oneDNN's
convolution with the ReLU fused, then runs the rest of the model as its modules do.

It is the same arithmetic: torch itself sends these convolutions (8x8 and 4x4 kernels, float32
on the CPU) to the same oneDNN kernel, and the fused ReLU is max(0, x) on the same values, so the
logits, value and LSTM state equal `model(obs, state)` bit for bit (tests/test_acting.py, every
trunk it packs, batches 1 to 16, 42x42 and 84x84, before and after the weights change). Measured
by `python -m benchmarks.acting_forward` (docs/benchmarks.md). Where it cannot pack (the universe
trunk, whose 3x3 convolutions torch sends to another kernel at batch 1; a3c-elu, see
PACKED_TRUNKS; vector observations; a torch without oneDNN; a model not on the CPU) it calls the
model itself, and so it does wherever a
probe forward at construction does not equal the model's bit for bit (another CPU or torch build
whose convolutions take another path).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from a3c_torch.model import ActorCritic, State

# The ReLU trunks whose convolutions are all larger than 3x3: torch runs those on oneDNN at any
# batch. (Not a3c-elu: oneDNN may hand back a channels-last output, on which torch's ELU rounds
# differently from the contiguous one the model's convolution gives it.)
PACKED_TRUNKS = ("a3c", "a3c-centred")


def can_pack(model: ActorCritic) -> bool:
    return (
        model.is_image
        and model.trunk in PACKED_TRUNKS
        and model.policy.weight.device.type == "cpu"
        and model.policy.weight.dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and torch.backends.mkldnn.enabled
    )


class _PackedConv:
    """One Conv2d and the ReLU after it, with its weight in oneDNN's layout, one per batch size:
    oneDNN picks the layout (and so the kernel) for the input shape, as torch does on every call."""

    def __init__(self, conv: nn.Conv2d, input_shape: tuple[int, ...]):
        self.conv, self.input_shape = conv, list(input_shape)  # (batch, C, H, W) of the usual batch
        self.geometry = (list(conv.padding), list(conv.stride), list(conv.dilation), conv.groups)
        self.weights: dict[int, torch.Tensor] = {}

    def refresh(self) -> None:
        """Drop the packed weights, and pack them again for the usual batch."""
        self.weights.clear()
        self._pack(self.input_shape[0])

    def _pack(self, batch: int) -> torch.Tensor:
        shape = [batch, *self.input_shape[1:]]
        weight = torch._C._nn.mkldnn_reorder_conv2d_weight(self.conv.weight.detach().to_mkldnn(), *self.geometry, shape)
        self.weights[batch] = weight
        return weight

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weights.get(x.shape[0])
        if weight is None:  # another batch (a truncated env's batch-1 forward): packed for it once per rollout
            weight = self._pack(x.shape[0])
        return torch.ops.mkldnn._convolution_pointwise(x, weight, self.conv.bias, *self.geometry, "relu", [], "")


class ActingForward:
    """`forward(obs, state) -> logits, value, (h, c)`, equal to `model(obs, state)` bit for bit.

    Call `refresh()` whenever the model's weights have changed (the worker: once per rollout,
    after `copy_weights`); between refreshes the weights must not change. Use under
    `torch.inference_mode()` or `torch.no_grad()`: it is for acting, not for autograd.
    `batch_size` is the usual batch (K envs), packed for at each refresh; another batch is packed
    for at its first call after a refresh.
    """

    def __init__(self, model: ActorCritic, batch_size: int = 1, enabled: bool = True):
        self.model = model
        self.packed = enabled and can_pack(model)
        if self.packed:
            conv1, _, conv2, _, _, fc, _ = model.encoder  # the a3c trunk: conv, ReLU, conv, ReLU, flatten, fc, ReLU
            shape = (batch_size, 1, *model.obs_shape)
            with torch.no_grad():
                hidden_shape = tuple(conv1(torch.zeros(shape)).shape)
            self.conv1, self.conv2 = _PackedConv(conv1, shape), _PackedConv(conv2, hidden_shape)
            self.fc = fc
            try:
                self.refresh()
                self.packed = self._agrees_with_the_model(batch_size)
            except (RuntimeError, NotImplementedError):  # an op this torch build lacks
                self.packed = False

    def _agrees_with_the_model(self, batch_size: int) -> bool:
        """One probe forward at `batch_size` and at 1 against the model's own, on this machine: if
        torch sends the convolutions elsewhere here (another CPU, another build), act with the model."""
        model = self.model
        with torch.no_grad():
            for batch in dict.fromkeys((batch_size, 1)):
                generator = torch.Generator().manual_seed(batch)
                obs = torch.randint(0, 256, (batch, *model.obs_shape), generator=generator, dtype=torch.uint8)
                state = (torch.randn(batch, model.hidden_size, generator=generator), torch.randn(batch, model.hidden_size, generator=generator))
                for mine, theirs in zip(self._packed_forward(obs, state), model(obs, state)):
                    for a, b in zip(mine if isinstance(mine, tuple) else (mine,), theirs if isinstance(theirs, tuple) else (theirs,)):
                        if not torch.equal(a.view(torch.int32), b.view(torch.int32)):
                            return False
        return True

    def refresh(self) -> None:
        """Re-pack the convolutions' weights: after every change of the model's weights."""
        if self.packed:
            self.conv1.refresh()
            self.conv2.refresh()

    def __call__(self, obs: torch.Tensor, state: State):
        if not self.packed:
            return self.model(obs, state)
        return self._packed_forward(obs, state)

    def _packed_forward(self, obs: torch.Tensor, state: State):
        # The model's own forward, op for op, with the module calls unrolled (fewer Python calls).
        model = self.model
        x = self.conv2(self.conv1(model.image_input(obs)))
        x = torch.relu(F.linear(x.flatten(1), self.fc.weight, self.fc.bias))
        lstm = model.lstm
        h, c = torch.lstm_cell(x, state, lstm.weight_ih, lstm.weight_hh, lstm.bias_ih, lstm.bias_hh)
        logits = F.linear(h, model.policy.weight, model.policy.bias)
        value = F.linear(h, model.value.weight, model.value.bias).squeeze(-1)
        return logits, value, (h, c)
