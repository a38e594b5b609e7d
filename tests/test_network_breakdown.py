"""python -m benchmarks.network_breakdown: the phases it times make exactly apply_update's update
(bit for bit, clipped or not, and a non-finite update skipped alike), its table, its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from a3c_torch.config import Config
from benchmarks import network_breakdown
from benchmarks.network_breakdown import PHASES, NetworkPhases, PhaseTimes
from helpers import run_module


def phases(max_grad_norm: float, envs: int = 2, seed: int = 3, packed: bool = True) -> NetworkPhases:
    cfg = Config(env_id="ALE/Pong-v5", screen_size=42, model="a3c-centred", envs_per_process=envs, num_steps=5, max_grad_norm=max_grad_norm)
    frames = np.random.default_rng(seed).integers(0, 256, (cfg.num_steps, envs, 42, 42), dtype=np.uint8)
    return NetworkPhases(cfg, 6, frames, seed, packed)


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().view(torch.int32)  # bit for bit, nan included


def same_update(a: NetworkPhases, b: NetworkPhases) -> None:
    for pa, pb in zip(a.shared.parameters(), b.shared.parameters()):
        assert torch.equal(bits(pa), bits(pb))
    for pa, pb in zip(a.shared.parameters(), b.shared.parameters()):
        for key, value in a.optimizer.state[pa].items():
            assert torch.equal(bits(value), bits(b.optimizer.state[pb][key])), key


@pytest.mark.parametrize("max_grad_norm", [40.0, 1e-3])  # 1e-3: every update is clipped
@pytest.mark.parametrize("packed", [True, False])
def test_the_timed_phases_update_the_shared_model_as_apply_update_does(max_grad_norm, packed):
    timed, reference = phases(max_grad_norm, packed=packed), phases(max_grad_norm, packed=packed)
    assert timed.acting.packed is packed
    same_update(timed, reference)  # the same start
    times = PhaseTimes()
    for _ in range(3):
        torch.manual_seed(11)  # the same sampled actions in both
        applied_timed, norm_timed = timed.rollout(times)
        torch.manual_seed(11)
        applied_reference, norm_reference = reference.rollout()
        assert applied_timed and applied_reference and norm_timed == norm_reference
        if max_grad_norm < 1:
            assert norm_timed > max_grad_norm
        same_update(timed, reference)
    assert times.rollouts == 3 and times.steps == 3 * 5 * 2
    assert all(times.wall[phase] > 0 for phase in PHASES)
    assert any(not torch.equal(p, q) for p, q in zip(timed.shared.parameters(), phases(max_grad_norm).shared.parameters()))  # it did update


def test_a_non_finite_update_is_skipped_by_both():
    timed, reference = phases(40.0), phases(40.0)
    for net in (timed, reference):
        with torch.no_grad():
            net.shared.value.bias.fill_(float("nan"))
    times = PhaseTimes()
    assert not timed.rollout(times)[0] and not reference.rollout()[0]
    assert times.wall["hand-off"] == times.wall["step"] == 0
    same_update(timed, reference)


def test_the_table_has_a_row_per_k_and_acting_forward_and_every_phase(capsys):
    rows = network_breakdown.measure("ALE/Pong-v5", [1, 2], "a3c-centred", seconds=0.2, warmup=0.1, acting=("packed", "eager"))
    assert [(row["envs_per_process"], row["acting"]) for row in rows] == [(1, "packed"), (1, "eager"), (2, "packed"), (2, "eager")]
    for row in rows:
        assert set(row["us_per_step"]) == set(PHASES) and all(v > 0 for v in row["us_per_step"].values())
        assert row["total_us"] == pytest.approx(sum(row["us_per_step"].values()))
        assert 0 < row["network_share"] < 1 and row["rollouts"] >= 1
    network_breakdown.print_table(rows)
    out = capsys.readouterr().out
    assert "| K | acting | copy | act | loss | backward | clip | hand-off | step | total |" in out and "\n| 2 | eager | " in out


@pytest.mark.parametrize("argv, words", [
    (["--envs", "0"], "--envs: must be a whole number of at least 1"),
    (["--seconds", "-1"], "--seconds: must be a number of seconds above 0"),
    (["--model", "big"], "--model: invalid choice"),
    (["--acting", "compiled"], "--acting: invalid choice"),
    (["--env-id", "CartPole-v1"], "--env-id must be an Atari game with a screen"),
    (["--env-id", "Foo"], "unknown env id 'Foo'"),
    (["--second", "5"], "unrecognized arguments: --second"),  # no abbreviations
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as caught:
        network_breakdown.main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2 and err.startswith("network_breakdown: error: ") and err.count("\n") == 1 and words in err, err


def test_help_runs_as_a_module():
    done = run_module("benchmarks.network_breakdown", "--help", timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m benchmarks.network_breakdown") and not done.stderr
    assert "--envs K [K ...]" in done.stdout


def test_the_packed_acting_forward_makes_the_same_updates_as_the_eager_one():
    packed, eager = phases(40.0, packed=True), phases(40.0, packed=False)
    for _ in range(3):
        torch.manual_seed(12)
        packed.rollout()
        torch.manual_seed(12)
        eager.rollout()
        same_update(packed, eager)
