"""Plans a practitioner would run (issue 15, item 6): the memory headroom, the conventional plan
among those the model cannot tell apart, and what search says about how far apart its plans are."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel.calibration.validate import validate
from perfmodel.chain import evaluate
from perfmodel.choice import candidate_plan, choose_plan, pick, tie_band
from perfmodel.cli import main
from perfmodel.job import resolve
from perfmodel.plan_search import NOT_HEADROOM, search
from perfmodel.plans import (DEFAULT_MEMORY_HEADROOM, MEASURED_RUN_HEADROOM, PARTIAL_RECOMPUTE_EVERY, PLAN_FIELDS,
                             PLAN_TIE_FRACTION, RECOMPUTE_CODES, check_plans, conventional_order, enumerate_plans,
                             memory_headroom, select, settings as plan_settings, within_headroom)
from perfmodel.profile import default_profile
from perfmodel.scenario import ScenarioError, load_scenario
from scenario_helpers import INTRA
from scenario_helpers import make_scenario as scenario

MODELS = ("gpt3-1.3b", "llama2-7b", "bert-large", "resnet50", "vit-b16")
NVLINK_GPUS = sorted(gpu for gpu, link in INTRA.items() if link.startswith("nvlink"))


def candidates(case):
    """Every candidate choose_plans ranges over, evaluated here on its own (plan arrays, result)."""
    parsed, workload, cluster = resolve(case)
    fixed = plan_settings(parsed.plan, cluster.gpu)
    grid = enumerate_plans(candidate_plan(parsed.plan), workload, cluster.num_gpus, cluster.gpus_per_node,
                           fixed["flash_attention"])
    plans = select(grid, check_plans(grid, workload, cluster.num_gpus, cluster.gpus_per_node) == 0)
    if not len(plans["tp"]):
        return plans, {}, workload, cluster
    return plans, evaluate(workload, cluster, plans, **fixed, profile=default_profile()), workload, cluster


# --- the rule -------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(NVLINK_GPUS), num_gpus=st.sampled_from([1, 2, 8, 16]),
       global_batch=st.sampled_from([None, 32, 256]))
def test_the_chosen_plan_is_within_the_tie_band_of_the_fastest_and_keeps_the_headroom(model, gpu, num_gpus,
                                                                                      global_batch):
    case = scenario(model, gpu, num_gpus, global_batch)
    choice = choose_plan(case)
    plans, result, workload, cluster = candidates(case)
    if not result or not result["memory_fits"].any():
        assert not choice.fits
        return
    fits = result["memory_fits"].astype(bool)
    roomy = fits & within_headroom(result["memory_total"], result["memory_capacity"], DEFAULT_MEMORY_HEADROOM)
    pool = roomy if roomy.any() else fits
    # plans are ranked by time per sample (an open batch lets their global batches differ)
    per_sample = result["step_time_s"] / plans["global_batch"]
    fastest = per_sample[pool].min()
    chosen = choice.result["step_time_s"] / choice.plan["global_batch"]
    band = tie_band(default_profile(), workload, cluster)
    assert 0 < band <= np.log1p(PLAN_TIE_FRACTION) + 1e-15
    assert choice.fits and fastest <= chosen * (1 + 1e-12) and chosen <= fastest * np.exp(band) * (1 + 1e-12)
    if roomy.any():  # an automatic plan never eats into the headroom when some plan leaves it
        assert choice.result["memory_total"] <= (1 - DEFAULT_MEMORY_HEADROOM) * choice.result["memory_capacity"]
        assert choice.warnings == []
    else:
        assert len(choice.warnings) == 1 and "memory headroom" in choice.warnings[0]
    # no tied plan is more conventional than the chosen one
    tied = np.flatnonzero(pool & (np.log(per_sample / fastest) <= band + 1e-12))
    first = tied[conventional_order({**{k: plans[k][tied] for k in PLAN_FIELDS},
                                     "step_time_s": per_sample[tied]},
                                    workload.tokens_per_sample, cluster.gpus_per_node)[0]]
    assert choice.result["step_time_s"] == pytest.approx(result["step_time_s"][first], rel=1e-12)
    assert choice.ties == len(tied)


@pytest.mark.parametrize("model,gpu", [("resnet50", "A100-SXM4-80GB"), ("bert-large", "A100-SXM4-80GB"),
                                       ("bert-large", "V100-SXM2-16GB")])
def test_small_models_on_8_gpus_no_longer_pick_zero3_for_a_gain_below_the_uncertainty(model, gpu):
    case = scenario(model, gpu, 8, 256)
    choice = choose_plan(case)
    assert choice.fits and choice.plan["zero"] <= 1 and choice.plan["offload"] == "none"
    frame = search(case, top=None)
    zero3 = frame[frame["zero"] == 3]
    # the gain ZeRO-3 could offer is below the tie band: it is not chosen for it
    assert len(zero3) and zero3["step_time_s"].min() >= choice.result["step_time_s"] / (1 + frame.attrs["tie_band"])
    assert frame.attrs["conventional"]["zero"] <= 1


def test_zero3_is_still_chosen_when_nothing_else_fits():
    # 13B parameters x 16 bytes of Adam state: without sharding the weights and gradients
    # (4 bytes/param = 52 GB) no plan fits 40 GB, with ZeRO-3 over 8 GPUs it does
    case = scenario("llama2-13b", "A100-SXM4-40GB", 8, 8, tp=1, pp=1, cp=1)
    choice = choose_plan(case)
    assert choice.fits and choice.plan["zero"] == 3
    assert not choose_plan({**case, "plan": {**case["plan"], "zero": 2}}).fits


def test_conventional_order_ranks_each_key_before_the_next():
    rows = [  # the expected order, most conventional first
        dict(tp=8, pp=1, cp=1, zero=0, recompute="none", micro_batch=4, vp=1, offload="none", step_time_s=2.0),
        dict(tp=8, pp=1, cp=1, zero=1, recompute="none", micro_batch=2, vp=1, offload="none", step_time_s=1.0),
        dict(tp=8, pp=1, cp=1, zero=3, recompute="none", micro_batch=8, vp=1, offload="none", step_time_s=1.0),
        dict(tp=8, pp=1, cp=1, zero=3, recompute="full", micro_batch=8, vp=1, offload="none", step_time_s=1.0),
        dict(tp=8, pp=2, cp=1, zero=0, recompute="none", micro_batch=8, vp=1, offload="none", step_time_s=1.0),
        dict(tp=8, pp=2, cp=2, zero=0, recompute="none", micro_batch=8, vp=1, offload="none", step_time_s=1.0),
        dict(tp=16, pp=2, cp=2, zero=0, recompute="none", micro_batch=8, vp=1, offload="none", step_time_s=1.0),
        dict(tp=1, pp=1, cp=1, zero=0, recompute="none", micro_batch=8, vp=1, offload="optimizer", step_time_s=1.0),
    ]
    arrays = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    reversed_arrays = {key: values[::-1] for key, values in arrays.items()}
    assert list(conventional_order(arrays, 2048, 8)) == list(range(len(rows)))
    assert list(conventional_order(reversed_arrays, 2048, 8)) == list(range(len(rows)))[::-1]


def test_context_parallelism_is_unconventional_only_at_short_sequences():
    base = dict(tp=np.array([1, 1]), pp=np.array([2, 1]), zero=np.array([0, 0]), micro_batch=np.array([1, 1]),
                vp=np.array([1, 1]), recompute=np.array(["none", "none"]), offload=np.array(["none", "none"]))
    plans = {**base, "cp": np.array([1, 2])}  # same number of parallel dimensions
    assert conventional_order(plans, 4096, 8)[0] == 0
    assert conventional_order({**plans, "step_time_s": np.array([2.0, 1.0])}, 131072, 8)[0] == 1


@settings(max_examples=50, deadline=None)
@given(times=st.lists(st.floats(0.1, 10.0), min_size=1, max_size=30), band=st.floats(0.0, 0.5),
       seed=st.integers(0, 2**16))
def test_pick_returns_a_plan_within_the_band_and_counts_the_ties(times, band, seed):
    rng = np.random.default_rng(seed)
    n = len(times)
    plans = {"tp": rng.choice([1, 2, 8], n), "pp": rng.choice([1, 4], n), "cp": rng.choice([1, 2], n),
             "vp": np.ones(n, int), "zero": rng.integers(0, 4, n), "micro_batch": rng.choice([1, 2, 4], n),
             "recompute": rng.choice(["none", "full"], n), "offload": np.full(n, "none")}
    step = np.array(times)
    where, ties = pick(plans, step, band, 2048, 8)
    assert np.log(step[where] / step.min()) <= band + 1e-9
    assert ties == int(np.sum(np.log(step / step.min()) <= band + 1e-12)) >= 1
    if band == 0.0:
        assert step[where] == step.min()


def test_tie_band_is_below_the_within_job_spread_of_the_shipped_rows():
    """PLAN_TIE_FRACTION must stay below what the model cannot resolve between plans of one job:
    the 80th percentile of |log(measured/predicted) - job mean| over shipped training rows that
    share source, model, GPU and GPU count but differ in plan."""
    from perfmodel.calibration.intervals import rate_ratio
    from perfmodel.calibration.measurements import source_group
    from perfmodel.calibration.validate import validate

    rows = perfmodel.shipped_measurements()
    rows = rows[rows["kind"] == "train"]
    result = validate(rows)
    r = np.log(rate_ratio(result["metric"].to_numpy(), result["measured"].to_numpy(),
                          result["predicted"].to_numpy()))
    rows = rows.assign(r=r, group=rows["source"].map(source_group))[np.isfinite(r)]
    job = ["group", "model", "layers", "hidden", "seq_len", "gpu", "num_gpus"]
    plan = ["tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero"]
    rows = rows.assign(**{name: rows[name].map(str) for name in job + plan})  # missing values are a key too
    deviations = []
    for _, members in rows.groupby(job):
        if len(members[plan].drop_duplicates()) > 1:
            deviations.extend(members["r"] - members["r"].mean())
    assert len(deviations) > 50
    spread = float(np.quantile(np.abs(deviations), 0.8))
    assert np.log1p(PLAN_TIE_FRACTION) < spread


def test_tie_band_without_an_interval_model_is_the_fraction():
    profile = default_profile()
    bare = profile.model_copy(update={"provenance": {}, "interval": {}})
    _, workload, cluster = resolve(scenario("resnet50", "A100-SXM4-80GB", 8))
    assert tie_band(bare, workload, cluster) == pytest.approx(np.log1p(PLAN_TIE_FRACTION))


# --- the memory headroom --------------------------------------------------------------------------

def test_headroom_field_is_checked_and_defaults():
    assert memory_headroom(load_scenario(scenario("resnet50", "A100-SXM4-80GB", 8)).plan) == DEFAULT_MEMORY_HEADROOM
    assert memory_headroom(load_scenario(scenario("resnet50", "A100-SXM4-80GB", 8, memory_headroom=0)).plan) == 0
    for bad in (1.0, -0.1, True, "lots"):
        with pytest.raises(ScenarioError, match="memory_headroom"):
            load_scenario(scenario("resnet50", "A100-SXM4-80GB", 8, memory_headroom=bad))


@pytest.mark.parametrize("headroom", [0.0, 0.1, 0.3])
def test_no_search_row_eats_into_the_headroom(headroom):
    frame = search(scenario("llama2-7b", "A100-SXM4-40GB", 8, 64, memory_headroom=headroom), top=None)
    assert len(frame) and frame.attrs["memory_headroom"] == headroom
    assert (frame["memory_total"] <= (1 - headroom) * frame["memory_capacity"]).all()
    if headroom > 0:
        assert frame.attrs["infeasible"].get(NOT_HEADROOM, 0) > 0


def _tight_plan():
    """A scenario with every plan field fixed to a plan that fits but uses 90-100 % of the GPU."""
    case = scenario("llama2-7b", "A100-SXM4-40GB", 8, 64, memory_headroom=0.0)
    frame = search(case, top=None)
    share = frame["memory_total"] / frame["memory_capacity"]
    row = frame[(share > 1 - DEFAULT_MEMORY_HEADROOM) & (share <= 1)].iloc[0]
    plan = {name: (row[name] if name in ("recompute", "offload") else
                   bool(row[name]) if name == "sequence_parallel" else int(row[name])) for name in PLAN_FIELDS}
    return {**case, "plan": {**plan, "precision": row["precision"]}}, row


def test_a_fixed_plan_above_the_headroom_is_estimated_with_a_warning(tmp_path, capsys):
    case, row = _tight_plan()  # its plan: every field fixed, no memory_headroom (the default)
    result = perfmodel.estimate(case)
    assert result.feasible and result.memory["fits"]
    assert result.step_time_s == pytest.approx(float(row["step_time_s"]), rel=1e-12)
    assert len(result.warnings) == 1 and "10% memory headroom" in result.warnings[0]
    assert perfmodel.estimate({**case, "plan": {**case["plan"], "memory_headroom": 0.0}}).warnings == []
    path = tmp_path / "tight.json"
    path.write_text(json.dumps(case))
    assert main(["estimate", str(path)]) == 0
    assert "WARNING:" in capsys.readouterr().out
    assert main(["estimate", str(path), "--memory-headroom", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["warnings"] == [] and data["assumptions"]["memory_headroom"] == 0


def test_a_measured_runs_open_fields_are_chosen_among_every_plan_that_fits():
    """A measured run happened, so its plan fitted: validate chooses the fields a row leaves open
    among every plan that fits at all (MEASURED_RUN_HEADROOM), while an estimate, which recommends a
    plan, keeps the default headroom."""
    case = scenario("gpt3-1.3b", "A100-SXM4-40GB", 8, 64)
    roomy = perfmodel.estimate(case)
    full = perfmodel.estimate({**case, "plan": {**case["plan"], "memory_headroom": MEASURED_RUN_HEADROOM}})
    assert MEASURED_RUN_HEADROOM == 0.0
    # the job is one where the headroom decides: its fastest plan uses more than 90 % of the GPU
    assert full.memory["total"] > (1 - DEFAULT_MEMORY_HEADROOM) * full.memory["capacity"] >= roomy.memory["total"]
    assert full.step_time_s < roomy.step_time_s
    hardware = case["hardware"]
    row = pd.DataFrame([{"id": "open-plan", "kind": "train", "gpu": hardware["gpu"], "num_gpus": hardware["num_gpus"],
                         "gpus_per_node": hardware["gpus_per_node"], "intra": hardware["intra"],
                         "metric": "step_time_s", "value": 1.0, "model": "gpt3-1.3b", "global_batch": 64}])
    predicted = validate(row)["predicted"].iloc[0]
    assert predicted == pytest.approx(full.step_time_s, rel=1e-9)


def test_an_open_recomputation_can_be_partial():
    """Where no recomputation does not fit and full recomputation does more than memory needs, the
    choice recomputes part of the layers (every_k), as Megatron-LM's --recompute-num-layers does:
    faster than full, and within the headroom."""
    case = {"workload": {"model": "llama3-70b"}, "framework": "nemo",
            "hardware": {"gpu": "GB200", "num_gpus": 64, "gpus_per_node": 64, "intra": "nvlink5"},
            "plan": {"precision": "fp8", "tp": 1, "pp": 1, "dp": 64, "zero": 3, "micro_batch": 1, "global_batch": 128}}
    chosen = perfmodel.estimate(case)
    assert chosen.plan["recompute"] == "every_k" and chosen.plan["recompute_every"] in PARTIAL_RECOMPUTE_EVERY
    assert chosen.memory["total"] <= (1 - DEFAULT_MEMORY_HEADROOM) * chosen.memory["capacity"]
    assert not perfmodel.estimate({**case, "plan": {**case["plan"], "recompute": "none"}}).memory["fits"]
    assert perfmodel.estimate({**case, "plan": {**case["plan"], "recompute": "full"}}).step_time_s > chosen.step_time_s


def test_every_k_without_its_stride_chooses_one():
    """recompute: every_k with recompute_every open chooses k among the partial strides (it was
    read as k = 1, which recomputes nothing); the chosen k is one the estimate reports."""
    case = scenario("gpt3-1.3b", "H100-SXM5-80GB", 8, 64)
    chosen = perfmodel.estimate({**case, "plan": {**case["plan"], "recompute": "every_k"}})
    assert chosen.plan["recompute"] == "every_k" and chosen.plan["recompute_every"] in PARTIAL_RECOMPUTE_EVERY
    stated = perfmodel.estimate({**case, "plan": {**case["plan"], "recompute": "every_k",
                                                  "recompute_every": chosen.plan["recompute_every"]}})
    assert stated.step_time_s == pytest.approx(chosen.step_time_s, rel=1e-12)


@pytest.mark.parametrize("model,plan,message", [
    ("gpt3-1.3b", {"recompute": "full", "recompute_every": 4}, "applies to recompute 'every_k' of a transformer only"),
    ("resnet50", {"recompute_every": 2}, "applies to recompute 'every_k' of a transformer only"),
    ("gpt3-1.3b", {"recompute_every": 1}, "recompute_every 1 with recompute open"),
])
def test_a_recompute_stride_that_cannot_apply_is_refused_by_name(model, plan, message):
    """A recompute_every the plan cannot use is an error naming the field, never dropped."""
    case = scenario(model, "A100-SXM4-80GB", 8, 64)
    with pytest.raises(ValueError, match=message):
        perfmodel.estimate({**case, "plan": {**case["plan"], **plan}})
    with pytest.raises(ValueError, match=message):
        search({**case, "plan": {**case["plan"], **plan}}, top=1)


def test_a_stated_stride_with_an_open_strategy_is_among_the_choices():
    """recompute_every with recompute open offers every_k at that stride beside none and full,
    in the estimate's choice and in search alike."""
    case = scenario("llama2-7b", "A100-SXM4-40GB", 8, 64)
    stated = {**case, "plan": {**case["plan"], "recompute_every": 8}}
    parsed, workload, cluster = resolve(stated)
    grid = enumerate_plans(candidate_plan(parsed.plan), workload, cluster.num_gpus, cluster.gpus_per_node)
    options = set(zip(np.ravel(grid["recompute"]).tolist(), np.ravel(grid["recompute_every"]).tolist()))
    assert options == {(RECOMPUTE_CODES["none"], 1), (RECOMPUTE_CODES["full"], 1), (RECOMPUTE_CODES["every_k"], 8)}
    found = search(stated, top=None)
    assert set(found.loc[found["recompute"] == "every_k", "recompute_every"]) == {8}


