"""Prediction intervals: honest coverage out of sample, wider away from the data, monotone in level."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.calibration.predictors  # noqa: F401  (registers the efficiency parameters)
from perfmodel.calibration import intervals as iv
from perfmodel.calibration.coverage import (
    calibration_points, coverage_table, group_out_intervals, held_out_intervals, without_architecture)
from perfmodel.calibration.fit import cross_validate
from perfmodel.calibration.measurements import shipped_measurements
from perfmodel.hardware.catalog import load_catalog
from perfmodel.profile import CalibrationProfile

CATALOG = load_catalog()
GPUS = {"A100-SXM4-80GB": 0.05, "H100-SXM5-80GB": -0.10, "V100-SXM2-16GB": 0.15}  # log bias per GPU
FRAMEWORKS = {"pytorch": 0.0, "tensorflow": 0.12}
PROFILE = CalibrationProfile(
    values={"gemm_tensor_core_efficiency[Ampere]": 0.8, "gemm_tensor_core_efficiency[Hopper]": 0.8, "gemm_tensor_core_efficiency": 0.8,
            "sustained_clock_fraction[Ampere]": 0.8, "sustained_clock_fraction[Hopper]": 0.7,
            "sustained_clock_fraction": 0.75},
    uncertainty={"gemm_tensor_core_efficiency[Ampere]": 0.02, "gemm_tensor_core_efficiency[Hopper]": 0.02, "gemm_tensor_core_efficiency": 0.05,
                 "sustained_clock_fraction[Ampere]": 0.03, "sustained_clock_fraction[Hopper]": 0.03,
                 "sustained_clock_fraction": 0.08})


def synthetic_cv(n=900, noise=0.2, bias=0.0, seed=0, folds=5):
    """A cross-validated frame whose log ratio measured/predicted is a per-GPU bias + per-framework
    bias + ``bias`` + Student-t(5) noise of scale ``noise``, and its row context."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice(list(GPUS), n)
    frameworks = rng.choice(list(FRAMEWORKS), n)
    predicted = rng.uniform(1.0, 100.0, n)
    log_ratio = (bias + np.array([GPUS[g] for g in gpus]) + np.array([FRAMEWORKS[f] for f in frameworks])
                 + noise * rng.standard_t(5, n))
    metric = rng.choice(["samples_per_s", "step_time_s"], n)
    measured = np.where(metric == "step_time_s", predicted / np.exp(log_ratio), predicted * np.exp(log_ratio))
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "kind": "train", "gpu": gpus, "metric": metric,
                          "measured": measured, "predicted": predicted, "fold": rng.integers(0, folds, n)})
    context = pd.DataFrame({"architecture": iv.architectures(gpus, CATALOG),
                            "num_gpus": rng.choice([1, 8, 16, 64], n).astype(float),
                            "model_params": 10 ** rng.uniform(8, 10, n), "seq_len": 2048.0,
                            "framework": frameworks, "fabric": None, "source": "synthetic"}, index=frame.index)
    return frame, context


_FRAME, _CONTEXT = synthetic_cv()
MODEL = iv.fit_interval_model(_FRAME, PROFILE, _CONTEXT)


def coverage(frame, level):
    low, high = (f"low_{round(100 * level)}", f"high_{round(100 * level)}")
    return ((frame["measured"] >= frame[low]) & (frame["measured"] <= frame[high])).mean()


@pytest.mark.parametrize("bias", [0.0, 0.4])
def test_held_out_coverage_is_near_nominal_with_and_without_a_systematic_bias(bias):
    frame, context = synthetic_cv(bias=bias)
    scored = held_out_intervals(frame, context, PROFILE)
    assert 0.70 <= coverage(scored, 0.8) <= 0.90
    assert 0.40 <= coverage(scored, 0.5) <= 0.60
    assert 0.90 <= coverage(scored, 0.95) <= 0.99
    # a median ratio != 1 moves the interval, it does not only widen it
    width = np.median(scored["high_80"] / scored["low_80"])
    assert width < np.exp(2 * 1.6 * 0.2 * 1.5)


@pytest.mark.parametrize("by, lowest, widest", [("experiment", 0.70, 2.5), ("source", 0.70, 5.0)])
def test_shipped_collective_rows_are_covered_under_cross_validation(by, lowest, widest):
    """Coverage of shipped rows under 3-fold CV (a cheap fit: the link bandwidths and latencies,
    collective rows; NCCL's own protocol latencies, the priors, are below the measured floors),
    with interval models fitted on the other folds only.  Folds of sources (the default, every
    row's source unseen by both the parameters and the interval model) leave each interval model
    only the ~7 sources of the other folds, whose medians this cheap fit leaves far apart: the
    between-source variance the nodes add makes the intervals wide (4.4 measured; 2.7 without
    it, at a coverage of 0.73 instead of 0.80), not hidden."""
    rows = shipped_measurements()
    rows = rows[rows["kind"] == "collective"]
    cv = cross_validate(rows, k=3, params=["link_bandwidth_efficiency", "link_latency"], catalog=CATALOG, by=by)
    context = iv.row_context(rows, CATALOG)
    scored = held_out_intervals(cv[cv["predicted"].notna()], context, PROFILE)
    assert len(scored) > 200
    assert lowest <= coverage(scored, 0.8) <= 0.90
    assert np.median(scored["high_80"] / scored["low_80"]) <= widest


