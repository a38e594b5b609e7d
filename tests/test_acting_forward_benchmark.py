"""python -m benchmarks.acting_forward: its variants (compile left out: tens of seconds), the
bit-for-bit column, its table, its one-line errors."""

from __future__ import annotations

import pytest

from benchmarks import acting_forward
from helpers import run_module


def test_a_tiny_measurement_of_every_quick_variant(capsys):
    rows = acting_forward.measure(2, ["eager", "packed", "trace", "transposed", "fused-gates"], "a3c-centred", rounds=2, rollouts=1)
    by_name = {row["variant"]: row for row in rows}
    assert list(by_name) == ["eager", "packed", "trace", "transposed", "fused-gates"]
    assert by_name["eager"]["ratio"] == 1.0 and all(row["us_per_step"] > 0 and row["ratio"] > 0 for row in rows)
    assert by_name["packed"]["max_abs_diff"] == 0 and by_name["trace"]["max_abs_diff"] == 0  # bit for bit
    assert 0 < by_name["transposed"]["max_abs_diff"] < 1e-4 and 0 < by_name["fused-gates"]["max_abs_diff"] < 1e-4  # other rounding
    assert all(row["same_actions"] for row in rows)
    acting_forward.print_table(rows, "eager")
    out = capsys.readouterr().out
    assert "| 2 | packed |" in out and "0 (bit for bit)" in out


@pytest.mark.parametrize("argv, words", [
    (["--variants", "eager"], "--variants needs at least two different variants"),
    (["--variants", "eager", "jit"], "--variants: invalid choice: 'jit'"),
    (["--model", "universe"], "ActingForward packs only a3c, a3c-centred"),
    (["--model", "a3c-elu", "--variants", "eager", "transposed"], "ActingForward packs only a3c, a3c-centred"),
    (["--rounds", "0"], "--rounds: must be a whole number of at least 1"),
    (["--round", "5"], "unrecognized arguments: --round"),  # no abbreviations
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    with pytest.raises(SystemExit) as caught:
        acting_forward.main(argv)
    captured = capsys.readouterr()
    assert caught.value.code == 2 and captured.err.startswith("acting_forward: error: ") and captured.err.count("\n") == 1 and words in captured.err, captured.err
    assert not captured.out


def test_help_runs_as_a_module():
    done = run_module("benchmarks.acting_forward", "--help", timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m benchmarks.acting_forward") and not done.stderr