# --- search: ties and the conventional choice -----------------------------------------------------

@pytest.mark.parametrize("case,chunk", [(scenario("gpt3-1.3b", "A100-SXM4-80GB", 16, 64), 20_000),
                                        (scenario("resnet50", "A100-SXM4-80GB", 8, 2048, precision="fp16"), 7)])
def test_search_conventional_choice_is_that_of_every_plan_whatever_the_chunking(case, chunk):
    everything = search(case, top=None)
    _, workload, cluster = resolve(case)
    columns = {name: everything[name].to_numpy() for name in everything.columns}
    where, ties = pick(columns, columns["step_time_s"], np.log1p(everything.attrs["tie_band"]),
                       workload.tokens_per_sample, cluster.gpus_per_node)
    expected = everything.iloc[where]
    assert ties == int(everything["tied"].sum())
    for frame in (everything, search(case, top=3), search(case, top=2, chunk=chunk)):
        conventional = frame.attrs["conventional"]
        assert {name: conventional[name] for name in PLAN_FIELDS} == \
            {name: expected[name].item() if hasattr(expected[name], "item") else expected[name]
             for name in PLAN_FIELDS}
        assert conventional["vs_best"] == pytest.approx(expected["vs_best"], rel=1e-12, abs=1e-15)


def test_search_json_says_how_far_apart_the_plans_are(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(scenario("gpt3-1.3b", "A100-SXM4-80GB", 16, 64)))
    assert main(["search", str(path), "--top", "6", "--json", "--memory-headroom", "0.2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"evaluated", "candidates", "feasible", "infeasible", "plans", "memory_headroom", "tie_band", "tied",
            "conventional"} <= set(data)
    assert data["memory_headroom"] == 0.2 and 0 < data["tie_band"] <= PLAN_TIE_FRACTION
    plans = data["plans"]
    assert plans[0]["vs_best"] == 0 and all(p["vs_best"] >= 0 for p in plans)
    for plan in plans:
        assert plan["tied"] == (plan["vs_best"] <= data["tie_band"] + 1e-9)
        assert plan["memory_total"] <= 0.8 * plan["memory_capacity"]
    assert data["tied"] == sum(p["tied"] for p in plans)
    conventional = data["conventional"]
    assert set(PLAN_FIELDS) | {"precision", "step_time_s", "vs_best"} <= set(conventional)
    assert 0 <= conventional["vs_best"] <= data["tie_band"] + 1e-9


def test_search_text_names_the_ties_and_the_conventional_choice(tmp_path, capsys):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(scenario("resnet50", "A100-SXM4-80GB", 8, 2048, precision="fp16")))
    assert main(["search", str(path), "--top", "4"]) == 0
    out = capsys.readouterr().out
    assert "vs_best" in out and "tie band (±10%)" in out and "the conventional choice among all tied plans is TP1" in out
    assert main(["search", str(path), "--memory-headroom", "0.95"]) == 2
    assert "--memory-headroom" in capsys.readouterr().err