def test_an_architecture_with_no_rows_gets_a_wider_interval_than_a_measured_one():
    frame, context = synthetic_cv()
    model = iv.fit_interval_model(frame, PROFILE, context)
    job = dict(num_gpus=8, model_params=1e9, seq_len=2048)
    for measured in ("Ampere", "Hopper", "Volta"):
        low_m, high_m = iv.ratio_bounds(model, PROFILE, "train", measured, **job)
        low_u, high_u = iv.ratio_bounds(model, PROFILE, "train", "Blackwell", **job)
        assert high_u / low_u > high_m / low_m
    # the same after refitting without Hopper: Hopper is now the unmeasured one
    local = without_architecture(PROFILE, "Hopper")
    unseen = iv.fit_interval_model(frame[context["architecture"] != "Hopper"], local, context)
    low_u, high_u = iv.ratio_bounds(unseen, local, "train", "Hopper", **job)
    for measured in ("Ampere", "Volta"):
        low_m, high_m = iv.ratio_bounds(unseen, local, "train", measured, **job)
        assert high_u / low_u > high_m / low_m


def family_cv(n=1200, spread={"transformer": 0.06, "cnn": 0.25}, seed=1):
    """A cross-validated frame of one architecture's rows whose log ratios spread ``spread[family]``
    (normal), half of each workload family, and its row context."""
    rng = np.random.default_rng(seed)
    family = rng.choice(list(spread), n)
    frame, context = synthetic_cv(n=n, noise=0.0, seed=seed)
    log_ratio = np.array([spread[f] for f in family]) * rng.standard_normal(n)
    frame = frame.assign(gpu="A100-SXM4-80GB", metric="samples_per_s", measured=frame["predicted"] * np.exp(log_ratio))
    context = context.assign(architecture="Ampere", family=family, framework="pytorch")
    return frame, context


def test_each_workload_family_gets_the_spread_of_its_own_rows():
    frame, context = family_cv()
    model = iv.fit_interval_model(frame, PROFILE, context)
    width = {f: np.divide(*iv.ratio_bounds(model, PROFILE, "train", "Ampere", family=f)[::-1])
             for f in ("transformer", "cnn", None)}
    assert width["cnn"] > 2.0 ** 0.5 * width["transformer"]
    assert width["transformer"] < width[None] < width["cnn"]  # an unknown family: the pooled rows
    # out of sample, each family's own rows are covered near nominal (one band for both would cover
    # the transformers' nearly all and the CNNs' about half)
    scored = held_out_intervals(frame, context, PROFILE)
    for name in ("transformer", "cnn"):
        assert 0.72 <= coverage(scored[context["family"] == name], 0.8) <= 0.88, name
    # the text names the family's rows
    text = iv.confidence(model, PROFILE, "train", "Ampere", family="cnn")["text"]
    assert "of cnn models" in text


def gemm_cv(n=900, seed=2):
    """Cross-validated GEMM rows: FP32 (CUDA-core) calls on an A100 and a T4, tensor-core GEMMs on
    an A100 and an H100, each spread 0.1 (normal) around the model, and their row context from
    :func:`iv.row_context` (which reads each row's unit from its dtype)."""
    rng = np.random.default_rng(seed)
    places = [("A100-PCIe-40GB", "fp32"), ("T4", "fp32"), ("A100-PCIe-40GB", "bf16"), ("H100-SXM5-80GB", "bf16")]
    pick = rng.integers(0, len(places), n)
    predicted = rng.uniform(10.0, 1000.0, n)
    rows = pd.DataFrame({"id": [f"g{i}" for i in range(n)], "kind": "gemm",
                         "gpu": [places[i][0] for i in pick], "dtype": [places[i][1] for i in pick],
                         "num_gpus": 1, "metric": "time_us", "value": predicted * np.exp(0.1 * rng.standard_normal(n)),
                         "m": 1024, "n": 1024, "k": 1024, "source": "synthetic"})
    frame = pd.DataFrame({"id": rows["id"], "kind": "gemm", "gpu": rows["gpu"], "metric": "time_us",
                          "measured": rows["value"], "predicted": predicted, "fold": rng.integers(0, 5, n)})
    return frame, iv.row_context(rows, CATALOG)


