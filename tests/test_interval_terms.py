"""Interval terms away from the data: a GPU model without rows, a value at its bound, source-grouped
cross-validation, and the scale axis shared by rows and estimates."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.calibration.predictors  # noqa: F401  (registers the efficiency parameters)
from perfmodel.calibration import intervals as iv
from perfmodel.calibration.fit import _balanced_folds, cross_validate, cv_groups
from perfmodel.calibration.measurements import shipped_measurements
from perfmodel.hardware.catalog import load_catalog
from perfmodel.profile import CalibrationProfile, default_profile

CATALOG = load_catalog()
PROFILE = CalibrationProfile(
    values={"gemm_tensor_core_efficiency[Ampere]": 0.8, "gemm_tensor_core_efficiency[Volta]": 0.8,
            "gemm_tensor_core_efficiency[Turing]": 0.8, "gemm_tensor_core_efficiency": 0.8,
            "sustained_clock_fraction[Ampere]": 0.8, "sustained_clock_fraction": 0.8},
    uncertainty={"gemm_tensor_core_efficiency[Ampere]": 0.02, "gemm_tensor_core_efficiency[Volta]": 0.02,
                 "gemm_tensor_core_efficiency[Turing]": 0.02, "gemm_tensor_core_efficiency": 0.03,
                 "sustained_clock_fraction[Ampere]": 0.03, "sustained_clock_fraction": 0.04})
# log bias of each GPU model: GPUs of one architecture differ, which is what a new GPU model risks
GEMM_GPUS = {"A100-PCIe-40GB": 0.0, "V100-PCIe-32GB": 0.25, "T4": -0.3}


def gemm_frame(gpu_bias, n_per_gpu=300, noise=0.1, seed=0, shift=0.0):
    """Held-out GEMM rows: log(measured/predicted) = the GPU's bias + ``shift`` + normal noise."""
    rng = np.random.default_rng(seed)
    gpus = np.repeat(list(gpu_bias), n_per_gpu)
    r = np.array([gpu_bias[g] for g in gpus]) + shift + noise * rng.standard_normal(gpus.size)
    predicted = rng.uniform(10.0, 100.0, gpus.size)
    index = pd.RangeIndex(gpus.size)
    frame = pd.DataFrame({"id": [f"g{i}" for i in index], "kind": "gemm", "gpu": gpus, "metric": "tflops",
                          "measured": predicted * np.exp(r), "predicted": predicted}, index=index)
    context = pd.DataFrame({"gpu": gpus, "architecture": iv.architectures(gpus, CATALOG), "num_gpus": 1.0,
                            "model_params": np.nan, "seq_len": np.nan, "framework": None, "fabric": None,
                            "source": "synthetic"}, index=index)
    return frame, context


def test_a_gpu_model_without_rows_gets_a_wider_gemm_interval_than_a_measured_gpu_of_its_architecture():
    frame, context = gemm_frame(GEMM_GPUS)
    # leave-one-GPU-out: each GPU's rows predicted without it miss its bias (the mean of the others')
    unseen = frame.copy()
    for gpu in GEMM_GPUS:
        others = np.mean([b for g, b in GEMM_GPUS.items() if g != gpu])
        rows = (unseen["gpu"] == gpu).to_numpy()
        unseen.loc[rows, "measured"] = frame.loc[rows, "measured"] * np.exp(-others)
    unseen["fold"] = unseen["gpu"]
    model = iv.fit_interval_model(frame, PROFILE, context, unseen_gpu=unseen)
    assert model["kinds"]["gemm"]["tau"]["gpu"] > 0.01
    json.dumps(model)  # stays JSON-able
    measured = iv.ratio_bounds(model, PROFILE, "gemm", "Ampere", gpu="A100-PCIe-40GB")
    new_model = iv.ratio_bounds(model, PROFILE, "gemm", "Ampere", gpu="A100-SXM4-80GB")  # Ampere, no rows
    assert new_model[1] / new_model[0] > 1.2 * (measured[1] / measured[0])
    parts = iv.log_sigma(model, PROFILE, "gemm", "Ampere", gpu="A100-SXM4-80GB")
    assert float(parts["gpu"]) == pytest.approx(model["kinds"]["gemm"]["tau"]["gpu"])
    # without a leave-one-GPU-out frame there is no such term
    plain = iv.fit_interval_model(frame, PROFILE, context)
    assert iv.ratio_bounds(plain, PROFILE, "gemm", "Ampere", gpu="A100-SXM4-80GB") == pytest.approx(
        iv.ratio_bounds(plain, PROFILE, "gemm", "Ampere", gpu="A100-PCIe-40GB"))
    text = iv.confidence(model, PROFILE, "gemm", "Ampere", gpu="A100-SXM4-80GB")["text"]
    assert "no gemm rows on A100-SXM4-80GB" in text


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.integers(0, 5000), min_size=2, max_size=2, unique=True), tau=st.floats(1e-4, 1.0))
def test_the_gpu_term_shrinks_as_the_gpu_gets_rows_and_never_adds_to_a_larger_architecture_term(rows, tau):
    few, many = sorted(rows)
    term = iv._extrapolation(0.0, tau, iv.N0, True, np.array([few, many]))
    assert term[0] > term[1] > 0 and term[0] <= tau * (1 + 1e-12)  # n0 / (0 + n0) rounds
    both = iv._extrapolation(2 * tau, tau, iv.N0, False, np.array([0.0]))
    assert both[0] == pytest.approx(2 * tau)  # the larger of the two, not their sum


