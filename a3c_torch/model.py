"""The LSTM actor-critic: encoder -> LSTMCell -> policy logits and value.

Four conv trunks for images (2-D grayscale frames, uint8), chosen with --model:
- `a3c`: the A3C paper's network (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement
  Learning", section 8, after the DQN of Mnih et al. 2013): conv 16 8x8 stride 4, conv 32 4x4
  stride 2, fully connected 256, ReLU. Few, large-stride filters: cheap on a CPU.
- `a3c-elu`: the same layers with ELU. On a grey background (Pong) the inputs are far from zero,
  and a ReLU filter whose weights sum below zero never fires there and never learns again (see
  analysis/dead_units.py); an ELU unit always passes a gradient. It learned Pong worse than
  ReLU (results/pong-a3c-elu-k4-lr4e-4): kept for comparison.
- `a3c-centred`: the a3c trunk (ReLU) on frames minus their own mean, so a uniform background
  is zero whatever its grey level and a filter answers to the objects on it.
- `universe`: four 3x3 stride-2 convolutions of 32 channels, ELU (OpenAI's universe-starter-agent
  and the A3C-LSTM repos after it). Keeps more spatial detail; about 3x the network time per step.
Vectors go through a two-layer ELU MLP whatever the choice. The API is batch-first:
`forward(obs, (h, c)) -> logits, value, (h, c)`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from a3c_torch.config import MODELS

State = tuple[torch.Tensor, torch.Tensor]
TRUNKS = MODELS


def universe_trunk(screen_size: int) -> tuple[nn.Module, int]:
    layers, channels, size = [], 1, screen_size
    for _ in range(4):
        layers += [nn.Conv2d(channels, 32, kernel_size=3, stride=2, padding=1), nn.ELU()]
        channels, size = 32, (size + 1) // 2
    return nn.Sequential(*layers, nn.Flatten()), 32 * size * size


def a3c_trunk_output(screen_size: int) -> int:
    """Side of the a3c trunk's last feature map (0 or less: the screen is too small for it)."""
    return ((screen_size - 8) // 4 + 1 - 4) // 2 + 1


def a3c_trunk(screen_size: int, activation: type[nn.Module] = nn.ReLU) -> tuple[nn.Module, int]:
    side = a3c_trunk_output(screen_size)
    if side < 1:
        raise ValueError(f"the a3c trunk needs frames of at least 20x20, got {screen_size}x{screen_size}")
    trunk = nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=8, stride=4), activation(),
        nn.Conv2d(16, 32, kernel_size=4, stride=2), activation(),
        nn.Flatten(), nn.Linear(32 * side * side, 256), activation(),
    )
    return trunk, 256


def image_trunk(name: str, screen_size: int) -> tuple[nn.Module, int]:
    if name in ("a3c", "a3c-centred"):
        return a3c_trunk(screen_size)
    if name == "a3c-elu":
        return a3c_trunk(screen_size, nn.ELU)
    return universe_trunk(screen_size)


def mlp_encoder(input_size: int, width: int = 128) -> tuple[nn.Module, int]:
    return nn.Sequential(nn.Linear(input_size, width), nn.ELU(), nn.Linear(width, width), nn.ELU()), width