def test_an_fp32_gemm_on_a_gpu_measured_only_with_tensor_core_gemms_counts_as_unmeasured():
    """A GEMM's unit is its family: an FP32 GEMM (CUDA cores, ``gemm_cuda_core_efficiency``) on an
    H100 whose rows are all tensor-core GEMMs is a regime no row tested, so it gets the interval of
    a GPU never measured, not the H100's tensor-core rows' narrow one."""
    frame, context = gemm_cv()
    assert set(context["family"]) == {"cuda-core", "tensor-core"}
    gpus = pd.Series({"A100-PCIe-40GB": 0.5, "T4": 0.5, "H100-SXM5-80GB": 0.5})  # tau_gpu from a fake study
    unseen_gpu = frame.assign(measured=frame["predicted"] * np.exp(np.where(frame["gpu"].map(gpus) > 0, 0.4, 0.0)
                                                                 * np.sign(np.arange(len(frame)) % 2 - 0.5)))
    model = iv.fit_interval_model(frame, PROFILE, context, unseen_gpu=unseen_gpu)
    assert model["kinds"]["gemm"]["tau"]["gpu"] > 0

    def width(gpu, family):
        low, high = iv.ratio_bounds(model, PROFILE, "gemm", iv.architectures([gpu], CATALOG)[0], gpu=gpu,
                                    family=family)
        return float(high / low)

    # as wide as on an H100 never measured at all, far wider than its tensor-core GEMMs' or an A100's FP32 ones
    assert width("H100-SXM5-80GB", "cuda-core") == pytest.approx(width("H100-PCIe-80GB", "cuda-core"), rel=1e-6)
    assert width("H100-SXM5-80GB", "cuda-core") > 1.5 * width("H100-SXM5-80GB", "tensor-core")
    assert width("H100-SXM5-80GB", "cuda-core") > 1.5 * width("A100-PCIe-40GB", "cuda-core")
    # and the other way round: the T4's tensor-core GEMMs were never measured, its FP32 ones were
    assert width("T4", "tensor-core") > 1.5 * width("T4", "cuda-core")
    # the unit's own efficiency is the parameter whose error an FP32 GEMM carries
    profile = PROFILE.model_copy(update={
        "values": {**PROFILE.values, "gemm_cuda_core_efficiency[Ampere]": 0.8},
        "uncertainty": {**PROFILE.uncertainty, "gemm_cuda_core_efficiency[Ampere]": 0.2}})
    assert iv.depends("gemm", "cuda-core") == ("gemm_cuda_core_efficiency",)
    assert iv.parameter_variance(profile, "gemm", "Ampere", "cuda-core") == pytest.approx((0.2 / 0.8) ** 2)
    assert iv.parameter_variance(profile, "gemm", "Ampere", "tensor-core") == pytest.approx((0.02 / 0.8) ** 2)
    assert [iv.gemm_unit(d) for d in ("fp32", "FP32", "bf16", "fp8", None, "")] == [
        "cuda-core", "cuda-core", "tensor-core", "tensor-core", None, None]


