"""python -m analysis.dead_units: the count of units that never switch on, checked on made-up weights."""

from __future__ import annotations

import torch

from a3c_torch.model import ActorCritic
from analysis import dead_units


def test_filters_negative_on_a_grey_screen_are_counted_dead_and_centring_revives_them():
    torch.manual_seed(0)
    frames = torch.full((8, 84, 84), 87, dtype=torch.uint8)  # a grey background (0.34)
    frames[:, 40:44, 40:42] = 236  # a bright ball
    for trunk, dead in (("a3c", 5), ("a3c-centred", 0)):
        model = ActorCritic((84, 84), 6, trunk=trunk)
        with torch.no_grad():
            first = model.encoder[0]
            first.weight.abs_()
            first.weight[:5] *= -1  # five filters that only ever see a negative input on these frames
        rows = dead_units.activity(model, frames)
        assert [row["units"] for row in rows] == [16, 32, 256]
        # Centred, the background is below zero and the ball above it: a negative filter fires on the background.
        assert rows[0]["never_above_zero"] == dead, (trunk, rows[0])
        assert 0 < rows[0]["share_above_zero"] < 1