def test_train_inherits_the_gpu_term_of_gemm_through_the_efficiency_both_depend_on():
    frame, context = gemm_frame(GEMM_GPUS)
    train = frame.head(200).assign(kind="train", metric="samples_per_s")
    both = pd.concat([frame, train.set_index(train.index + 10_000)])
    context = pd.concat([context, context.head(200).set_index(train.index + 10_000)])
    unseen = frame.assign(fold=frame["gpu"], measured=frame["measured"] * 1.5)
    model = iv.fit_interval_model(both, PROFILE, context, unseen_gpu=unseen)
    assert model["kinds"]["train"]["tau"]["gpu"] == model["kinds"]["gemm"]["tau"]["gpu"] > 0


def test_a_parameter_at_its_bound_widens_the_estimates_that_depend_on_it():
    frame, context = gemm_frame(GEMM_GPUS, n_per_gpu=4)  # few rows per architecture: the prior matters
    train = frame.assign(kind="train", metric="samples_per_s")
    model = iv.fit_interval_model(train, PROFILE, context)
    inside = PROFILE
    at_high = PROFILE.model_copy(update={"values": {**PROFILE.values, "sustained_clock_fraction[Ampere]": 1.0}})
    assert iv.at_bound(at_high, "sustained_clock_fraction[Ampere]")
    assert not iv.at_bound(inside, "sustained_clock_fraction[Ampere]")
    wide = iv.ratio_bounds(model, at_high, "train", "Ampere")
    narrow = iv.ratio_bounds(model, inside, "train", "Ampere")
    assert wide[1] / wide[0] > 1.3 * (narrow[1] / narrow[0])
    # the prior's log-variance (0.5^2 for sustained_clock_fraction) in the share n0 / (n + n0) the rows leave open
    rows = model["kinds"]["train"]["architectures"]["Ampere"]["n"]
    parts = iv.log_sigma(model, at_high, "train", "Ampere")
    assert float(parts["bounds"]) == pytest.approx(0.25 * iv.N0 / (rows + iv.N0))
    many = iv.fit_interval_model(gemm_frame(GEMM_GPUS, n_per_gpu=400)[0].assign(kind="train", metric="samples_per_s"),
                                 PROFILE, gemm_frame(GEMM_GPUS, n_per_gpu=400)[1])
    assert float(iv.log_sigma(many, at_high, "train", "Ampere")["bounds"]) < float(parts["bounds"])
    # an architecture whose value is not at the bound, and a kind that does not depend on it, are not charged
    assert float(iv.log_sigma(model, at_high, "train", "Volta")["bounds"]) == 0.0
    assert iv.pinned(at_high, "gemm", "Ampere") == []
    reasons = iv.confidence(model, at_high, "train", "Ampere")["extrapolates"]
    assert any("sustained_clock_fraction[Ampere] = 1 sits at a bound" in line for line in reasons)


def test_source_grouping_keeps_train_and_collective_sources_whole_and_other_kinds_by_experiment():
    rows = shipped_measurements()
    groups = cv_groups(rows, "source")
    kinds = rows["kind"].to_numpy()
    for kind in ("train", "collective"):
        mine = kinds == kind
        assert len(set(groups[mine])) == rows.loc[mine, "source"].nunique()
    gemm = kinds == "gemm"
    assert len(set(groups[gemm])) > 1000  # thousands of experiments, not a dozen sources
    folds = _balanced_folds(groups, kinds, 5, seed=0)
    for group in set(groups[kinds == "train"]):
        assert len(set(folds[groups == group])) == 1
    with pytest.raises(ValueError, match="grouping 'paper' is not known; use one of train-source, source, experiment, gpu"):
        cv_groups(rows, "paper")