def source_cv(n_sources=24, rows=30, seed=1, shift_sigma=0.25):
    """Training rows of ``n_sources`` sources, half on A100 (each source shifted by N(0,
    ``shift_sigma``) in log), half on H100 (sources agree); within a source the rows spread 0.03;
    folds are groups of sources, as ``calibrate --cv`` holds training rows out."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(n_sources):
        ampere = s % 2 == 0
        shift = rng.normal(0.0, shift_sigma) if ampere else 0.0
        predicted = rng.uniform(1.0, 100.0, rows)
        parts.append(pd.DataFrame({"kind": "train", "gpu": "A100-SXM4-80GB" if ampere else "H100-SXM5-80GB",
                                   "metric": "samples_per_s", "predicted": predicted,
                                   "measured": predicted * np.exp(shift + 0.03 * rng.standard_normal(rows)),
                                   "fold": s % 6, "source": f"source {s}"}))
    frame = pd.concat(parts, ignore_index=True)
    frame["id"] = [f"r{i}" for i in range(len(frame))]
    context = pd.DataFrame({"architecture": iv.architectures(frame["gpu"], CATALOG), "num_gpus": 8.0,
                            "model_params": 1e9, "seq_len": 2048.0, "framework": None, "fabric": None,
                            "source": frame.pop("source")}, index=frame.index)
    return frame, context


def test_sources_that_disagree_widen_their_nodes_and_sources_that_agree_do_not(monkeypatch):
    """A new run is a new source: its error is its source's shift plus the row's own.  Rows that
    cluster by source hide the first from a robust spread, so each node adds the between-source
    variance of its sources' medians.  The A100 sources here disagree (log shifts ~ N(0, 0.25)),
    the H100 ones agree: the A100 node widens by about the shifts' variance, the H100 node stays;
    held out by source, the coverage of each is nearer 80 % than without the term (mean of five
    draws of the shifts)."""
    frame, context = source_cv()
    nodes = iv.fit_interval_model(frame, PROFILE, context)["kinds"]["train"]["architectures"]
    with monkeypatch.context() as patch:
        patch.setattr(iv, "_between_variance", lambda r, groups: 0.0)
        plain = iv.fit_interval_model(frame, PROFILE, context)["kinds"]["train"]["architectures"]
    widened = {a: nodes[a]["variance"] - plain[a]["variance"] for a in ("Ampere", "Hopper")}
    assert widened["Ampere"] > 0.5 * 0.25 ** 2
    assert abs(widened["Hopper"]) < 0.05 * widened["Ampere"]  # only through the shrinkage to the kind
    gaps = {True: [], False: []}
    for seed in range(1, 6):
        frame, context = source_cv(seed=seed)
        for with_term in (True, False):
            with monkeypatch.context() as patch:
                if not with_term:
                    patch.setattr(iv, "_between_variance", lambda r, groups: 0.0)
                scored = held_out_intervals(frame, context, PROFILE)
            gaps[with_term].append([coverage(scored[(context["architecture"] == a).to_numpy()], 0.8)
                                    for a in ("Ampere", "Hopper")])
    for column in range(2):
        assert (abs(np.mean(np.array(gaps[True])[:, column]) - 0.8)
                < abs(np.mean(np.array(gaps[False])[:, column]) - 0.8))


def uneven_sources_cv(seed=1, big=3, big_rows=200, small=24, small_rows=4):
    """Training rows of sources of unequal size on one architecture: ``big`` sources of
    ``big_rows`` rows that the model fits (log shifts ~ N(0, 0.03)) and ``small`` sources of
    ``small_rows`` rows that it does not (N(0, 0.3)); rows spread 0.03 within a source; folds of
    sources."""
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(big + small):
        rows = big_rows if s < big else small_rows
        predicted = rng.uniform(1.0, 100.0, rows)
        shift = rng.normal(0.0, 0.03 if s < big else 0.3)
        parts.append(pd.DataFrame({"kind": "train", "gpu": "A100-SXM4-80GB", "metric": "samples_per_s",
                                   "predicted": predicted,
                                   "measured": predicted * np.exp(shift + 0.03 * rng.standard_normal(rows)),
                                   "fold": s % 5, "source": f"source {s}"}))
    frame = pd.concat(parts, ignore_index=True)
    frame["id"] = [f"r{i}" for i in range(len(frame))]
    context = pd.DataFrame({"architecture": "Ampere", "num_gpus": 8.0, "model_params": 1e9, "seq_len": 2048.0,
                            "framework": None, "fabric": None, "source": frame.pop("source")}, index=frame.index)
    return frame, context


def test_every_source_counts_once_in_the_quantiles(monkeypatch):
    """A user's run, like each held-back set, is one new source: an interval should cover the rows
    of a random source 80 % of the time, not a random row of the sources at hand.  Three large
    well-fitted sources and 24 small scattered ones: quantiles of rows (the large sources' 600 of
    696 rows) cover a small source's rows about a third of the time; every source weighing one,
    about 80 % (held out by source, the mean over sources of each source's row coverage, five draws)."""
    def source_coverage(weighted):
        values = []
        for seed in range(1, 6):
            frame, context = uneven_sources_cv(seed)
            with monkeypatch.context() as patch:
                if not weighted:
                    patch.setattr(iv, "_source_weights", lambda groups: np.ones(len(groups)))
                scored = held_out_intervals(frame, context, PROFILE)
            inside = (scored["measured"] >= scored["low_80"]) & (scored["measured"] <= scored["high_80"])
            values.append(inside.groupby(context["source"]).mean().mean())
        return float(np.mean(values))

    assert 0.72 <= source_coverage(weighted=True) <= 0.88
    assert source_coverage(weighted=False) < 0.5
    assert iv._source_weights(["a", "a", "b", None]).tolist() == [0.5, 0.5, 1.0, 1.0]
    values = np.array([3.0, 1.0, 2.0, 4.0])
    assert iv._weighted_quantiles(values, [0.125, 0.5, 0.875], np.ones(4)).tolist() == [1.0, 2.5, 4.0]
    assert iv._weighted_quantiles(values, [0.5], [1.0, 1.0, 1.0, 3.0])[0] > 3.0


def test_a_family_with_few_rows_is_shrunk_towards_the_kind():
    frame, context = family_cv(n=800, spread={"transformer": 0.06, "cnn": 0.06})
    cnn = np.flatnonzero(context["family"].to_numpy() == "cnn")
    keep = np.ones(len(frame), dtype=bool)
    keep[cnn[5:]] = False  # five CNN rows, far off
    frame = frame.copy()
    shifts = np.array([0.5, -0.5, 0.3, -0.3, 0.0])
    frame.loc[frame.index[cnn[:5]], "measured"] = frame["predicted"].to_numpy()[cnn[:5]] * np.exp(shifts)
    model = iv.fit_interval_model(frame[keep], PROFILE, context[keep])
    kind, node = model["kinds"]["train"], model["kinds"]["train"]["families"]["cnn"]
    own = iv._robust(shifts)[1]
    weight = 5 / (5 + iv.N0)
    assert node["n"] == 5
    assert node["variance"] == pytest.approx(weight * own + (1 - weight) * kind["variance"], rel=0.05)
    assert kind["variance"] < node["variance"] < own


def test_scale_outside_the_fitted_range_and_assumed_inputs_widen_the_interval():
    frame, context = synthetic_cv()
    model = iv.fit_interval_model(frame, PROFILE, context)
    inside = iv.ratio_bounds(model, PROFILE, "train", "Ampere", model_params=1e9)
    outside = iv.ratio_bounds(model, PROFILE, "train", "Ampere", model_params=1e12)
    assumed = iv.ratio_bounds(model, PROFILE, "train", "Ampere", model_params=1e9, assumed={"framework": True})
    assert outside[1] / outside[0] > inside[1] / inside[0]
    assert assumed[1] / assumed[0] > inside[1] / inside[0]  # the frameworks' biases differ by 0.12


@settings(max_examples=60, deadline=None)
@given(levels=st.lists(st.floats(0.01, 0.99), min_size=2, max_size=2, unique=True),
       arch=st.sampled_from(["Ampere", "Hopper", "Volta", "Blackwell", None]),
       num_gpus=st.floats(1, 1e5), model_params=st.floats(1e6, 1e13),
       framework=st.booleans())
def test_bounds_are_monotone_in_the_level(levels, arch, num_gpus, model_params, framework):
    small, large = sorted(levels)
    job = dict(num_gpus=num_gpus, model_params=model_params, assumed={"framework": framework})
    low_s, high_s = iv.ratio_bounds(MODEL, PROFILE, "train", arch, small, **job)
    low_l, high_l = iv.ratio_bounds(MODEL, PROFILE, "train", arch, large, **job)
    assert 0 < low_l <= low_s * (1 + 1e-12)
    assert low_s < high_s <= high_l * (1 + 1e-12)


def test_one_call_on_arrays_equals_one_call_per_estimate():
    arch = np.array(["Ampere", "Hopper", "Blackwell", None, "Volta"], dtype=object)
    gpus = np.array([1, 8, 512, 4096, 64], dtype=float)
    low, high = iv.ratio_bounds(MODEL, PROFILE, "train", arch, 0.8, num_gpus=gpus, model_params=1e9)
    for i in range(len(arch)):
        one = iv.ratio_bounds(MODEL, PROFILE, "train", arch[i], 0.8, num_gpus=gpus[i], model_params=1e9)
        assert (low[i], high[i]) == pytest.approx((float(one[0]), float(one[1])))
    big = iv.ratio_bounds(MODEL, PROFILE, "train", np.resize(arch, 200_000), num_gpus=np.resize(gpus, 200_000))
    assert big[0].shape == (200_000,) and np.all(big[0] < big[1])


def test_time_metrics_invert_the_ratio_bounds():
    low, high = iv.bounds(["step_time_s", "samples_per_s"], [10.0, 10.0], 0.8, 1.25)
    assert low == pytest.approx([8.0, 8.0]) and high == pytest.approx([12.5, 12.5])


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match=r"interval level must be in \(0, 0.99\], got 1.5"):
        iv.ratio_bounds(MODEL, PROFILE, "train", "Ampere", 1.5)
    with pytest.raises(ValueError, match="no kind 'gemm'; it has train"):
        iv.ratio_bounds(MODEL, PROFILE, "gemm", "Ampere")
    with pytest.raises(ValueError, match=r"assumed inputs \['dataset'\] have no interval term"):
        iv.ratio_bounds(MODEL, PROFILE, "train", "Ampere", assumed={"dataset": True})


