"""rank(): instance x node-count ranking, constraints, Pareto front, energy, CLI.

Most tests replace the plan search with a small stand-in whose step-time breakdown is known, so
they check rank's own arithmetic (cost, spot, energy, constraints, sorting) independently of the
performance model; one test runs the real search end to end.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import perfmodel.ranking as rank_module
from perfmodel import cost, load_catalog
from perfmodel.chain import STEP_SHARES
from perfmodel.cli import main
from perfmodel.profile import CalibrationProfile
from perfmodel.ranking import pareto_front, rank

GLOBAL_BATCH = 512
TOKENS = 2048 * GLOBAL_BATCH * 1000  # 1000 steps of gpt3-175b (2048 tokens per sample)
BUSY = ("forward", "backward", "recompute")


def _instance(name, price, spot=None, nics=4, nic="efa", gpu="A100-SXM4-80GB"):
    entry = {"name": name, "provider": "test", "gpu": gpu, "gpus_per_node": 8,
             "intra": "nvlink3", "fabric": "nvswitch", "nics": nics, "nic": nic,
             "price_on_demand_usd_per_hour": price, "price_as_of": "2025-06-01", "source": "test fixture"}
    if spot is not None:
        entry["price_spot_usd_per_hour"] = {"min": spot[0], "max": spot[1]}
    return entry


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    path = tmp_path_factory.mktemp("catalog") / "extra.yaml"
    path.write_text(yaml.safe_dump({"instances": [
        _instance("fast", 30.0, spot=(8.0, 12.0)),
        _instance("twin", 25.0),  # the same hardware as 'fast' at another price
        _instance("cheap", 20.0, nics=2),
        _instance("lonely", 10.0, nics=0, nic=None),
        _instance("tiny", 5.0, spot=(1.0, 2.0), gpu="A100-SXM4-40GB"),
        _instance("deal", 30.0, spot=(2.0, 4.0)),  # spot 90 % below on-demand: flagged
    ]}))
    return load_catalog(path, include_env=False)


def breakdown_of(instance: str, num_gpus: int) -> dict[str, float]:
    """The stand-in's step breakdown: compute shrinks with GPUs, 'cheap' computes 1.5x slower."""
    slow = 1.5 if instance.endswith("cheap") else 1.0
    return {"forward": 4000.0 * slow / num_gpus, "backward": 8000.0 * slow / num_gpus, "recompute": 0.0,
            "dp_comm": 0.02 * np.log2(num_gpus + 1), "overhead": 0.01}


