"""benchmarks/throughput_report.py: medians over interleaved repeats, and each repeat's efficiency
against its own 1-worker run."""

from __future__ import annotations

import pytest

from benchmarks.throughput_report import DEFAULT, print_report, resolve_setup, setup_name, summarise


def run(processes: int, sps: float, repeat: int, model: str | None = None, envs: int | None = None) -> dict:
    """A run of train.py's default setup, or of MODEL:ENVS."""
    setup = DEFAULT if model is None else f"{model}:{envs}"
    model, envs = resolve_setup(setup, processes)
    return {"setup": setup, "model": model, "envs_per_process": envs, "processes": processes, "sps": sps, "repeat": repeat,
            "worker_cores": float(processes), "other_load_cores": 0.0, "steps_per_worker_cpu_s": sps / processes}  # fmt: skip


def test_a_repeats_efficiency_is_taken_against_the_one_worker_run_of_the_same_repeat():
    # The machine ran 10% slower during repeat 1; each pair still scales perfectly.
    runs = [run(1, 1000, 0), run(2, 2000, 0), run(1, 900, 1), run(2, 1800, 1), run(1, 1100, 2), run(2, 2090, 2)]
    rows = {row["processes"]: row for row in summarise(runs)}
    assert rows[1]["sps"] == 1000 and rows[1]["runs"] == 3
    assert rows[2]["sps"] == 2000
    assert rows[2]["efficiency_each"] == pytest.approx([1.0, 1.0, 0.95])
    assert rows[2]["efficiency"] == pytest.approx(1.0)
    # Medians of each column apart would have said 2000 / (2 * 1000) only by luck; the pairs are what counts.
    assert rows[1]["efficiency"] == pytest.approx(1.0)


def test_setups_are_summarised_apart_and_a_single_run_is_its_own_median():
    runs = [run(1, 1000, 0), run(2, 1900, 0), run(1, 300, 0, model="universe", envs=1)]
    rows = {(row["setup"], row["processes"]): row for row in summarise(runs)}
    assert rows[(DEFAULT, 2)]["efficiency"] == pytest.approx(0.95)
    assert rows[("universe:1", 1)]["sps"] == 300
    assert len(rows) == 3
    # Runs written before setups had names are grouped by their MODEL:ENVS.
    old = [{key: value for key, value in r.items() if key != "setup"} for r in runs]
    assert {row["setup"] for row in summarise(old)} == {f"{runs[0]['model']}:{runs[0]['envs_per_process']}", "universe:1"}


def test_the_report_lists_every_run_when_repeated(capsys):
    runs = [run(1, 1000, 0), run(2, 1900, 0), run(1, 1010, 1), run(2, 1980, 1), run(1, 300, 0, model="universe", envs=1), run(1, 310, 1, model="universe", envs=1)]
    emulator = {"sps": 3000.0, "steps_per_cpu_s": 3000.0, "cpu_s": 10.0, "wall_s": 10.0}
    result = {"env_id": "ALE/Pong-v5", "settings": {"screen_size": 84, "repeat": 2}, "emulator": {"single": emulator},
              "machine": {"cpu_count": 2, "processor": "x", "python": "3.11", "loadavg_start": 0, "loadavg_end": 0},
              "classic": {"model": "universe", "sps": 250.0, "steps_per_cpu_s": 250.0}, "training": runs}  # fmt: skip
    print_report(result)
    out = capsys.readouterr().out
    assert "the median of 2 interleaved runs" in out
    assert f"{setup_name(DEFAULT, 2)} N=2: steps/s 1900 1980; efficiency 0.95 0.98" in out
    assert "scaling efficiency 0.97" in out  # the median of 0.950 and 0.980
