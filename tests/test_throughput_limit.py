"""benchmarks/limit.py and its use in benchmarks/throughput.py: the fraction of the limit, the
`default` setup (train.py's own model and K for each worker count), the warning when the limit's
process was starved, and a real (tiny) measurement."""

from __future__ import annotations

import json

import pytest

from a3c_torch.config import Config, parse_args
from benchmarks.limit import fraction_of_limit, limit_sps, measure_in_child, starved
from benchmarks.throughput import START_LINE, build_parser
from benchmarks.throughput_report import DEFAULT, check_setup, print_report, resolve_setup, row_fraction, setup_name


def limit(t_ale: float = 300.0, t_net: float = 200.0, cpu_share: float = 0.98, model: str = Config.model, envs: int = 4) -> dict:
    return {"model": model, "envs_per_process": envs, "t_ale_us": t_ale, "t_net_us": t_net, "t_act_us": t_net / 2, "t_update_us": t_net / 2,
            "limit_sps_per_core": 1e6 / (t_ale + t_net), "cpu_share": cpu_share}  # fmt: skip


def run(processes: int, sps: float, setup: str = DEFAULT) -> dict:
    model, envs = resolve_setup(setup, processes)
    return {"setup": setup, "model": model, "envs_per_process": envs, "processes": processes, "sps": sps, "repeat": 0,
            "worker_cores": float(processes), "other_load_cores": 0.0, "steps_per_worker_cpu_s": sps / processes}  # fmt: skip


def result(runs: list[dict], limits: list[dict], cpus: int = 2) -> dict:
    emulator = {"sps": 3000.0, "steps_per_cpu_s": 3000.0, "cpu_s": 10.0, "wall_s": 10.0}
    return {"env_id": "ALE/Pong-v5", "settings": {"screen_size": 84, "repeat": 1}, "emulator": {"single": emulator}, "limit": limits,
            "machine": {"cpu_count": cpus, "processor": "x", "python": "3.11", "loadavg_start": 0, "loadavg_end": 0}, "training": runs}  # fmt: skip


# --- the arithmetic ------------------------------------------------------------------------------
def test_the_limit_is_one_step_per_ale_plus_network_time_on_each_core_a_worker_can_have():
    assert limit_sps(1, 2, 300.0, 200.0) == pytest.approx(2000.0)  # 1e6 us / 500 us
    assert limit_sps(2, 2, 300.0, 200.0) == pytest.approx(4000.0)
    assert limit_sps(8, 2, 300.0, 200.0) == pytest.approx(4000.0)  # 8 workers on 2 cores: still 2 cores
    assert fraction_of_limit(1000.0, 1, 2, 300.0, 200.0) == pytest.approx(0.5)
    assert fraction_of_limit(3000.0, 8, 2, 300.0, 200.0) == pytest.approx(0.75)


def test_a_rows_fraction_uses_the_limit_of_its_own_model_and_k():
    limits = [limit(300.0, 200.0, envs=4), limit(300.0, 700.0, model="universe", envs=1)]
    res = result([], limits)
    assert row_fraction(res, run(1, 1000.0)) == pytest.approx(0.5)  # a3c-centred:4, 2,000 steps/s per core
    assert row_fraction(res, run(2, 500.0, "universe:1")) == pytest.approx(0.25)  # 2 cores x 1,000 steps/s
    assert row_fraction(res, run(1, 1000.0, "a3c:8")) is None  # no limit measured for it


# --- the default setup -------------------------------------------------------------------------
@pytest.mark.parametrize("processes, envs", [(1, 4), (2, 4), (3, 3), (4, 2), (5, 1), (8, 1), (16, 1)])
def test_the_default_setup_is_what_train_py_resolves_for_each_worker_count(processes, envs):
    cfg, _ = parse_args(["--num-processes", str(processes)])  # train.py with neither --model nor --envs-per-process
    assert resolve_setup(DEFAULT, processes) == (cfg.model, cfg.envs_per_process) == (Config.model, envs)
    assert setup_name(DEFAULT, processes) == f"default ({Config.model}:{envs})"


