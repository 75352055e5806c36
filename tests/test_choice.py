"""One plan choice: validate's training predictions are estimate() of the same scenario."""

from __future__ import annotations

import math

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration.predictors.train import scenario_of
from perfmodel.calibration.validate import validate


@pytest.fixture(scope="module")
def train_rows():
    measurements = perfmodel.shipped_measurements()
    return measurements[measurements["kind"] == "train"]


def _metric(estimate, metric: str, num_gpus: int) -> float:
    if metric == "tokens_per_s_per_gpu":
        return estimate.tokens_per_s / num_gpus
    return getattr(estimate, metric)


def test_validate_predicts_every_shipped_training_row_with_estimate(train_rows):
    result = validate(train_rows)
    predicted = result[result["predicted"].notna()]
    assert len(predicted) > 0.5 * len(train_rows)
    for index, row in train_rows.loc[predicted.index].iterrows():
        estimate = perfmodel.estimate(scenario_of(row))
        if "fits in GPU memory, as measured" in (predicted.at[index, "assumed"] or ""):
            # the run was measured, so validate times it although the memory model says it does not
            # fit; estimate answers "does not fit" for the same plan
            assert not estimate.feasible and "but the GPU has" in " ".join(estimate.reasons), row["id"]
            continue
        value = _metric(estimate, row["metric"], estimate.hardware["num_gpus"])
        assert value == pytest.approx(predicted.at[index, "predicted"], rel=1e-9), row["id"]


def test_rows_validate_cannot_predict_are_infeasible_for_estimate_too(train_rows):
    result = validate(train_rows)
    infeasible = result["reason"].fillna("").str.startswith("infeasible plan")
    for index, row in train_rows[infeasible.to_numpy()].iterrows():
        estimate = perfmodel.estimate(scenario_of(row))
        assert not estimate.feasible, row["id"]


def test_the_choice_is_the_conventional_plan_search_names():
    # with the fields only search ranges over fixed (cp, vp, recompute, offload) both walk the same
    # plans (search's extra sequence-parallel-off variants are slower): estimate runs search's conventional choice, within
    # the tie band of search's fastest plan
    scenario = {"workload": {"model": "gpt3-2.7b"}, "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 16,
                                                                 "gpus_per_node": 8, "inter": "8 x ib-ndr"},
                "plan": {"global_batch": 64, "cp": 1, "vp": 1, "recompute": "none", "offload": "none"}}
    estimate = perfmodel.estimate(scenario)
    frame = perfmodel.search(scenario, top=1)
    best, conventional = frame.iloc[0], frame.attrs["conventional"]
    assert estimate.step_time_s == pytest.approx(conventional["step_time_s"], rel=1e-12)
    assert {key: estimate.plan[key] for key in ("tp", "pp", "dp", "micro_batch", "zero")} == \
        {key: conventional[key] for key in ("tp", "pp", "dp", "micro_batch", "zero")}
    # the same plan timed in another vectorized batch may differ in the last bit
    fastest = float(best["step_time_s"])
    assert fastest * (1 - 1e-12) <= estimate.step_time_s <= fastest * (1 + frame.attrs["tie_band"])
    assert math.isfinite(estimate.step_time_s) and np.isfinite(best["mfu"])


def test_a_scenario_that_cannot_fit_reports_the_defaults_and_by_how_much():
    from perfmodel.choice import choose_plan

    scenario = {"workload": {"model": "gpt3-175b"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 1}}
    choice = choose_plan(scenario)
    assert choice.valid and not choice.fits and choice.chosen == {}
    assert choice.plan["tp"] == 1 and choice.plan["recompute"] == "none" and choice.plan["zero"] == 0
    assert choice.reasons[0].startswith("does not fit in GPU memory (")
    assert choice.result["memory_total"] > choice.result["memory_capacity"]
    assert not perfmodel.estimate(scenario).feasible


def test_a_plan_that_breaks_a_rule_names_it_and_fixed_fields_stay_fixed():
    from perfmodel.choice import choose_plan

    scenario = {"workload": {"model": "llama2-7b"}, "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8},
                "plan": {"tp": 3}}
    choice = choose_plan(scenario)
    assert not choice.valid and not choice.fits and choice.plan["tp"] == 3
    assert "tp does not divide the attention heads" in choice.reasons
    estimate = perfmodel.estimate(scenario)
    assert not estimate.feasible and "tp does not divide the attention heads" in estimate.reasons
