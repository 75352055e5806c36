"""Calibration: recovery of known parameters, honest cross-validation, the shipped profile."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.calibration import fit
from perfmodel.calibration.fit import calibrate, cross_validate
from perfmodel.calibration.intervals import interval_table, rate_ratio
from perfmodel.calibration.measurements import check_measurements, shipped_measurements
from perfmodel.calibration.validate import predict, validate
from perfmodel.hardware.catalog import load_catalog
from perfmodel.profile import CalibrationProfile, default_profile, scale_by_ratio

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


def test_interval_table_quantiles_cover_the_held_out_rows():
    rng = np.random.default_rng(0)
    predicted = rng.uniform(1, 10, 400)
    frame = pd.DataFrame({"kind": "gemm", "gpu": "H100-SXM5-80GB", "metric": "tflops",
                          "predicted": predicted, "measured": predicted * np.exp(rng.normal(0, 0.2, 400))})
    table = interval_table(frame, CATALOG)
    low, high = table["gemm[Hopper]"]
    ratio = frame["measured"] / frame["predicted"]
    assert ((ratio >= low) & (ratio <= high)).mean() == pytest.approx(0.8, abs=0.01)


def test_unknown_parameter_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown parameters.*no_such_knob"):
        calibrate(synthetic_gemm_rows(CalibrationProfile(), 0.0, 0), params=["no_such_knob"])


def test_shipped_profile_is_the_calibration_of_the_shipped_measurements():
    """The default profile must be exactly what `perfmodel calibrate` makes of the shipped
    measurements: refit and compare, so it can never drift from its inputs."""
    shipped = default_profile()
    assert shipped.provenance.get("name") == "calibrated", "no shipped calibrated profile"
    refit = calibrate(shipped_measurements(), catalog=CATALOG)
    assert set(refit.values) == set(shipped.values)
    for key, value in refit.values.items():
        assert math.isclose(value, shipped.values[key], rel_tol=1e-3, abs_tol=1e-9), key
    assert shipped.provenance["inputs"] == refit.provenance["inputs"]


def test_shipped_profile_intervals_are_honest_on_the_shipped_measurements():
    """Coverage of the 80 % intervals on the shipped rows (in-sample, so at least near 80 %)."""
    result = validate(shipped_measurements(), CATALOG, default_profile())
    covered = result.dropna(subset=["low"])
    inside = (covered["measured"] >= covered["low"]) & (covered["measured"] <= covered["high"])
    assert len(covered) > 500
    assert 0.7 <= inside.mean() <= 0.95