# --- an open batch: the highest throughput that fits ---------------------------------------------

@pytest.mark.parametrize("model,gpu,num_gpus", [("bert-base", "H100-SXM5-80GB", 1), ("resnet50", "A100-SXM4-80GB", 8),
                                                ("gpt3-1.3b", "A100-SXM4-80GB", 8)])
def test_an_open_batch_takes_the_throughput_of_the_best_fitting_batch_not_one_sample(model, gpu, num_gpus):
    """A scenario that states neither micro-batch nor global batch (a throughput benchmark that
    does not say its batch) is not estimated at one sample per GPU: the choice ranks plans by time
    per sample, so its throughput is at least that of every fixed micro-batch that fits."""
    open_choice = choose_plan(scenario(model, gpu, num_gpus))
    assert open_choice.fits
    assert open_choice.plan["global_batch"] == open_choice.plan["dp"] * open_choice.plan["micro_batch"]
    band = tie_band(default_profile(), *resolve(scenario(model, gpu, num_gpus))[1:])
    for micro_batch in (1, 4, 32):
        fixed = choose_plan(scenario(model, gpu, num_gpus, micro_batch=micro_batch))
        if fixed.fits:  # the open choice is never slower per sample beyond the tie band
            assert open_choice.result["samples_per_s"] >= fixed.result["samples_per_s"] * np.exp(-band) * (1 - 1e-9)
    assert open_choice.plan["micro_batch"] > 1


def test_search_of_an_open_batch_searches_the_batch_estimate_chooses_and_says_so():
    case = scenario("bert-base", "H100-SXM5-80GB", 8)
    frame = search(case, top=5)
    chosen = choose_plan(case)
    assert set(frame["global_batch"]) == {chosen.plan["global_batch"]}
    assert "batch not stated" in frame.attrs["batch_note"]
    assert search(scenario("bert-base", "H100-SXM5-80GB", 8, 64), top=5).attrs["batch_note"] is None


def test_validate_lists_an_unstated_batch_as_assumed():
    from perfmodel.calibration.predictors.train import predict_train
    import pandas as pd

    from perfmodel.hardware.catalog import load_catalog

    row = {"id": "x", "kind": "train", "gpu": "H100-SXM5-80GB", "num_gpus": 1, "metric": "samples_per_s",
           "value": 900.0, "model": "bert-base", "seq_len": 384, "precision": "fp16"}
    out = predict_train(pd.DataFrame([row]).set_index("id", drop=False), load_catalog(), default_profile())
    assert out.loc["x", "predicted"] > 0
    assert "batch not stated: micro-batch" in out.loc["x", "assumed"]