def test_confidence_names_what_is_assumed_and_what_extrapolates():
    frame, context = synthetic_cv()
    rows = frame.join(context)
    far = iv.confidence(MODEL, PROFILE, "train", "Blackwell", num_gpus=4096, model_params=1e12,
                        assumed={"framework": "pytorch (default)"}, rows=rows)
    near = iv.confidence(MODEL, PROFILE, "train", "Hopper", num_gpus=8, model_params=1e9, rows=rows)
    assert near["extrapolates"] == [] and near["assumed"] == {}
    assert near["measured_rows"]["n"] == (context["architecture"] == "Hopper").sum()
    assert all(row["gpu"] == "H100-SXM5-80GB" for row in near["nearest"])
    assert len(far["extrapolates"]) == 3  # architecture, GPU count, model size
    assert "Blackwell" in far["extrapolates"][0] and "framework=pytorch (default)" in far["text"]
    ratio = far["interval_ratio"]
    assert ratio[1] / ratio[0] > near["interval_ratio"][1] / near["interval_ratio"][0]


def test_interval_table_is_the_model_at_each_architecture():
    table = iv.interval_table(MODEL, PROFILE)
    assert set(table) == {"train", "train[Ampere]", "train[Hopper]", "train[Volta]"}
    low, high = iv.ratio_bounds(MODEL, PROFILE, "train", "Hopper")
    assert table["train[Hopper]"] == pytest.approx((float(low), float(high)))


