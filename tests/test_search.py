"""search(): every returned plan is valid and fits, fixed fields stay fixed, the ranking's best plan is
estimate()'s answer for that plan, and the counts of dropped plans add up."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.chain import BREAKDOWN
from perfmodel.plan_search import NOT_HEADROOM, best_estimate, search
from perfmodel.plans import enumerate_plans
from perfmodel.workloads import get_workload
from scenario_helpers import INTRA, make_scenario

MODELS = ("gpt3-1.3b", "gpt3-175b", "llama2-70b", "llama3-8b", "bert-large", "vit-b16", "resnet50")


def check_rows(frame, workload, num_gpus, gpus_per_node):
    """Every row a feasible plan: the rules of perfmodel.plans re-derived here, memory within capacity,
    a breakdown that adds up, rates within bounds, fastest first."""
    if not len(frame):
        return
    tp, pp, dp, cp, vp = (frame[k].to_numpy() for k in ("tp", "pp", "dp", "cp", "vp"))
    mb, gb = frame["micro_batch"].to_numpy(), frame["global_batch"].to_numpy()
    assert np.all(tp * pp * cp * dp == num_gpus)
    assert np.all(gb % (dp * mb) == 0)
    assert np.all((pp <= workload.layers) & ((vp == 1) | (pp * vp <= workload.layers + 2)))
    assert np.all((vp == 1) | (pp > 1))
    if workload.family == "transformer":
        shape = workload.shape
        assert np.all(shape.heads % tp == 0)
        assert np.all((shape.kv_heads % tp == 0) | (tp % shape.kv_heads == 0))
        assert np.all(shape.seq_len % cp == 0)
    else:
        assert np.all((tp == 1) & (pp == 1) & (cp == 1))
        assert not (frame["recompute"] == "selective").any()
    assert frame["fits"].all()
    assert np.all(frame["memory_total"] <= frame["memory_capacity"])
    parts = sum(frame[f"{name}_s"].to_numpy() for name in BREAKDOWN)
    np.testing.assert_allclose(parts, frame["step_time_s"], rtol=1e-12)
    assert np.all(np.column_stack([frame[f"{name}_s"] for name in BREAKDOWN]) >= 0)
    assert np.all((frame["mfu"] > 0) & (frame["mfu"] <= frame["hfu"] + 1e-15) & (frame["hfu"] <= 1))
    assert np.all((frame["gpu_utilization"] > 0) & (frame["gpu_utilization"] <= 1))
    assert np.all(np.diff(frame["step_time_s"].to_numpy()) >= 0)


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(sorted(INTRA)),
       num_gpus=st.sampled_from([1, 2, 4, 8, 16, 24, 64, 256]),
       global_batch=st.sampled_from([None, 8, 32, 96, 512, 1536]))
def test_search_never_returns_an_infeasible_plan(model, gpu, num_gpus, global_batch):
    frame = search(make_scenario(model, gpu, num_gpus, global_batch))
    check_rows(frame, get_workload(model), num_gpus, min(8, num_gpus))
    dropped = frame.attrs["infeasible"]
    misfits = ("does not fit in GPU memory", "does not fit in host memory (offload)", NOT_HEADROOM)
    assert frame.attrs["evaluated"] - len(frame) == sum(dropped.get(reason, 0) for reason in misfits)
    assert frame.attrs["feasible"] == len(frame)
    # every invalid or duplicate candidate is counted under at least one reason, and no reason counts
    # more than there are
    invalid = frame.attrs["candidates"] - frame.attrs["evaluated"]
    rule_counts = [n for reason, n in dropped.items() if reason not in misfits]
    assert (invalid == 0) == (not rule_counts)
    assert all(0 < n <= invalid for n in rule_counts) and sum(rule_counts) >= invalid


def test_search_gpt3_on_1024_a100_finds_megatron_like_plans():
    frame = search(make_scenario("gpt3-175b", "A100-SXM4-80GB", 1024, 1536))
    check_rows(frame, get_workload("gpt3-175b"), 1024, 8)
    assert len(frame) > 100
    best = frame.iloc[0]
    # 175B parameters (2.8 TB of model state) fit 80 GB GPUs only sharded: by TP x PP, or by ZeRO-3 over DP
    assert best.tp * best.pp >= 8 or best.zero == 3
    assert best.mfu > 0.3


@pytest.mark.parametrize("fixed", [dict(tp=2), dict(pp=4), dict(micro_batch=2), dict(zero=1),
                                   dict(recompute="full"), dict(vp=2), dict(cp=2, tp=4)])
def test_fixed_plan_fields_stay_fixed(fixed):
    frame = search(make_scenario("gpt3-13b", "A100-SXM4-80GB", 64, 512, **fixed))
    assert len(frame)
    check_rows(frame, get_workload("gpt3-13b"), 64, 8)
    for field, value in fixed.items():
        assert (frame[field] == value).all(), field


def test_enumerate_keeps_fixed_fields_and_leaves_open_ones_open():
    from perfmodel.scenario import Plan

    workload = get_workload("gpt3-13b")
    plans = enumerate_plans(Plan(tp=4, global_batch=512), workload, 64, 8)
    assert set(np.unique(plans["tp"])) == {4}
    assert {1, 2, 4, 8} <= set(np.unique(plans["pp"])) and set(np.unique(plans["zero"])) == {0, 1, 2, 3}
    assert set(np.unique(plans["global_batch"])) == {512}


SCENARIOS = {
    "gpt3-175b-1024": make_scenario("gpt3-175b", "A100-SXM4-80GB", 1024, 1536),
    "llama3-70b-64": make_scenario("llama3-70b", "H100-SXM5-80GB", 64, 512),
    "bert-large-8-v100": make_scenario("bert-large", "V100-SXM2-16GB", 8, 256),
    "resnet50-16": make_scenario("resnet50", "A100-SXM4-40GB", 16, 1024),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_best_plan_is_estimate_of_that_plan(name):
    case = SCENARIOS[name]
    frame = search(case, top=1)
    row = frame.iloc[0]
    by_hand = {**case, "plan": {
        "precision": row.precision, "tp": int(row.tp), "pp": int(row.pp), "dp": int(row.dp), "cp": int(row.cp),
        "vp": int(row.vp), "micro_batch": int(row.micro_batch), "global_batch": int(row.global_batch),
        "recompute": row.recompute, "recompute_every": int(row.recompute_every), "zero": int(row.zero),
        "sequence_parallel": bool(row.sequence_parallel)}}
    for result in (estimate(by_hand), best_estimate(case)):
        assert result.feasible
        assert result.step_time_s == pytest.approx(row.step_time_s, rel=1e-12)
        for component in BREAKDOWN:
            assert result.breakdown_s[component] == pytest.approx(row[f"{component}_s"], rel=1e-12, abs=1e-15)
        for part in ("weights", "gradients", "optimizer", "activations", "total", "capacity"):
            assert result.memory[part] == pytest.approx(row[f"memory_{part}"], rel=1e-12)
        assert result.mfu == pytest.approx(row.mfu, rel=1e-12)
        assert result.samples_per_s == pytest.approx(row.samples_per_s, rel=1e-12)


def test_a_scenario_nothing_fits_gives_an_empty_ranking_with_counts():
    frame = search(make_scenario("gpt3-175b", "A100-SXM4-80GB", 4, 8))
    assert len(frame) == 0
    dropped = frame.attrs["infeasible"]
    assert dropped["does not fit in GPU memory"] + dropped["does not fit in host memory (offload)"] == \
        frame.attrs["evaluated"] > 0
    assert best_estimate(make_scenario("gpt3-175b", "A100-SXM4-80GB", 4, 8)) is None


def test_search_estimate_is_no_better_than_the_best_plan():
    # estimate() picks its open fields among a few defaults; search ranges over all of them
    case = SCENARIOS["llama3-70b-64"]
    assert search(case, top=1).iloc[0].step_time_s <= estimate({**case, "plan": {
        "tp": 8, "pp": 4, "global_batch": 512}}).step_time_s * (1 + 1e-12)