def test_train_source_grouping_keeps_train_sources_whole_and_collectives_by_experiment():
    rows = shipped_measurements()
    groups, experiments = cv_groups(rows, "train-source"), cv_groups(rows, "experiment")
    kinds = rows["kind"].to_numpy()
    train = kinds == "train"
    assert len(set(groups[train])) == rows.loc[train, "source"].nunique()
    assert (groups[~train] == experiments[~train]).all()


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.sampled_from(["train", "gemm"]), st.integers(1, 40)), min_size=6, max_size=60),
       k=st.integers(2, 6), seed=st.integers(0, 100))
def test_balanced_folds_put_each_group_in_one_fold_and_balance_each_kind(sizes, k, seed):
    groups = np.concatenate([[f"g{i}"] * n for i, (_, n) in enumerate(sizes)]).astype(object)
    kinds = np.concatenate([[kind] * n for kind, n in sizes]).astype(object)
    folds = _balanced_folds(groups, kinds, k, seed)
    assert set(folds) <= set(range(k))
    for group in set(groups):
        assert len(set(folds[groups == group])) == 1
    for kind in set(kinds):
        counts = np.bincount(folds[kinds == kind], minlength=k)
        largest = max(n for kd, n in sizes if kd == kind)
        assert counts.max() - counts.min() <= largest  # greedy LPT: within one group of each other


def test_source_grouped_cross_validation_never_fits_a_row_of_a_held_out_source():
    rows = shipped_measurements()
    rows = rows[rows["kind"] == "collective"]
    cv = cross_validate(rows, k=3, params=["link_bandwidth_efficiency"], catalog=CATALOG, by="source")
    folds = cv["fold"].groupby(rows.loc[cv.index, "source"]).nunique()
    assert (folds == 1).all() and cv["fold"].nunique() == 3


def test_rows_and_estimates_share_the_exact_parameter_count():
    from perfmodel.workloads import workload_from_spec
    from perfmodel.scenario import WorkloadSpec

    rows = pd.DataFrame({"kind": "train", "gpu": "A100-SXM4-80GB", "model": ["gpt3-1.3b", "transformer", "no-such"],
                         "layers": [np.nan, 24, np.nan], "hidden": [np.nan, 2048, np.nan],
                         "heads": [np.nan, 16, np.nan], "seq_len": [np.nan, 2048, np.nan],
                         "vocab": [np.nan, 50257, np.nan]})
    params = iv.row_context(rows, CATALOG)["model_params"].to_numpy()
    assert params[0] == workload_from_spec(WorkloadSpec(model="gpt3-1.3b")).params
    shaped = workload_from_spec(WorkloadSpec(model="transformer", layers=24, hidden=2048, heads=16,
                                             seq_len=2048, vocab=50257))
    assert params[1] == shaped.params
    assert params[1] != 12 * 24 * 2048 ** 2 + 50257 * 2048  # not the approximation
    assert np.isnan(params[2])


def test_leave_gpu_out_never_fits_a_row_of_the_gpu_it_predicts(monkeypatch):
    from perfmodel.calibration import fit
    from perfmodel.calibration.coverage import leave_gpu_out
    from perfmodel.calibration.measurements import check_measurements

    shapes = [(m, n, k) for m in (1024, 4096) for n in (1024, 8192) for k in (512, 8192)]
    gpus = ["H100-SXM5-80GB", "A100-SXM4-80GB", "B200"]
    rows = check_measurements(pd.DataFrame({
        "id": [f"G{i:02d}{g[:4]}" for g in gpus for i in range(len(shapes))], "kind": "gemm",
        "gpu": [g for g in gpus for _ in shapes], "num_gpus": 1,
        "m": [s[0] for _ in gpus for s in shapes], "n": [s[1] for _ in gpus for s in shapes],
        "k": [s[2] for _ in gpus for s in shapes], "dtype": "bf16", "metric": "tflops", "value": 400.0,
        "source": "synthetic"}))
    fitted_gpus = []
    real = fit.calibrate

    def spy(measurements, **kwargs):
        fitted_gpus.append(set(measurements["gpu"]))
        return real(measurements, **kwargs)

    monkeypatch.setattr(fit, "calibrate", spy)
    scored = leave_gpu_out(rows, min_rows=8, params=["gemm_tensor_core_efficiency"], catalog=CATALOG)
    assert sorted(scored["fold"].unique()) == sorted(gpus) and len(scored) == len(rows)
    for fitted, gpu in zip(fitted_gpus, sorted(gpus)):
        assert gpu not in fitted and len(fitted) == 2
    assert (scored["gpu"] == scored["fold"]).all()
    # fewer than two GPUs with enough rows: nothing to leave out
    assert leave_gpu_out(rows, min_rows=100, catalog=CATALOG).empty