def test_coverage_table_counts_rows_inside_the_bounds():
    frame = pd.DataFrame({"kind": ["a", "a", "a", "b"], "gpu": ["x", "x", "y", "y"], "measured": [1.0, 2.0, 3.0, 4.0],
                          "predicted": [1.0, 1.0, 1.0, 1.0], "low": [0.5, 0.5, 0.5, 0.5], "high": [1.5, 2.5, 2.5, 8.0]})
    table = coverage_table(frame, "kind").set_index("kind")
    assert table.loc["all", "coverage_80"] == pytest.approx(0.75)
    assert table.loc["a", "coverage_80"] == pytest.approx(2 / 3)
    assert table.loc["b", "width_80"] == pytest.approx(16.0)
    assert np.isnan(table.loc["a", "coverage_50"])
    assert calibration_points(frame) == [(0.8, 0.75, 4)]
    with pytest.raises(ValueError, match="no column 'framework' to group by"):
        coverage_table(frame, "framework")


def test_group_out_intervals_bound_each_group_with_a_model_that_never_saw_it():
    frame, context = synthetic_cv()
    held = frame.assign(fold=context["architecture"])
    scored = group_out_intervals(held, frame, context, PROFILE, "architecture")
    assert len(scored) == len(frame)
    in_sample = held_out_intervals(frame, context, PROFILE)
    width_out = np.median(scored["high_80"] / scored["low_80"])
    assert width_out > np.median(in_sample["high_80"] / in_sample["low_80"])
    assert coverage(scored, 0.8) >= 0.70


def test_calibration_curve_plot_draws_one_point_per_level():
    from perfmodel.plots.calibration_curve import calibration_curve

    frame, context = synthetic_cv()
    scored = held_out_intervals(frame, context, PROFILE)
    figure = calibration_curve(scored, by="gpu")
    ax = figure.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label().startswith("all")]
    assert len(lines) == 1 and len(lines[0].get_xdata()) == 3
    with pytest.raises(ValueError, match="no interval columns"):
        calibration_curve(frame)


def test_time_bounds_use_the_model_when_the_profile_has_one_and_the_table_otherwise():
    with_model = PROFILE.model_copy(update={"provenance": {"interval_model": MODEL}})
    low, high = iv.time_bounds(with_model, np.array([10.0, 20.0]), "Hopper", num_gpus=8)
    ratio = iv.ratio_bounds(MODEL, PROFILE, "train", "Hopper", num_gpus=8)
    assert low == pytest.approx(np.array([10.0, 20.0]) / ratio[1])
    assert high == pytest.approx(np.array([10.0, 20.0]) / ratio[0])
    table_only = PROFILE.model_copy(update={"interval": {"train": (0.8, 1.25)}})
    assert iv.time_bounds(table_only, 10.0, "Hopper") == (pytest.approx(8.0), pytest.approx(12.5))
    with pytest.raises(ValueError, match="only 80% intervals"):
        iv.time_bounds(table_only, 10.0, "Hopper", level=0.5)


def test_the_interval_model_survives_a_profile_yaml_round_trip(tmp_path):
    from perfmodel.profile import load_profile

    profile = PROFILE.model_copy(update={"provenance": {"interval_model": MODEL},
                                         "interval": iv.interval_table(MODEL, PROFILE)})
    profile.save(tmp_path / "profile.yaml")
    loaded = load_profile(tmp_path / "profile.yaml")
    assert loaded.provenance["interval_model"] == MODEL
    assert loaded.interval["train[Ampere]"] == pytest.approx(profile.interval["train[Ampere]"])