def test_the_trainers_start_line_gives_the_k_it_trains_with():
    # The line as a3c_torch/trainer.py prints it: " x K envs" only for K > 1, no model for vectors.
    assert START_LINE.match(f"training ALE/Pong-v5 (model {Config.model}) with 2 worker processes x 4 envs, up to 1,000 steps").groups() == (Config.model, "4")
    assert START_LINE.match("training ALE/Pong-v5 (model universe) with 1 worker process, up to 1,000 steps").groups() == ("universe", None)
    assert START_LINE.match("training CartPole-v1 with 3 worker processes x 2 envs and an evaluator on cpu, up to 9 steps").groups() == (None, "2")


def test_setups_are_default_or_model_colon_envs_and_the_default_list_starts_with_train_pys_own():
    assert check_setup("default") == DEFAULT
    assert check_setup("a3c:04") == "a3c:4"
    for bad in ("a3c", "a3c:0", "nope:4", "default:4", "universe:x"):
        with pytest.raises(ValueError):
            check_setup(bad)
    assert build_parser().parse_args([]).setups == [DEFAULT, "universe:1"]
    assert build_parser().parse_args(["--setups", "default", "a3c:8"]).setups == [DEFAULT, "a3c:8"]
    # A MODEL:ENVS equal to the default with that N is starred; with more workers the default's K is smaller.
    assert setup_name(f"{Config.model}:4", 1).endswith(" *")
    assert not setup_name(f"{Config.model}:4", 8).endswith("*")


# --- the report --------------------------------------------------------------------------------
def test_the_report_gives_the_fraction_of_the_limit_and_speaks_of_the_default_setup(capsys):
    print_report(result([run(1, 1000.0), run(2, 1800.0), run(1, 300.0, "universe:1")], [limit(), limit(300.0, 700.0, model="universe", envs=1)]))
    out = capsys.readouterr().out
    assert "WARNING" not in out
    assert f"With 2 workers (default ({Config.model}:4)): 1,800 steps/s" in out
    assert "0.45 of the limit" in out  # 1,800 / (2 x 2,000)
    table = [line.split() for line in out.splitlines() if line.lstrip().startswith("default (")]
    assert [row[:7] for row in table] == [["default", f"({Config.model}:4)", "1", "1000", "1000", "0.33", "0.50"],
                                          ["default", f"({Config.model}:4)", "2", "1800", "900", "0.30", "0.45"]]  # fmt: skip


def test_the_report_warns_when_the_limits_process_had_less_than_nine_tenths_of_a_core(capsys):
    assert starved(limit(cpu_share=0.85)) and not starved(limit(cpu_share=0.9))
    print_report(result([run(1, 1000.0)], [limit(cpu_share=0.6)]))
    out = capsys.readouterr().out
    assert "WARNING: the limit's measuring process got less than 0.9 of a core" in out
    assert "fractions of the limit are too high" in out
    assert "The limit was measured with 0.60 of a core" in out


# --- a real measurement ------------------------------------------------------------------------
def test_a_tiny_real_measurement_in_a_spawned_process_with_one_thread():
    lim = measure_in_child("ALE/Pong-v5", 84, "a3c", 1, 0.3, 0.1)
    json.dumps(lim)  # goes into the JSON output as it is
    assert (lim["model"], lim["envs_per_process"], lim["num_steps"]) == ("a3c", 1, Config.num_steps)
    assert lim["torch_threads"] == 1 and lim["omp_num_threads"] == "1"
    assert lim["ale_steps"] > 0 and lim["rollouts"] > 0
    assert lim["t_ale_us"] > 0 and lim["t_act_us"] > 0 and lim["t_update_us"] > 0
    assert lim["t_net_us"] == pytest.approx(lim["t_act_us"] + lim["t_update_us"])
    assert lim["limit_sps_per_core"] == pytest.approx(1e6 / (lim["t_ale_us"] + lim["t_net_us"]))
    assert 0 < lim["cpu_share"] <= 1.05