def test_the_host_time_error_adds_its_square_to_the_variance():
    """sigma^2 = (the other terms) + host_log_sensitivity^2, so a step a slower host would slow has
    a wider interval than the same step on a fitted host; 0 or NaN (not a train row) adds nothing."""
    profile = default_profile()
    model = profile.provenance["interval_model"]
    host = np.array([0.0, np.nan, 0.1, 0.3])
    parts = iv.log_sigma(model, profile, "train", "Ampere", num_gpus=8.0, host=host)
    base = iv.log_sigma(model, profile, "train", "Ampere", num_gpus=8.0)["total"]
    assert np.allclose(parts["total"] ** 2, base ** 2 + np.nan_to_num(host) ** 2)
    low, high = iv.ratio_bounds(model, profile, "train", "Ampere", num_gpus=8.0, host=host)
    width = high / low
    assert width[0] == width[1] < width[2] < width[3]


def test_rows_host_variance_is_not_counted_twice():
    """A row's host term is part of its ``p``: the residual variance ``v`` is the spread beyond it."""
    frame, context = gemm_frame({"A100-PCIe-40GB": 0.0}, noise=0.2)
    without = iv.fit_interval_model(frame, PROFILE, context)["kinds"]["gemm"]
    frame[iv.HOST_COLUMN] = 0.05
    with_host = iv.fit_interval_model(frame, PROFILE, context)["kinds"]["gemm"]
    assert np.isclose(without["variance"] - with_host["variance"], 0.05 ** 2, rtol=1e-6)


def _train_frame():
    """Held-out train rows: two frameworks on Ampere at 8 and 512 GPUs, and a Hopper row."""
    ids = ["a", "b", "c", "d", "e", "f"]
    frame = pd.DataFrame({"id": ids, "kind": "train", "gpu": ["A100-SXM4-80GB"] * 5 + ["H100-SXM5-80GB"],
                          "metric": "samples_per_s", "measured": [100.0, 90.0, 80.0, 120.0, 100.0, 50.0],
                          "predicted": [100.0, 100.0, 100.0, 100.0, 110.0, 40.0]}, index=pd.RangeIndex(6))
    context = pd.DataFrame({"gpu": frame["gpu"], "architecture": iv.architectures(frame["gpu"], CATALOG),
                            "num_gpus": [8.0, 8.0, 512.0, 512.0, 8.0, 8.0], "model_params": 1e9, "seq_len": 2048.0,
                            "framework": ["megatron", "composer", "megatron", "composer", "composer", "nemo"],
                            "fabric": None, "source": ids}, index=frame.index)
    gemm, gemm_context = gemm_frame({"A100-PCIe-40GB": 0.0}, n_per_gpu=20)
    gemm.index = gemm_context.index = pd.RangeIndex(6, 6 + len(gemm))
    return pd.concat([frame, gemm]), pd.concat([context, gemm_context])


def test_confidence_names_the_nearest_held_out_rows_and_their_error():
    frame, context = _train_frame()
    model = iv.fit_interval_model(frame, PROFILE, context)
    json.dumps(model)
    assert model["held_out"]["id"] == ["a", "b", "c", "d", "e", "f"]  # train rows only, no GEMM rows
    near = iv.confidence(model, PROFILE, "train", "Ampere", num_gpus=8, model_params=1e9, seq_len=2048,
                         framework="composer")
    ids = [row["id"] for row in near["nearest"]]
    assert ids[:2] == ["b", "e"]  # Ampere, 8 GPUs, composer (same distance on every scale axis)
    assert near["nearest"][0]["error"] == pytest.approx(90.0 / 100.0 - 1.0)
    assert "nearest measured: b (8 x A100-SXM4-80GB, composer), measured 0.90x" in near["text"]
    # median |error| of the Ampere rows: |0|, |-0.1|, |-0.2|, |0.2|, |100/110 - 1|
    assert near["measured_rows"]["median_error"] == pytest.approx(0.1)
    megatron = iv.confidence(model, PROFILE, "train", "Ampere", num_gpus=512, framework="megatron")
    assert megatron["nearest"][0]["id"] == "c"
    without = {**model}
    without.pop("held_out")
    assert iv.confidence(without, PROFILE, "train", "Ampere", num_gpus=8)["nearest"] == []
