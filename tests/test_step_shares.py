"""The step-makeup interval term: a step whose share in communication, pipeline or per-step work
exceeds every fitted row's is an extrapolation, and the interval says so and widens."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.calibration.predictors  # noqa: F401  (registers the efficiency parameters)
from perfmodel import estimate
from perfmodel.calibration import intervals as iv
from perfmodel.chain import BREAKDOWN, STEP_SHARES
from perfmodel.choice import choose_plan
from perfmodel.hardware.catalog import load_catalog
from perfmodel.profile import CalibrationProfile

CATALOG = load_catalog()
PROFILE = CalibrationProfile(values={"gemm_tensor_core_efficiency": 0.8, "sustained_clock_fraction": 0.8},
                             uncertainty={"gemm_tensor_core_efficiency": 0.02, "sustained_clock_fraction": 0.02})
FAMILIES = ("labA", "labB", "labC", "labD")
_MODEL: dict = {}  # one fitted model shared by the hypothesis examples


def train_frame(untested_log_sigma, n=400, seed=0, noise=0.1, top=0.6):
    """Held-out train rows of four source families; family labD's rows put up to ``top`` of the step
    in layer communication (the others at most 10 %) and miss by an extra N(0, (s u)^2), u their
    share beyond the others' 10 %."""
    rng = np.random.default_rng(seed)
    family = np.array(FAMILIES)[np.arange(n) % len(FAMILIES)]
    layer = np.where(family == "labD", rng.uniform(0.1, top, n), rng.uniform(0.0, 0.1, n))
    u = np.maximum(layer - 0.1, 0.0)
    r = noise * rng.standard_normal(n) + untested_log_sigma * u * rng.standard_normal(n)
    predicted = rng.uniform(10.0, 100.0, n)
    index = pd.RangeIndex(n)
    gpus = np.full(n, "A100-SXM4-80GB")
    frame = pd.DataFrame({"id": [f"t{i}" for i in index], "kind": "train", "gpu": gpus, "metric": "samples_per_s",
                          "measured": predicted * np.exp(r), "predicted": predicted,
                          "share_layer_comm": layer, "share_data_comm": 0.05, "share_pipeline": 0.0,
                          "share_step_work": 0.02}, index=index)
    context = pd.DataFrame({"gpu": gpus, "architecture": "Ampere", "num_gpus": 8.0, "model_params": 1e9,
                            "seq_len": 2048.0, "framework": None, "fabric": None,
                            "source": [f"{f} table {i % 3}" for i, f in enumerate(family)]}, index=index)
    return frame, context


def test_untested_share_sums_each_share_beyond_the_fitted_largest():
    top = {"share_layer_comm": 0.2, "share_data_comm": 0.5}
    shares = {"share_layer_comm": np.array([0.1, 0.3, 0.6, np.nan]), "share_data_comm": np.array([0.6, 0.5, 0.7, 0.9])}
    assert iv.untested_share(shares, top, (4,)) == pytest.approx([0.1, 0.1, 0.6, 0.4])
    assert iv.untested_share(None, top) == 0.0  # no shares: nothing beyond


def test_the_share_term_is_fitted_from_rows_beyond_other_families_range_and_widens_estimates_beyond_it():
    frame, context = train_frame(untested_log_sigma=1.5)
    model = iv.fit_interval_model(frame, PROFILE, context)
    entry = model["kinds"]["train"]["shares"]
    json.dumps(model)
    assert entry["fitted"] and entry["rows_beyond"] > 50
    assert entry["range"]["share_layer_comm"] == pytest.approx(frame["share_layer_comm"].max())
    assert 0.9 < entry["log_sigma"] < 2.5  # the simulated 1.5, from about 100 rows
    inside = iv.ratio_bounds(model, PROFILE, "train", "Ampere", shares={"share_layer_comm": 0.3})
    beyond = iv.ratio_bounds(model, PROFILE, "train", "Ampere", shares={"share_layer_comm": 0.9})
    plain = iv.ratio_bounds(model, PROFILE, "train", "Ampere")
    assert inside == pytest.approx(plain)
    assert beyond[1] / beyond[0] > 1.3 * (inside[1] / inside[0])
    u = 0.9 - entry["range"]["share_layer_comm"]
    parts = iv.log_sigma(model, PROFILE, "train", "Ampere", shares={"share_layer_comm": 0.9})
    assert float(parts["shares"]) == pytest.approx((entry["log_sigma"] * u) ** 2)


def test_rows_that_are_no_worse_beyond_the_range_fit_a_small_term_and_too_few_rows_keep_the_prior():
    frame, context = train_frame(untested_log_sigma=0.0)
    assert iv.fit_interval_model(frame, PROFILE, context)["kinds"]["train"]["shares"]["log_sigma"] < 0.4
    few = frame[(frame["share_layer_comm"] <= 0.1) | (frame.index < 12)]  # 3 labD rows at most beyond
    entry = iv.fit_interval_model(few, PROFILE, context.loc[few.index])["kinds"]["train"]["shares"]
    assert entry["rows_beyond"] < iv.MIN_SHARE_ROWS
    assert not entry["fitted"] and entry["log_sigma"] == iv.SHARE_PRIOR_LOG_SIGMA
    # rows without sources: no family to leave out, so the prior
    entry = iv.fit_interval_model(frame, PROFILE, context.drop(columns="source"))["kinds"]["train"]["shares"]
    assert entry["rows_beyond"] == 0 and not entry["fitted"]


