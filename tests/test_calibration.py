"""Calibration: recovery of known parameters, honest cross-validation, the shipped profile."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.calibration import fit
from perfmodel.calibration.fit import calibrate, cross_validate
from perfmodel.calibration.intervals import rate_ratio
from perfmodel.calibration.measurements import check_measurements, shipped_measurements
from perfmodel.calibration.validate import predict, validate
from perfmodel.hardware.catalog import load_catalog
from perfmodel.profile import PARAMETERS, CalibrationProfile, default_profile, scale_by_ratio, split_key

CATALOG = load_catalog()
SHAPES = [(m, n, k) for m in (1024, 2048, 4096, 8192) for n in (1024, 4096, 12288) for k in (512, 4096, 16384)]


def synthetic_gemm_rows(truth: CalibrationProfile, noise: float, seed: int) -> pd.DataFrame:
    """GEMM rows on an H100 whose 'measured' TFLOP/s are the model's own under ``truth``, with
    multiplicative log-normal noise: data generated from known parameters."""
    rows = pd.DataFrame({
        "id": [f"S{i:03d}" for i in range(len(SHAPES))], "kind": "gemm", "gpu": "H100-SXM5-80GB",
        "num_gpus": 1, "m": [s[0] for s in SHAPES], "n": [s[1] for s in SHAPES], "k": [s[2] for s in SHAPES],
        "dtype": "bf16", "metric": "tflops", "value": 1.0, "source": "synthetic",
    })
    rows = check_measurements(rows)
    exact = predict(rows, CATALOG, truth)["predicted"].to_numpy()
    rows["value"] = exact * np.exp(np.random.default_rng(seed).normal(0.0, noise, len(rows)))
    return rows


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(efficiency=st.floats(0.45, 0.95), seed=st.integers(0, 10_000))
def test_calibration_recovers_known_parameters_within_their_uncertainty(efficiency, seed):
    truth = CalibrationProfile(values={"gemm_tensor_core_efficiency[Hopper]": efficiency})
    rows = synthetic_gemm_rows(truth, noise=0.03, seed=seed)
    fitted = calibrate(rows, params=["gemm_tensor_core_efficiency"], catalog=CATALOG)
    value = fitted.values["gemm_tensor_core_efficiency[Hopper]"]
    std = fitted.uncertainty["gemm_tensor_core_efficiency[Hopper]"]
    assert 0 < std < 0.05
    assert abs(value - efficiency) <= 4 * std


def test_cross_validation_never_scores_a_row_it_was_fitted_on(monkeypatch):
    rows = synthetic_gemm_rows(CalibrationProfile(values={"gemm_tensor_core_efficiency[Hopper]": 0.7}), 0.05, 1)
    fitted_ids: list[set] = []
    real_calibrate = fit.calibrate

    def spy(measurements, **kwargs):
        fitted_ids.append(set(measurements["id"]))
        return real_calibrate(measurements, **kwargs)

    monkeypatch.setattr(fit, "calibrate", spy)
    scored = cross_validate(rows, k=4, params=["gemm_tensor_core_efficiency"], catalog=CATALOG)
    assert sorted(scored["id"]) == sorted(rows["id"])  # every row scored exactly once
    for fold, fitted in enumerate(fitted_ids):
        held = set(scored.loc[scored["fold"] == fold, "id"])
        assert held and not held & fitted
        assert held | fitted == set(rows["id"])


def test_cross_validation_keeps_metrics_of_one_measurement_in_one_fold():
    rows = synthetic_gemm_rows(CalibrationProfile(), 0.0, 0)
    twin = rows.copy()
    twin["id"] = twin["id"] + "t"
    twin["metric"] = "time_us"
    twin["value"] = 1.0
    both = pd.concat([rows, twin], ignore_index=True)
    groups = fit._configuration_groups(both)
    assert (groups[: len(rows)] == groups[len(rows):]).all()


def test_prediction_interval_ratios_flip_for_time_metrics():
    assert rate_ratio(["tflops"], 90.0, 100.0)[0] == pytest.approx(0.9)
    assert rate_ratio(["time_us"], 110.0, 100.0)[0] == pytest.approx(100 / 110)
    low, high = scale_by_ratio("step_time_s", 10.0, (0.8, 1.25))
    assert (low, high) == (pytest.approx(8.0), pytest.approx(12.5))
    assert scale_by_ratio("samples_per_s", 10.0, (0.8, 1.25)) == (pytest.approx(8.0), pytest.approx(12.5))


def test_unknown_parameter_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown parameters.*no_such_knob"):
        calibrate(synthetic_gemm_rows(CalibrationProfile(), 0.0, 0), params=["no_such_knob"])


@pytest.fixture(scope="module")
def refit():
    """The shipped measurements refitted from scratch, as `perfmodel calibrate` does."""
    return calibrate(shipped_measurements(), catalog=CATALOG)


def test_shipped_profile_is_the_calibration_of_the_shipped_measurements(refit):
    """The default profile must be what `perfmodel calibrate` makes of the shipped measurements,
    so it can never drift from its inputs.  Compared where it matters and where the data decide:
    every row's prediction to 2 %, each kind's MAPE to half a percentage point, the values the data
    determine to 2 % (or 0.1 % of their allowed range near zero), the undetermined ones at their
    prior.  Raw values of parameters the data leave open follow the optimizer's rounding, which
    changes with numpy/scipy releases, so they are not compared."""
    shipped = default_profile()
    assert shipped.provenance.get("name") == "calibrated", "no shipped calibrated profile"
    assert shipped.provenance["inputs"] == refit.provenance["inputs"]
    assert set(refit.values) == set(shipped.values)
    assert refit.provenance["not_determined"] == shipped.provenance["not_determined"]
    assert refit.provenance["pooled"] == shipped.provenance["pooled"]
    for key, value in refit.values.items():
        if key in refit.provenance["not_determined"]:
            assert value == shipped.values[key], key
        elif key in refit.provenance["identifiability"]:
            parameter = PARAMETERS[split_key(key)[0]]
            assert math.isclose(value, shipped.values[key], rel_tol=0.02,
                                abs_tol=1e-3 * (parameter.high - parameter.low)), key

    rows = shipped_measurements()
    before = validate(rows, CATALOG, shipped)
    after = validate(rows, CATALOG, refit)
    assert (before["predicted"].isna() == after["predicted"].isna()).all()
    ratio = (after["predicted"] / before["predicted"]).dropna()
    assert np.abs(np.log(ratio)).max() < 0.02, after.loc[ratio.idxmax() if len(ratio) else None]
    for kind in rows["kind"].unique():
        on_kind = before["kind"] == kind
        assert after.loc[on_kind, "ape"].mean() == pytest.approx(before.loc[on_kind, "ape"].mean(), abs=0.005), kind


def test_calibration_keeps_what_the_data_do_not_determine_at_its_prior():
    """GEMMs of a teraFLOP or more (milliseconds each) say next to nothing about a per-call floor
    of tens of microseconds: calibrate must keep it at its prior and list it as not determined,
    while it fits the matmul efficiency they do show."""
    truth = CalibrationProfile(values={"gemm_tensor_core_efficiency[Hopper]": 0.7})
    rows = synthetic_gemm_rows(truth, noise=0.02, seed=3)
    rows = rows[2 * rows["m"] * rows["n"] * rows["k"] >= 1e12]
    fitted = calibrate(rows, params=["gemm_tensor_core_efficiency", "gemm_call_floor"], catalog=CATALOG)
    identifiability = fitted.provenance["identifiability"]
    assert identifiability["gemm_tensor_core_efficiency[Hopper]"] < fit.DETERMINED_RATIO
    assert "gemm_call_floor" in fitted.provenance["not_determined"]
    assert fitted.values["gemm_call_floor"] == CalibrationProfile().get("gemm_call_floor")
    prior = CalibrationProfile().get("gemm_tensor_core_efficiency", "Hopper")
    assert abs(fitted.values["gemm_tensor_core_efficiency[Hopper]"] - 0.7) < 0.5 * abs(prior - 0.7)  # three rows vs a prior


def test_shipped_profile_intervals_are_honest_on_the_shipped_measurements():
    """Coverage of the 80 % intervals on the shipped rows (in-sample, so at least near 80 %)."""
    result = validate(shipped_measurements(), CATALOG, default_profile())
    covered = result.dropna(subset=["low"])
    inside = (covered["measured"] >= covered["low"]) & (covered["measured"] <= covered["high"])
    assert len(covered) > 500
    assert 0.7 <= inside.mean() <= 0.95