def fake_plan_row(scenario, catalog=None, profile=None):
    instance, nodes = scenario.hardware.instance, scenario.hardware.nodes
    num_gpus = 8 * nodes
    if instance.endswith("tiny"):
        return None, "no feasible plan: does not fit in GPU memory (90.1 GB needed of 40.0 GB)"
    parts = breakdown_of(instance, num_gpus)
    step = sum(parts.values())
    flops = 2204412785197056.0 * GLOBAL_BATCH  # gpt3-175b training FLOPs per sample x batch
    row = {"tp": 8, "pp": max(1, nodes // 2), "dp": max(1, num_gpus // (8 * max(1, nodes // 2))), "cp": 1,
           "vp": 1, "micro_batch": 1, "global_batch": GLOBAL_BATCH, "recompute": "selective", "zero": 1,
           "step_time_s": step, **{f"{k}_s": v for k, v in parts.items()},
           "samples_per_s": GLOBAL_BATCH / step, "tokens_per_s": GLOBAL_BATCH * 2048 / step,
           "tflops_per_gpu": flops / step / num_gpus / 1e12, "mfu": 0.4,
           "gpu_utilization": sum(parts[k] for k in BUSY) / step, "precision": "bf16", "fits": True,
           "host_log_sensitivity": 0.0, "attention_log_sensitivity": 0.0,
           **{f"share_{group}": sum(parts.get(part, 0.0) for part in members) / step
              for group, members in STEP_SHARES.items()}}
    return pd.Series(row), ""


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setattr(rank_module, "_plan_row", fake_plan_row)


def scenario(run=True, **run_fields):
    data = {"workload": {"model": "gpt3-175b"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8},
            "plan": {"global_batch": GLOBAL_BATCH}}
    if run:
        data["run"] = {"train_tokens": TOKENS, **run_fields}
    return data


INSTANCES = ["test/fast", "test/cheap", "test/lonely", "test/tiny"]
PROFILE = CalibrationProfile()


def test_on_demand_cost_is_time_times_price_times_nodes(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=INSTANCES, max_nodes=8)
    rows = frame[frame["feasible"]]
    assert len(rows) == 9  # fast and cheap at 1/2/4/8 nodes, lonely at 1 node
    for _, row in rows.iterrows():
        price = catalog.instance(row["instance"]).price_on_demand_usd_per_hour
        steps = TOKENS / 2048 / GLOBAL_BATCH
        assert row["time_to_train_s"] == pytest.approx(steps * row["step_time_s"])
        assert row["cost_usd"] == pytest.approx(row["time_to_train_s"] / 3600 * price * row["nodes"])
        assert row["price_usd_per_hour"] == pytest.approx(price * row["nodes"])
        assert row["gpu_hours"] == pytest.approx(row["time_to_train_s"] * row["num_gpus"] / 3600)
        assert row["basis"] == "run"


def test_spot_rows_cost_at_least_the_naive_spot_price(stub, catalog):
    frame = rank(scenario(checkpoint_write="120 s"), catalog, PROFILE, instances=["test/fast"],
                 pricing=["on_demand", "spot"], max_nodes=16)
    spot = frame[frame["pricing"] == "spot"]
    assert spot["feasible"].all()
    for _, row in spot.iterrows():
        naive = cost.cost_usd(row["ideal_time_s"], 10.0, row["nodes"])  # spot = mean of 8..12
        assert row["cost_usd"] >= naive
        assert row["time_to_train_s"] > row["ideal_time_s"]
        assert row["checkpoint_time_s"] == 120.0
        assert row["interruptions_per_hour"] == pytest.approx(PROFILE.get("spot_interruptions_per_hour_other"))


def test_spot_rate_from_scenario_and_override(stub, catalog):
    from_scenario = rank(scenario(interruptions_per_hour=0.01, checkpoint_write="60 s"), catalog, PROFILE,
                         instances=["test/fast"], nodes=[4], pricing="spot")
    assert from_scenario.loc[0, "interruptions_per_hour"] == 0.01
    overridden = rank(scenario(interruptions_per_hour=0.01, checkpoint_write="60 s"), catalog, PROFILE,
                      instances=["test/fast"], nodes=[4], pricing="spot", interruptions_per_hour=0.0)
    assert overridden.loc[0, "time_to_train_s"] == pytest.approx(overridden.loc[0, "ideal_time_s"])


def test_missing_price_is_an_infeasible_row_with_the_reason(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/cheap"], nodes=[1], pricing="spot")
    assert not frame.loc[0, "feasible"]
    assert "no spot price" in frame.loc[0, "reasons"]


def test_pricing_defaults_to_the_scenarios_run_pricing(stub, catalog):
    frame = rank(scenario(pricing="spot"), catalog, PROFILE, instances=["test/fast"], nodes=[1])
    assert list(frame["pricing"]) == ["spot"]


@pytest.mark.parametrize("deadline, budget", [(30 * 3600.0, None), (None, 10_000.0), ("30h", 10_000.0)])
def test_constraints_never_admit_a_violating_row(stub, catalog, deadline, budget):
    frame = rank(scenario(), catalog, PROFILE, instances=INSTANCES, max_nodes=32, deadline=deadline,
                 budget=budget, pricing=["on_demand", "spot"])
    rows = frame[frame["feasible"]]
    assert len(rows) > 0
    if deadline is not None:
        assert (rows["time_to_train_s"] <= 30 * 3600.0).all()
    if budget is not None:
        assert (rows["cost_usd"] <= budget).all()
    excluded = frame[~frame["feasible"] & frame["reasons"].str.contains("deadline|budget")]
    assert len(excluded) > 0
    assert not excluded["pareto"].any()


def test_pareto_marks_exactly_the_non_dominated_feasible_rows(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=INSTANCES, max_nodes=64, pricing=["on_demand", "spot"])
    rows = frame[frame["feasible"]]
    points = list(zip(rows["time_to_train_s"], rows["cost_usd"]))
    for (t, c), marked in zip(points, rows["pareto"]):
        dominated = any(t2 <= t and c2 <= c and (t2 < t or c2 < c) for t2, c2 in points)
        assert marked == (not dominated)
    assert not frame.loc[~frame["feasible"], "pareto"].any()


finite = st.floats(0.0, 1e6, allow_nan=False)


@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=40))
def test_pareto_front_is_the_non_dominated_set(points):
    time, cost_ = (np.array(values) for values in zip(*points))
    front = pareto_front(time, cost_)
    for i in range(len(points)):
        dominated = np.any((time <= time[i]) & (cost_ <= cost_[i]) & ((time < time[i]) | (cost_ < cost_[i])))
        assert front[i] == (not dominated)
    best_time = np.flatnonzero(time == time.min())
    assert front[best_time[np.argmin(cost_[best_time])]]  # the fastest (cheapest among ties) is always on it


