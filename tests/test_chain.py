"""The chain: named steps in order, each replaceable, intermediates kept, outputs those of evaluate."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel import load_catalog
from perfmodel.chain import BREAKDOWN, STEPS, evaluate, run_chain
from perfmodel.plans import check_plans, enumerate_plans, select
from perfmodel.profile import default_profile
from perfmodel.scenario import Plan
from perfmodel.workloads import get_workload


@pytest.fixture(scope="module")
def case():
    workload = get_workload("gpt3-2.7b")
    cluster = load_catalog().cluster(gpu="H100-SXM5-80GB", num_gpus=16, gpus_per_node=8, inter="8 x ib-ndr")
    grid = enumerate_plans(Plan(global_batch=64), workload, 16, 8)
    plans = select(grid, check_plans(grid, workload, 16, 8) == 0)
    settings = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=default_profile())
    return workload, cluster, plans, settings


def test_steps_are_in_the_documented_order():
    assert list(STEPS) == ["compute", "recompute", "tp_comm", "cp_comm", "moe_comm", "pipeline", "dp_comm",
                           "zero_gather", "optimizer", "offload", "overhead", "input", "memory"]


def test_the_result_keeps_every_step_and_the_breakdown_adds_up(case):
    workload, cluster, plans, settings = case
    result = run_chain(workload, cluster, plans, **settings)
    assert list(result.steps) == list(STEPS)
    n = len(plans["tp"])
    for name in BREAKDOWN:
        producer = [step for step, values in result.steps.items() if f"{name}_s" in values]
        assert len(producer) == 1, name
        assert np.shape(result.steps[producer[0]][f"{name}_s"]) == (n,)
    total = sum(result.outputs[f"{name}_s"] for name in BREAKDOWN)
    np.testing.assert_allclose(total, result.outputs["step_time_s"], rtol=1e-12)
    # the outputs are evaluate()'s
    plain = evaluate(workload, cluster, plans, **settings)
    for key, value in plain.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(result.outputs[key]))


def test_a_step_replaced_by_name_changes_only_its_component(case):
    workload, cluster, plans, settings = case
    base = run_chain(workload, cluster, plans, **settings).outputs

    def free_tp_comm(inputs, so_far):  # tensor-parallel communication that costs nothing
        zero = np.zeros(len(inputs.plans["tp"]))
        return {"t_tp": zero, "tp_comm_s": zero}

    free = run_chain(workload, cluster, plans, **settings, steps={"tp_comm": free_tp_comm}).outputs
    assert np.all(free["tp_comm_s"] == 0.0)
    assert np.any(base["tp_comm_s"] > 0.0)
    for name in ("forward", "backward", "recompute", "optimizer", "overhead"):
        np.testing.assert_array_equal(free[f"{name}_s"], base[f"{name}_s"])
    assert np.all(free["step_time_s"] <= base["step_time_s"] * (1 + 1e-12))


def test_an_unknown_step_is_an_error_listing_the_steps(case):
    workload, cluster, plans, settings = case
    with pytest.raises(ValueError, match="unknown chain step.*tp_com.*compute, recompute"):
        run_chain(workload, cluster, plans, **settings, steps={"tp_com": lambda inputs, so_far: {}})
