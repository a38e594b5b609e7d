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
trunk, whose 3x3 convolutions torch sends to another kernel at batch 1; vector observations; a
torch without oneDNN; a model not on the CPU) it calls the model itself.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from a3c_torch.model import ActorCritic, State

# The trunks whose convolutions are all larger than 3x3: torch runs those on oneDNN at any batch
# (a3c-elu: the convolutions packed, the ELU after each as its module computes it).
PACKED_TRUNKS = ("a3c", "a3c-centred", "a3c-elu")


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
    """One Conv2d (+ the ReLU after it) with its weight in oneDNN's layout for a batch of frames."""

    def __init__(self, conv: nn.Conv2d, input_shape: tuple[int, ...], relu: bool):
        self.conv, self.input_shape = conv, list(input_shape)
        self.geometry = (list(conv.padding), list(conv.stride), list(conv.dilation), conv.groups)
        self.attr = "relu" if relu else "none"
        self.weight = None

    def refresh(self) -> None:
        self.weight = torch._C._nn.mkldnn_reorder_conv2d_weight(self.conv.weight.detach().to_mkldnn(), *self.geometry, self.input_shape)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._convolution_pointwise(x, self.weight, self.conv.bias, *self.geometry, self.attr, [], "")


class ActingForward:
    """`forward(obs, state) -> logits, value, (h, c)`, equal to `model(obs, state)` bit for bit.

    Call `refresh()` whenever the model's weights have changed (the worker: once per rollout,
    after `copy_weights`); between refreshes the weights must not change. Use under
    `torch.inference_mode()` or `torch.no_grad()`: it is for acting, not for autograd.
    `batch_size` is the batch oneDNN lays the weights out for; other batches give the same values.
    """

    def __init__(self, model: ActorCritic, batch_size: int = 1, enabled: bool = True):
        self.model = model
        self.packed = enabled and can_pack(model)
        if self.packed:
            conv1, act1, conv2, act2, flatten, fc, act3 = model.encoder  # the a3c trunk's layers
            relu = type(act1) is nn.ReLU
            shape = (batch_size, 1, *model.obs_shape)
            with torch.no_grad():
                hidden_shape = tuple(conv1(torch.zeros(shape)).shape)
            self.conv1, self.conv2 = _PackedConv(conv1, shape, relu), _PackedConv(conv2, hidden_shape, relu)
            # With ReLU it is fused into the convolutions; ELU runs as its module computes it.
            self.conv_activation = None if relu else act1
            self.fc, self.fc_activation = fc, act3
            self.refresh()

    def refresh(self) -> None:
        """Re-pack the convolutions' weights: after every change of the model's weights."""
        if self.packed:
            self.conv1.refresh()
            self.conv2.refresh()

    def __call__(self, obs: torch.Tensor, state: State):
        model = self.model
        if not self.packed:
            return model(obs, state)
        # The model's own forward, op for op, with the module calls unrolled (fewer Python calls).
        x = model.image_input(obs)
        if self.conv_activation is None:
            x = self.conv2(self.conv1(x))
        else:
            x = self.conv_activation(self.conv2(self.conv_activation(self.conv1(x))))
        x = self.fc_activation(F.linear(x.flatten(1), self.fc.weight, self.fc.bias))
        lstm = model.lstm
        h, c = torch.lstm_cell(x, state, lstm.weight_ih, lstm.weight_hh, lstm.bias_ih, lstm.bias_hh)
        logits = F.linear(h, model.policy.weight, model.policy.bias)
        value = F.linear(h, model.value.weight, model.value.bias).squeeze(-1)
        return logits, value, (h, c)