def test_pareto_front_ignores_nan_and_checks_shapes():
    assert list(pareto_front([1.0, np.nan, 2.0], [2.0, 0.0, 1.0])) == [True, False, True]
    with pytest.raises(ValueError, match="1-D"):
        pareto_front([1.0, 2.0], [1.0])


def test_energy_is_the_integral_of_power_over_the_breakdown(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast"], nodes=[2, 4])
    tdp, idle = 400.0, 400.0 * PROFILE.get("gpu_idle_fraction")
    host, pue = PROFILE.get("host_power_per_node"), PROFILE.get("pue")
    steps = TOKENS / 2048 / GLOBAL_BATCH
    for _, row in frame.iterrows():
        parts = breakdown_of("test/fast", row["num_gpus"])
        step = sum(parts.values())
        gpu_joules = sum((tdp if name in BUSY else idle) * seconds for name, seconds in parts.items())
        step_joules = row["num_gpus"] * gpu_joules + row["nodes"] * host * step
        assert row["energy_kwh"] == pytest.approx(steps * step_joules * pue / 3.6e6)


def test_flops_per_watt_uses_achieved_flops(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast"], nodes=[1, 8])
    for _, row in frame.iterrows():
        achieved = row["tflops_per_gpu"] * 1e12 * row["num_gpus"]
        assert row["flops_per_watt"] == pytest.approx(achieved / row["power_w"])
        assert row["flops_per_watt"] < 312e12 * row["num_gpus"] / row["power_w"]
        assert row["perf_per_dollar"] == pytest.approx(achieved / 1e12 / row["price_usd_per_hour"])
        assert row["peak_tflops_per_dollar_hour"] == pytest.approx(312 * row["num_gpus"] / row["price_usd_per_hour"])
        assert row["tokens_per_dollar"] == pytest.approx(row["tokens_per_s"] * 3600 / row["price_usd_per_hour"])


def test_co2_from_grid_intensity(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast"], nodes=[1], grid_g_per_kwh=400.0)
    assert frame.loc[0, "co2_kg"] == pytest.approx(frame.loc[0, "energy_kwh"] * 0.4)


@pytest.mark.parametrize("objective, column, ascending", [
    ("cost", "cost_usd", True), ("time", "time_to_train_s", True), ("energy", "energy_kwh", True),
    ("perf_per_dollar", "perf_per_dollar", False), ("flops_per_watt", "flops_per_watt", False)])
def test_sorted_by_objective_feasible_first(stub, catalog, objective, column, ascending):
    frame = rank(scenario(), catalog, PROFILE, instances=INSTANCES, max_nodes=16, objective=objective)
    feasible = frame["feasible"].to_numpy()
    assert not np.any(~feasible[:-1] & feasible[1:])  # no feasible row after an infeasible one
    values = frame.loc[frame["feasible"], column].to_numpy()
    assert np.all(np.diff(values) >= 0) if ascending else np.all(np.diff(values) <= 0)


def test_infeasible_candidates_carry_their_reasons(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/tiny", "test/lonely"], nodes=[1, 2])
    tiny = frame[frame["instance"] == "test/tiny"]
    assert not tiny["feasible"].any()
    assert tiny["reasons"].str.contains("does not fit in GPU memory").all()
    lonely = frame[(frame["instance"] == "test/lonely") & (frame["nodes"] == 2)]
    assert "no inter-node network" in lonely.iloc[0]["reasons"]


def test_nothing_runs_anywhere_is_an_answer_not_an_exception(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/tiny"], max_nodes=4, deadline="1 s")
    assert len(frame) == 3 and not frame["feasible"].any() and not frame["pareto"].any()
    assert (frame["reasons"].str.len() > 0).all()


def test_impossible_deadline_marks_everything_infeasible(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast"], max_nodes=4, deadline=1.0)
    assert not frame["feasible"].any()
    assert frame["reasons"].str.contains("exceeds the deadline").all()


def test_without_a_run_section_times_and_costs_are_per_step(stub, catalog):
    frame = rank(scenario(run=False), catalog, PROFILE, instances=["test/fast"], nodes=[2])
    row = frame.iloc[0]
    assert row["basis"] == "step" and frame.attrs["basis"] == "step"
    assert row["time_to_train_s"] == pytest.approx(row["step_time_s"])
    assert row["cost_usd"] == pytest.approx(row["step_time_s"] / 3600 * 30.0 * 2)
    with pytest.raises(ValueError, match="run section"):
        rank(scenario(run=False), catalog, PROFILE, instances=["test/fast"], nodes=[2], budget=100)


def test_search_runs_once_per_distinct_hardware(monkeypatch, catalog):
    calls = []

    def counting(scenario, catalog=None, profile=None):
        calls.append(scenario.hardware.instance)
        return fake_plan_row(scenario, catalog, profile)

    monkeypatch.setattr(rank_module, "_plan_row", counting)
    # fast and twin share GPU, fabric and network: the search runs for the first only
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast", "test/twin"], nodes=[1, 2],
                 pricing=["on_demand", "spot"])
    assert calls == ["test/fast", "test/fast"] and len(frame) == 8
    twin = frame[(frame["instance"] == "test/twin") & (frame["pricing"] == "on_demand")]
    assert (twin["cost_usd"] == twin["time_to_train_s"] / 3600 * 25.0 * twin["nodes"]).all()


@pytest.mark.parametrize("kwargs, message", [
    ({"objective": "speed"}, "allowed: time, cost, perf_per_dollar, flops_per_watt, energy"),
    ({"pricing": "free"}, "allowed: on_demand, spot, reserved_1y, reserved_3y"),
    ({"max_nodes": 0}, "max_nodes"),
    ({"nodes": [0, 2]}, "nodes"),
    ({"deadline": -5}, "deadline"),
    ({"instances": ["aws/no-such-instance"]}, "not in the catalog"),
])
def test_bad_arguments_raise_clear_errors(stub, catalog, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rank(scenario(), catalog, PROFILE, **kwargs)


@pytest.fixture
def rank_cli(monkeypatch):
    """The CLI with only the rank command registered (the other commands are tested elsewhere)."""
    monkeypatch.setattr("perfmodel.cli.COMMANDS", ("rank",))


def test_cli_json_csv_and_plot(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    figure = tmp_path / "pareto.png"
    code = main(["rank", str(path), "--instances", "test/fast,test/cheap", "--max-nodes", "4",
                 "--pricing", "on_demand,spot", "--deadline", "14d", "--json", "-o", str(figure)])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    keys = {"instance", "nodes", "num_gpus", "pricing", "plan", "feasible", "reasons", "step_time_s",
            "time_to_train_s", "price_usd_per_hour", "cost_usd", "perf_per_dollar", "flops_per_watt",
            "energy_kwh", "pareto", "tokens_per_dollar", "samples_per_dollar", "peak_tflops_per_dollar_hour",
            "gpu_hours"}
    assert keys <= set(data["rows"][0])
    assert data["rows"][0]["plan"].startswith("TP8 PP")
    assert figure.stat().st_size > 0
    assert main(["rank", str(path), "--instances", "test/fast", "--nodes", "1,2", "--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("instance,") and len(lines) == 3


def test_cli_bad_objective_exits_2(rank_cli, tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--objective", "speed"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_rank_with_the_real_search_end_to_end():
    catalog = load_catalog()
    frame = rank({"workload": {"model": "gpt3-1.3b"}, "hardware": {"gpu": "A100-SXM4-80GB"},
                  "run": {"train_tokens": 26e9}}, catalog,
                 instances=["aws/p4de.24xlarge", "lambda/gpu_8x_h100_sxm5"], nodes=[1, 2],
                 pricing=["on_demand", "spot"])
    assert frame["feasible"].any()
    p4de = frame[(frame["instance"] == "aws/p4de.24xlarge") & frame["feasible"]]
    for _, row in p4de[p4de["pricing"] == "on_demand"].iterrows():
        assert row["cost_usd"] == pytest.approx(row["time_to_train_s"] / 3600 * 27.44705 * row["nodes"])
    lambda_spot = frame[(frame["instance"] == "lambda/gpu_8x_h100_sxm5") & (frame["pricing"] == "spot")]
    assert not lambda_spot["feasible"].any()  # Lambda sells no spot capacity
    assert math.isfinite(frame.loc[frame["feasible"], "energy_kwh"].min())


def test_cli_table_and_library_errors(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--instances", "test/fast,test/tiny", "--max-nodes", "2", "--all"]) == 0
    out = capsys.readouterr().out
    assert "4 candidates, 2 feasible" in out and "does not fit in GPU memory" in out
    assert main(["rank", str(path), "--instances", "test/fast", "--pricing", "free"]) == 2
    assert "pricing 'free' is unknown" in capsys.readouterr().err


# --- rank as a decision (issue 17) ----------------------------------------------------------------

import re  # noqa: E402

from perfmodel.ranking import answers, closest, plan_label  # noqa: E402


@pytest.mark.parametrize("row, text", [
    ({"tp": 8, "pp": 16, "dp": 8, "cp": 1, "vp": 1, "micro_batch": 1, "recompute": "selective", "zero": 1},
     "TP8 PP16 DP8, selective recompute, ZeRO-1"),
    ({"tp": 1, "pp": 8, "dp": 4, "cp": 2, "vp": 4, "micro_batch": 2, "recompute": "none", "zero": 0},
     "TP1 PP8 DP4 CP2 VP4 mb2"),
])
def test_plan_label_reads_like_a_practitioner_writes_it(row, text):
    assert plan_label(row) == text


def test_deadline_and_budget_need_units(stub, catalog):
    with pytest.raises(ValueError, match="deadline '14' has no unit"):
        rank(scenario(), catalog, PROFILE, instances=["test/fast"], deadline="14")
    with pytest.raises(ValueError, match="budget '20000' has no currency"):
        rank(scenario(), catalog, PROFILE, instances=["test/fast"], budget="20000")
    with pytest.raises(ValueError, match="deadline"):
        rank(scenario(), catalog, PROFILE, instances=["test/fast"], deadline=float("inf"))


def test_missed_deadline_and_budget_come_first_with_how_far(stub, catalog):
    free = rank(scenario(), catalog, PROFILE, instances=["test/fast"], nodes=[1])
    time_s, cost_usd = free.loc[0, "time_to_train_s"], free.loc[0, "cost_usd"]
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast"], nodes=[1],
                 deadline=f"{time_s / 2 / 3600:.6f}h", budget=f"${cost_usd / 4:.2f}")
    row = frame.iloc[0]
    assert not row["feasible"]
    assert row["reasons"].startswith("time to train") and "exceeds the deadline" in row["reasons"]
    assert "exceeds the budget" in row["reasons"]
    assert row["deadline_ratio"] == pytest.approx(2.0, rel=1e-5)
    assert row["budget_ratio"] == pytest.approx(4.0, rel=1e-5)
    assert list(closest(frame, 3).index) == [0]


def test_closest_orders_by_how_far_they_miss(stub, catalog):
    frame = rank(scenario(), catalog, PROFILE, instances=["test/fast", "test/cheap"], max_nodes=8, deadline="1h")
    near = closest(frame, 20)
    misses = near["deadline_ratio"].dropna().to_numpy()
    assert len(misses) and np.all(np.diff(misses) >= 0) and np.all(misses > 1)


def test_answers_pick_the_cheapest_fastest_and_best_value_among_trusted_rows(stub, catalog):
    frame = rank(scenario(checkpoint_write="60 s"), catalog, PROFILE,
                 instances=["test/fast", "test/cheap", "test/deal"], max_nodes=8, pricing=["on_demand", "spot"],
                 deadline="30d")
    chosen = dict(answers(frame))
    trusted = frame[frame["feasible"] & (frame["flags"] == "")]
    assert chosen["cheapest within 30.0 d"] == trusted["cost_usd"].idxmin()
    assert chosen["fastest within 30.0 d"] == trusted["time_to_train_s"].idxmin()
    assert chosen["best performance per dollar"] == trusted["perf_per_dollar"].idxmax()
    flagged = frame[frame["flags"] != ""]
    assert set(flagged["instance"]) == {"test/deal"} and (flagged["pricing"] == "spot").all()
    assert (flagged["spot_discount"] > 0.8).all()
    # the flagged deal is cheaper: it is shown apart, never as the plain answer
    assert frame.loc[chosen["cheapest within 30.0 d if its flagged spot price holds"], "instance"] == "test/deal"


def test_spot_clusters_too_large_to_hold_are_not_offered(stub, catalog):
    frame = rank(scenario(checkpoint_write="60 s"), catalog, PROFILE, instances=["test/fast"], nodes=[1, 16, 64],
                 pricing="spot")
    by_nodes = frame.set_index("nodes")
    assert by_nodes.loc[1, "hold_probability"] == 1.0 and by_nodes.loc[1, "feasible"]
    assert by_nodes.loc[16, "hold_probability"] == pytest.approx(math.exp(-15 / 16))
    assert not by_nodes.loc[64, "feasible"] and "unlikely" in by_nodes.loc[64, "reasons"]
    row = by_nodes.loc[16]
    assert row["cost_usd"] <= row["cost_usd_at_2x_rate"] <= row["cost_usd_at_5x_rate"]


def test_pricings_without_any_catalog_price_are_refused(stub, catalog):
    with pytest.raises(ValueError, match="no instance in the catalog has a reserved_1y price"):
        rank(scenario(), catalog, PROFILE, instances=["test/fast"], pricing="reserved_1y")


@pytest.mark.parametrize("argv, words", [
    (["--deadline", "14"], "deadline '14' has no unit"),
    (["--budget", "20000"], "budget '20000' has no currency"),
    (["--interruptions-per-hour", "inf"], "--interruptions-per-hour 'inf' is out of range"),
    (["--interruptions-per-hour", "nan"], "--interruptions-per-hour 'nan' is out of range"),
    (["--nodes", "1e20"], "--nodes '1e20' is out of range"),
    (["--nodes", "2.5"], "--nodes '2.5' is out of range"),
    (["--max-nodes", "-4"], "--max-nodes '-4' is out of range"),
    (["--grid", "x"], "--grid 'x' is not a number"),
    (["--top", "-1"], "--top '-1' is out of range"),
])
def test_cli_bad_numbers_are_one_line_errors(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch, argv, words):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--instances", "test/fast", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_cli_output_to_a_directory_is_an_error(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--instances", "test/fast", "-o", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()


SCIENTIFIC = re.compile(r"\d\.?\d*e[+-]?\d")


def test_cli_human_output_is_a_decision_in_120_columns(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario(checkpoint_write="60 s")))
    assert main(["rank", str(path), "--instances", "test/fast,test/cheap,test/deal", "--max-nodes", "16",
                 "--pricing", "on_demand,spot", "--deadline", "30d"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].lstrip().startswith("cheapest within 30.0 d:")
    assert any(line.lstrip().startswith("fastest within 30.0 d:") for line in lines[:6])
    assert max(map(len, lines)) <= 120
    assert not SCIENTIFIC.search(out)
    assert "$" in out and " d " in out and "TP8" in out
    assert "If interruptions come 2x / 5x as often" in out and "spot price 90% below on-demand" in out
    assert main(["rank", str(path), "--instances", "test/fast,test/deal", "--max-nodes", "16",
                 "--pricing", "on_demand,spot", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "ideal time" in wide and "P(hold nodes)" in wide and "cost @5x rate" in wide


def test_cli_nothing_feasible_exits_3_with_the_closest(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--instances", "test/fast,test/tiny", "--max-nodes", "4",
                 "--deadline", "1h", "--budget", "$10"]) == 3
    out = capsys.readouterr().out
    assert "No candidate is feasible within the deadline 1.0 h and the budget $10.00" in out
    first = out.splitlines()[2].strip()
    assert "exceeds the deadline" in first or "exceeds the budget" in first
    assert "Closest candidates:" in out and "late (" in out and "x the deadline)" in out and "over budget (" in out
    assert max(map(len, out.splitlines())) <= 120
    assert main(["rank", str(path), "--instances", "test/tiny", "--max-nodes", "2", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["feasible"] == 0


# --- progress on stderr only on a terminal -------------------------------------------------------

import io  # noqa: E402
import time  # noqa: E402

from perfmodel.cli.progress import progress, working  # noqa: E402


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_on_a_terminal_and_passes_items_through():
    stream = Terminal()
    assert list(progress(range(5), "ranking", stream=stream)) == [0, 1, 2, 3, 4]
    assert "ranking [" in stream.getvalue() and stream.getvalue().endswith("\r")


def test_progress_is_silent_in_pipes_and_when_disabled():
    pipe, terminal = io.StringIO(), Terminal()
    assert list(progress(range(3), "ranking", stream=pipe)) == [0, 1, 2]
    assert list(progress(range(3), "ranking", enabled=False, stream=terminal)) == [0, 1, 2]
    assert pipe.getvalue() == "" and terminal.getvalue() == ""
    with working("calibrating", stream=pipe):
        time.sleep(0.01)
    assert pipe.getvalue() == ""


def test_working_shows_elapsed_time_on_a_terminal():
    stream = Terminal()
    with working("calibrating", stream=stream):
        time.sleep(1.3)
    assert "calibrating ... 1 s" in stream.getvalue()


def test_cli_rank_in_a_pipe_writes_nothing_to_stderr(stub, rank_cli, catalog, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("perfmodel.cli.rank.catalog_from", lambda args: catalog)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(scenario()))
    assert main(["rank", str(path), "--instances", "test/fast", "--max-nodes", "4"]) == 0
    assert capsys.readouterr().err == ""