class ActorCritic(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, hidden_size: int = 256, trunk: str = "a3c-centred"):
        super().__init__()
        self.obs_shape = tuple(obs_shape)
        self.is_image = len(self.obs_shape) == 2
        if trunk not in TRUNKS:
            raise ValueError(f"unknown trunk {trunk!r}; choose one of {', '.join(TRUNKS)}")
        self.trunk = trunk
        self.centre_frames = trunk == "a3c-centred"
        if self.is_image:
            if obs_shape[0] != obs_shape[1]:
                raise ValueError(f"image observations must be square, got {obs_shape}")
            self.encoder, features = image_trunk(trunk, obs_shape[0])
        elif len(self.obs_shape) == 1:
            self.encoder, features = mlp_encoder(obs_shape[0])
        else:
            raise ValueError(f"observations must be vectors or 2-D frames, got shape {obs_shape}")
        self.hidden_size = hidden_size
        self.lstm = nn.LSTMCell(features, hidden_size)
        self.policy = nn.Linear(hidden_size, num_actions)
        self.value = nn.Linear(hidden_size, 1)
        self._initialize()

    @classmethod
    def like(cls, model: "ActorCritic") -> "ActorCritic":
        """A new model of the same architecture (a worker's or the evaluator's local copy)."""
        return cls(model.obs_shape, model.policy.out_features, model.hidden_size, model.trunk)

    def _initialize(self):
        # Orthogonal init with ELU-ish gain for the encoder; a near-uniform initial policy
        # (tiny policy weights) so early exploration is not decided by the init.
        for module in self.encoder.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(module.weight, gain=math.sqrt(2))
                nn.init.zeros_(module.bias)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            else:
                nn.init.orthogonal_(param)
        nn.init.orthogonal_(self.policy.weight, gain=0.01)
        nn.init.zeros_(self.policy.bias)
        nn.init.orthogonal_(self.value.weight, gain=1.0)
        nn.init.zeros_(self.value.bias)

    def initial_state(self, batch_size: int = 1, device=None) -> State:
        device = device if device is not None else self.policy.weight.device
        zeros = torch.zeros(batch_size, self.hidden_size, device=device)
        return zeros, zeros.clone()

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        """Features for a batch of observations (uint8 frames are scaled to [0, 1] here)."""
        if self.is_image:
            return self.encoder(self.image_input(obs))
        return self.encoder(obs.float())

    def image_input(self, obs: torch.Tensor) -> torch.Tensor:
        """What the conv trunk sees of a batch of frames (B, H, W): (B, 1, H, W) floats."""
        x = obs.float().div_(255.0) if obs.dtype == torch.uint8 else obs.float()
        if self.centre_frames:
            x = x - x.mean(dim=(-2, -1), keepdim=True)
        return x.unsqueeze(1)

    def heads(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy(hidden), self.value(hidden).squeeze(-1)

    def forward(self, obs: torch.Tensor, state: State):
        h, c = self.lstm(self.encode(obs), state)
        logits, value = self.heads(h)
        return logits, value, (h, c)

    def forward_sequence(self, obs: torch.Tensor, state: State, episode_starts: torch.Tensor):
        """One pass over a rollout of T steps of K envs: obs (T, K, *obs_shape), state (K, H) each.

        `episode_starts[t, k]` is True where env k's LSTM state must be zeroed before step t (a
        new episode began). Gives the same outputs as T calls of `forward` on the K envs, with the
        encoder batched over all T*K frames, which is where most of the network time goes.
        Returns logits (T, K, A), values (T, K) and the final state.
        """
        T, K = episode_starts.shape
        features = self.encode(obs.reshape(T * K, *self.obs_shape)).view(T, K, -1)
        starts = episode_starts.tolist()
        # The LSTM runs fused over each stretch of steps in which no env starts a new episode
        # (torch.lstm is what nn.LSTM calls, here with the cell's own weights: the gate layout is
        # the same); at a stretch's first step the starting envs' rows of the state are zeroed.
        # A Python loop of LSTMCell calls would make the backward build one weight gradient per step.
        bounds = [0] + [t for t in range(1, T) if any(starts[t])] + [T]
        weights = [self.lstm.weight_ih, self.lstm.weight_hh, self.lstm.bias_ih, self.lstm.bias_hh]
        h, c = state
        hiddens = []
        for begin, end in zip(bounds[:-1], bounds[1:]):
            if any(starts[begin]):
                keep = (~episode_starts[begin]).to(h.dtype).unsqueeze(1)
                h, c = h * keep, c * keep
            out, h, c = torch.lstm(features[begin:end], (h.unsqueeze(0), c.unsqueeze(0)), weights, True, 1, 0.0, True, False, False)
            hiddens.append(out)
            h, c = h.squeeze(0), c.squeeze(0)
        logits, values = self.heads(torch.cat(hiddens))
        return logits, values, (h, c)


def sample_action(logits: torch.Tensor, greedy: bool = False) -> torch.Tensor:
    if greedy:
        return logits.argmax(dim=-1)
    # Gumbel-max: argmax(logits + Gumbel noise) is a sample of softmax(logits), and costs less
    # than torch.multinomial inside the acting loop.
    return (logits - torch.empty_like(logits).exponential_().log()).argmax(dim=-1)