@settings(max_examples=40, deadline=None)
@given(low=st.floats(0.0, 1.0), extra=st.floats(0.0, 1.0), column=st.sampled_from(iv.SHARE_COLUMNS))
def test_a_larger_share_never_narrows_the_interval(low, extra, column):
    if "m" not in _MODEL:
        frame, context = train_frame(untested_log_sigma=1.0, n=200)
        _MODEL["m"] = iv.fit_interval_model(frame, PROFILE, context)
    model = _MODEL["m"]
    a = iv.ratio_bounds(model, PROFILE, "train", "Ampere", shares={column: low})
    b = iv.ratio_bounds(model, PROFILE, "train", "Ampere", shares={column: min(1.0, low + extra)})
    assert b[1] / b[0] >= a[1] / a[0] * (1 - 1e-12)


def test_confidence_names_a_share_beyond_the_fitted_range():
    frame, context = train_frame(untested_log_sigma=1.5)
    model = iv.fit_interval_model(frame, PROFILE, context)
    top = model["kinds"]["train"]["shares"]["range"]["share_layer_comm"]
    said = iv.confidence(model, PROFILE, "train", "Ampere", shares={"share_layer_comm": top + 0.3})
    assert any("tensor/context/expert-parallel communication" in line and f"{top:.0%}" in line
               for line in said["extrapolates"])
    quiet = iv.confidence(model, PROFILE, "train", "Ampere", shares={"share_layer_comm": top + 0.01})
    assert not any("communication" in line for line in quiet["extrapolates"])


@pytest.mark.parametrize("example", ["examples/gpt3-175b-1024xa100.yaml", "examples/resnet50-8xa100.yaml"])
def test_the_chain_shares_are_the_breakdown_groups_over_the_step(example):
    result = choose_plan(example).result
    step = result["step_time_s"]
    assert {member for members in STEP_SHARES.values() for member in members} <= set(BREAKDOWN)
    for group, members in STEP_SHARES.items():
        assert result[f"share_{group}"] == pytest.approx(sum(result[f"{m}_s"] for m in members) / step)
        assert 0.0 <= result[f"share_{group}"] <= 1.0
    # the groups and the compute passes are the whole step
    grouped = sum(result[f"share_{group}"] for group in STEP_SHARES)
    assert grouped + result["gpu_utilization"] == pytest.approx(1.0)


def test_an_estimate_beyond_the_fitted_makeup_names_it_and_is_wider():
    frame, context = train_frame(untested_log_sigma=1.5, top=0.3)
    model = iv.fit_interval_model(frame, PROFILE, context)
    profile = PROFILE.model_copy(update={"provenance": {"interval_model": model}})
    comm_heavy = {"workload": {"model": "gpt3-350m", "seq_len": 2048},
                  "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3"},
                  "plan": {"precision": "bf16", "tp": 8, "micro_batch": 1, "global_batch": 8}}
    result = estimate(comm_heavy, profile=profile)
    share = choose_plan(comm_heavy, profile=profile).result["share_layer_comm"]
    assert share > model["kinds"]["train"]["shares"]["range"]["share_layer_comm"] + iv.SHARE_STATED
    assert any("communication" in line for line in result.confidence["extrapolates"])
    without = {**model, "kinds": {"train": {k: v for k, v in model["kinds"]["train"].items() if k != "shares"}}}
    plain = estimate(comm_heavy, profile=PROFILE.model_copy(update={"provenance": {"interval_model": without}}))
    width = result.interval_80["step_time_high_s"] / result.interval_80["step_time_low_s"]
    assert width > 1.2 * plain.interval_80["step_time_high_s"] / plain.interval_80["step_time_low_s"]
    assert result.step_time_s == plain.step_time_s  # the point estimate does not move


def test_validate_reports_the_step_shares_of_train_rows_only():
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.calibration.validate import validate

    rows = shipped_measurements()
    some = pd.concat([rows[rows["kind"] == "train"].head(3), rows[rows["kind"] == "collective"].head(2)])
    scored = validate(some)
    train = scored[scored["kind"] == "train"]
    for column in iv.SHARE_COLUMNS:
        assert column in scored
        assert ((train[column] >= 0.0) & (train[column] <= 1.0)).all()
        assert scored.loc[scored["kind"] == "collective", column].isna().all()


def test_an_unknown_step_share_is_refused_with_the_known_names():
    frame, context = train_frame(untested_log_sigma=1.0, n=200)
    model = iv.fit_interval_model(frame, PROFILE, context)
    with pytest.raises(ValueError, match="share_layer.*no interval term; known: share_layer_comm"):
        iv.ratio_bounds(model, PROFILE, "train", "Ampere", shares={"share_layer": 0.9})