def test_a_parameter_on_an_unfitted_architecture_is_more_uncertain_than_on_any_fitted_one():
    unseen = iv.parameter_variance(PROFILE, "train", "Blackwell")
    for fitted in ("Ampere", "Hopper"):
        assert unseen > iv.parameter_variance(PROFILE, "train", fitted)
    # gemm depends on gemm_tensor_core_efficiency only: (0.05/0.8)^2 spread + mean of the groups' (0.02/0.8)^2
    assert iv.parameter_variance(PROFILE, "gemm", "Blackwell") == pytest.approx((0.05 / 0.8) ** 2 + (0.02 / 0.8) ** 2)


def test_a_later_stage_value_fitted_on_the_architecture_absorbs_the_earlier_ones_error():
    # the training stage fits sustained_clock_fraction[Ampere] with the kernel stage's efficiency held:
    # a step on Ampere is uncertain by the clock's own error only, whatever the efficiency's
    clock_only = (0.03 / 0.8) ** 2
    assert iv.parameter_variance(PROFILE, "train", "Ampere") == pytest.approx(clock_only)
    vague = PROFILE.model_copy(update={"uncertainty": {**PROFILE.uncertainty,
                                                       "gemm_tensor_core_efficiency[Ampere]": 0.4}})
    assert iv.parameter_variance(vague, "train", "Ampere") == pytest.approx(clock_only)
    assert iv.parameter_variance(vague, "gemm", "Ampere") == pytest.approx((0.4 / 0.8) ** 2)
    # a partially pooled clock was still refitted on the architecture's rows with the efficiency held:
    # it absorbs the efficiency's error as a determined one does, its own (wider) error says what is left
    pooled = vague.model_copy(update={"provenance": {"pooled": ["sustained_clock_fraction[Ampere]"]}})
    assert iv.parameter_variance(pooled, "train", "Ampere") == pytest.approx(clock_only)
    # a clock no row fitted (kept at its prior) absorbs nothing: both terms count
    unfitted = vague.model_copy(update={"provenance": {"not_determined": ["sustained_clock_fraction[Ampere]"]}})
    assert iv.parameter_variance(unfitted, "train", "Ampere") == pytest.approx((0.4 / 0.8) ** 2 + clock_only)
    # a clock at its bound: its Laplace error means nothing there (the bound term charges its prior)
    at_bound = vague.model_copy(update={"values": {**vague.values, "sustained_clock_fraction[Ampere]": 1.0}})
    assert iv.parameter_variance(at_bound, "train", "Ampere") == 0.0


@settings(max_examples=50, deadline=None)
@given(st.floats(0.001, 0.5), st.floats(0.001, 0.5), st.sampled_from(["Ampere", "Hopper", "Blackwell", "Volta"]),
       st.sampled_from(["determined", "pooled", "not_determined"]))
def test_the_propagated_variance_is_at_most_the_sum_of_the_marginal_ones(efficiency_error, clock_error, architecture,
                                                                          clock_status):
    clock = f"sustained_clock_fraction[{architecture}]"
    profile = PROFILE.model_copy(update={
        "uncertainty": {**PROFILE.uncertainty, f"gemm_tensor_core_efficiency[{architecture}]": efficiency_error * 0.8,
                        clock: clock_error * 0.8},
        "provenance": {} if clock_status == "determined" else {clock_status: [clock]}})
    marginal = sum(iv._relative_variance(profile, name, architecture) for name in iv.DEPENDS["train"])
    p = float(iv.parameter_variance(profile, "train", architecture))
    assert 0.0 <= p <= marginal * (1 + 1e-12)
    fitted_clock = clock in profile.values and clock_status != "not_determined"
    assert p == pytest.approx(marginal if not fitted_clock else clock_error ** 2 * (0.8 / profile.values[
        f"sustained_clock_fraction[{architecture}]"]) ** 2)


def test_leave_group_out_never_fits_a_row_of_the_group_it_predicts(monkeypatch):
    from perfmodel.calibration import fit
    from perfmodel.calibration.coverage import leave_group_out
    from perfmodel.calibration.measurements import check_measurements

    shapes = [(m, n, k) for m in (1024, 4096) for n in (1024, 8192) for k in (512, 8192)]
    rows = check_measurements(pd.DataFrame({
        "id": [f"G{i:02d}" for i in range(len(shapes))], "kind": "gemm", "gpu": "H100-SXM5-80GB", "num_gpus": 1,
        "m": [s[0] for s in shapes], "n": [s[1] for s in shapes], "k": [s[2] for s in shapes], "dtype": "bf16",
        "metric": "tflops", "value": 500.0, "source": "synthetic"}))
    groups = np.where(np.arange(len(rows)) % 2 == 0, "even", "odd").astype(object)
    groups[0] = None  # a row without a group is always fitted, never held out
    fitted_ids = []
    real = fit.calibrate

    def spy(measurements, **kwargs):
        fitted_ids.append(set(measurements["id"]))
        return real(measurements, **kwargs)

    monkeypatch.setattr(fit, "calibrate", spy)
    scored = leave_group_out(rows, groups, params=["gemm_tensor_core_efficiency"], catalog=CATALOG)
    assert sorted(scored["fold"]) == sorted(g for g in groups if g is not None)
    for fitted, name in zip(fitted_ids, ["even", "odd"]):
        held = set(scored.loc[scored["fold"] == name, "id"])
        assert held and not held & fitted and "G00" in fitted
    with pytest.raises(ValueError, match="at least 2 groups"):
        leave_group_out(rows, ["one"] * len(rows))


def test_interval_bounds_of_a_validate_frame_use_the_model_or_the_legacy_table():
    frame = _FRAME.head(50)
    with_model = PROFILE.model_copy(update={"provenance": {"interval_model": MODEL}})
    low, high = iv.interval_bounds(frame, with_model, CATALOG)
    ratio_low, ratio_high = iv.ratio_bounds(MODEL, PROFILE, "train", _CONTEXT["architecture"].head(50).to_numpy())
    expected = iv.bounds(frame["metric"], frame["predicted"], ratio_low, ratio_high)
    assert low == pytest.approx(expected[0]) and high == pytest.approx(expected[1])
    legacy = PROFILE.model_copy(update={"interval": {"train": (0.5, 2.0)}})
    low, high = iv.interval_bounds(frame, legacy, CATALOG)
    times = (frame["metric"] == "step_time_s").to_numpy()
    assert low == pytest.approx(frame["predicted"].to_numpy() * 0.5)
    assert high == pytest.approx(frame["predicted"].to_numpy() * 2.0)
    assert times.any()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 80), noise=st.floats(0.01, 1.0), seed=st.integers(0, 1000), known=st.booleans())
def test_fitted_quantiles_are_monotone_and_spreads_positive_for_any_row_count(n, noise, seed, known):
    frame, context = synthetic_cv(n=n, noise=noise, seed=seed)
    profile = PROFILE if known else CalibrationProfile()  # with and without parameter uncertainty
    model = iv.fit_interval_model(frame, profile, context)
    z = np.asarray(model["kinds"]["train"]["z"])
    assert np.all(np.diff(z) >= -1e-12) and z[0] < 0 < z[-1]
    low, high = iv.ratio_bounds(model, profile, "train", ["Ampere", "Blackwell"], 0.8, num_gpus=8)
    assert np.all(np.isfinite(low)) and np.all(low < high)


def test_the_saved_cross_validated_rows_refit_the_same_interval_model(tmp_path):
    """``calibrate --cv K --save-cv DIR`` writes the rows its interval model was fitted on, and
    ``scripts/refit_intervals.py`` rebuilds that model from them alone (no fits): the same dict."""
    import importlib.util
    from pathlib import Path

    from perfmodel.cli import main
    from perfmodel.profile import load_profile

    rows = shipped_measurements()
    rows = rows[(rows["kind"] == "gemm") & rows["gpu"].isin(["T4", "V100-PCIe-32GB"])].iloc[::400]
    rows.to_csv(tmp_path / "m.csv", index=False)
    assert main(["calibrate", str(tmp_path / "m.csv"), "--cv", "2", "--cv-by", "experiment", "--jobs", "1",
                 "--params", "gemm_cuda_core_efficiency", "--save-cv", str(tmp_path), "-o",
                 str(tmp_path / "p.yaml")]) == 0
    path = Path(__file__).resolve().parents[1] / "scripts" / "refit_intervals.py"
    spec = importlib.util.spec_from_file_location("refit_intervals", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    saved = load_profile(tmp_path / "p.yaml")
    assert script.main([str(tmp_path / "p.yaml"), str(tmp_path), str(tmp_path / "m.csv"), "-o",
                        str(tmp_path / "q.yaml")]) == 0
    refitted = load_profile(tmp_path / "q.yaml")
    assert refitted.provenance["interval_model"] == saved.provenance["interval_model"]
    assert refitted.values == saved.values and refitted.interval == saved.interval
    # rows saved from other measurement files: refused, naming the file and the rows
    other = rows.iloc[:5]
    other.to_csv(tmp_path / "other.csv", index=False)
    with pytest.raises(SystemExit, match=r"held_out.csv.gz: \d+ of its \d+ rows are not rows of .*other.csv"):
        script.main([str(tmp_path / "p.yaml"), str(tmp_path), str(tmp_path / "other.csv"), "-o",
                     str(tmp_path / "r.yaml")])
