"""The host's per-op dispatch time is a trait of the software stack: each framework has its own
value, and a framework whose rows never show it starts from the median of the stacks whose rows
determine it (partial pooling, ``Parameter.pools``) and is refitted on its own rows."""

import math

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate, load_catalog
from perfmodel.calibration.fit import _pooled_centre, pool_groups
from perfmodel.chain import evaluate
from perfmodel.models.compute import HOST_PRIOR_LOG_SIGMA, host_log_error
from perfmodel.parameters import PARAMETERS
from perfmodel.plans import as_arrays, resolve_plan
from perfmodel.profile import CalibrationProfile, default_profile
from perfmodel.scenario import Plan
from perfmodel.workloads.transformer import transformer

CLUSTER = load_catalog().cluster(gpu="A100-SXM4-80GB", num_gpus=8)
SMALL = transformer(layers=24, hidden=1024, heads=16, seq_len=2048, vocab=51200)
HOST = PARAMETERS["host_dispatch_time"]
# SMALL at TP 8 with one sequence per micro-batch, as a scenario: every pass is host-bound
HOST_BOUND_MEGATRON = {"workload": {"model": "transformer", "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 2048,
                                    "vocab": 51200},
                       "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8}, "framework": "megatron",
                       "plan": {"tp": 8, "micro_batch": 1, "global_batch": 8, "recompute": "full"}}
# the Ampere systems' host fitted at the reference speed to 1 %: the host error is the stack's alone
TIGHT_AMPERE_HOST = {"host_dispatch_scale[Ampere]": 1.0}


def test_which_parameters_pool():
    assert HOST.per == "framework" and HOST.pools
    assert PARAMETERS["framework_compute_efficiency"].pools
    assert PARAMETERS["gemm_cuda_core_efficiency"].pools
    assert not PARAMETERS["gemm_power_activity"].pools  # a generation's power draw is its own
    assert not PARAMETERS["link_latency"].pools  # sourced per-group defaults
    assert not PARAMETERS["kernel_launch_overhead"].pools  # not grouped


def test_a_framework_without_host_bound_rows_starts_from_the_determined_stacks_median():
    fitted = {"host_dispatch_time[nanotron]": 1.2e-4, "host_dispatch_time[dle-tensorflow]": 1.5e-4,
              "framework_compute_efficiency[nanotron]": 1.0, "framework_compute_efficiency[megatron]": 1.4}
    values = dict(fitted)
    pool_groups(values, {})
    assert math.isclose(values["host_dispatch_time"], math.sqrt(1.2e-4 * 1.5e-4), rel_tol=1e-12)
    assert math.isclose(values["framework_compute_efficiency"], math.sqrt(1.0 * 1.4), rel_tol=1e-12)
    determined = list(fitted)
    assert math.isclose(_pooled_centre("host_dispatch_time[megatron]", fitted, determined),
                        values["host_dispatch_time"], rel_tol=1e-12)
    # a value the rows did not determine stays out of the median
    assert _pooled_centre("host_dispatch_time[megatron]", fitted, determined[1:]) is None
    profile = CalibrationProfile(values=values)
    assert profile.get("host_dispatch_time", "megatron") == values["host_dispatch_time"]
    assert profile.get("host_dispatch_time", None) == values["host_dispatch_time"]
    assert profile.get("host_dispatch_time", "nanotron") == 1.2e-4
    # megatron has a framework_compute_efficiency of its own but no host time: pooled traits
    assert profile.framework_pooled("megatron") and profile.framework_pooled("nemo")
    assert not profile.framework_pooled("nanotron")


HOST_TIMES = st.floats(PARAMETERS["host_dispatch_time"].low, PARAMETERS["host_dispatch_time"].high)


def _step(profile, framework):
    plan = resolve_plan(Plan(tp=8, pp=1, micro_batch=1, global_batch=8, recompute="full"), 8, CLUSTER.gpu,
                        "transformer")
    return evaluate(SMALL, CLUSTER, as_arrays(plan), precision="bf16", flash_attention=True, optimizer="adam",
                    profile=profile, framework=framework)["step_time_s"][0]


@settings(max_examples=20, deadline=None)
@given(low=HOST_TIMES, high=HOST_TIMES, other=HOST_TIMES)
def test_the_step_reads_its_own_framework_host_time(low, high, other):
    """Step time is non-decreasing in the stated framework's dispatch time and does not see
    another framework's."""
    low, high = sorted((low, high))
    base = {"host_dispatch_time[dle-pytorch]": other}
    fast = CalibrationProfile(values={**base, "host_dispatch_time[megatron]": low})
    slow = CalibrationProfile(values={**base, "host_dispatch_time[megatron]": high})
    assert _step(fast, "megatron") <= _step(slow, "megatron") * (1 + 1e-12)
    alone = CalibrationProfile(values={"host_dispatch_time[megatron]": low})
    assert math.isclose(_step(fast, "megatron"), _step(alone, "megatron"), rel_tol=1e-12)


def test_a_host_bound_small_model_is_slower_at_a_slow_runtime():
    """TP 8 on hidden 1,024 at micro-batch 1: kernels of a few microseconds, so 300 us per kernel sets
    the step and 10 us does not."""
    profile = CalibrationProfile(values={"host_dispatch_time[dle-pytorch]": 3e-4, "host_dispatch_time[megatron]": 1e-5})
    assert _step(profile, "dle-pytorch") > 3 * _step(profile, "megatron")


def test_prior_only_says_which_values_no_row_fitted():
    profile = CalibrationProfile(values={"host_dispatch_time[dle-pytorch]": 2e-4, "host_dispatch_time[megatron]": 1e-5,
                                         "framework_compute_efficiency[megatron]": 1.3,
                                         "framework_compute_efficiency": 1.3},
                                 provenance={"not_determined": ["host_dispatch_time[megatron]"]})
    assert not profile.prior_only("host_dispatch_time", "dle-pytorch")
    assert profile.prior_only("host_dispatch_time", "megatron")  # fitted key, but left at its prior
    assert profile.prior_only("host_dispatch_time", "nemo")  # no value applies
    assert not profile.prior_only("framework_compute_efficiency", "nemo")  # the pooled value applies


def test_a_host_bound_estimate_at_a_prior_host_time_says_so():
    scenario = HOST_BOUND_MEGATRON
    values = {"host_dispatch_time[megatron]": 2e-4, "framework_compute_efficiency[megatron]": 1.0,
              "host_dispatch_scale[Ampere]": 1.5}
    prior = CalibrationProfile(values=values, provenance={"not_determined": ["host_dispatch_time[megatron]"]})
    fitted = CalibrationProfile(values=values)
    said = [line for line in estimate(scenario, profile=prior).assumptions.get("assumed", []) if "host dispatch" in line]
    assert len(said) == 1 and "300 us per kernel" in said[0] and "'megatron'" in said[0]
    assert "Ampere" not in said[0]  # the Ampere systems' host was fitted
    assert not [line for line in estimate(scenario, profile=fitted).assumptions.get("assumed", [])
                if "host dispatch" in line]
    # the stack's time fitted, the Ampere systems' host not: the reference host's speed is assumed
    no_scale = CalibrationProfile(values={key: value for key, value in values.items() if "scale" not in key})
    said = [line for line in estimate(scenario, profile=no_scale).assumptions.get("assumed", [])
            if "host dispatch" in line]
    assert len(said) == 1 and "200 us per kernel" in said[0] and "no host-bound rows on Ampere systems" in said[0]
    assert "'megatron'" not in said[0]


# ---------------------------------------------------------------- the host time's uncertainty


def _sensitivity(profile, framework="megatron", cuda_graphs=False):
    plan = resolve_plan(Plan(tp=8, pp=1, micro_batch=1, global_batch=8, recompute="full"), 8, CLUSTER.gpu,
                        "transformer")
    return evaluate(SMALL, CLUSTER, as_arrays(plan), precision="bf16", flash_attention=True, optimizer="adam",
                    profile=profile, framework=framework, cuda_graphs=cuda_graphs)["host_log_sensitivity"][0]


def _with_error(value, relative_error):
    key = "host_dispatch_time[megatron]"
    return CalibrationProfile(values={key: value}, uncertainty={key: value * relative_error})


def test_host_log_error_is_the_fitted_relative_error_else_the_prior_spread():
    profile = _with_error(2e-5, 0.1)
    assert math.isclose(profile.log_error("host_dispatch_time", "megatron"), 0.1, rel_tol=1e-12)
    assert math.isclose(host_log_error(profile, "megatron"), 0.1, rel_tol=1e-12)
    assert profile.log_error("host_dispatch_time", "nemo") is None
    assert host_log_error(profile, "nemo") == HOST_PRIOR_LOG_SIGMA
    assert host_log_error(CalibrationProfile(), None) == HOST_PRIOR_LOG_SIGMA
    # a fitted key the rows left at its prior: the prior spread, not the fit's (wide) prior error
    undetermined = profile.model_copy(update={"provenance": {"not_determined": ["host_dispatch_time[megatron]"]}})
    assert host_log_error(undetermined, "megatron") == HOST_PRIOR_LOG_SIGMA


@pytest.mark.parametrize("relative_error", [0.05, 0.5, 1.4, 3.0])
def test_a_pooled_host_time_is_never_less_certain_than_the_prior_spread(relative_error):
    """A stack whose own rows did not determine its host time (partially pooled) carries its
    posterior's spread where its rows narrowed it, and never more than an unfitted stack's."""
    pooled = _with_error(1.07e-4, relative_error).model_copy(
        update={"provenance": {"pooled": ["host_dispatch_time[megatron]"]}})
    assert pooled.pooled("host_dispatch_time", "megatron") and not pooled.prior_only("host_dispatch_time", "megatron")
    assert host_log_error(pooled, "megatron") == pytest.approx(min(relative_error, HOST_PRIOR_LOG_SIGMA))
    # a value its own rows determined keeps the fit's error, however wide
    assert host_log_error(_with_error(1.07e-4, relative_error), "megatron") == pytest.approx(relative_error)


@settings(max_examples=25, deadline=None)
@given(value=HOST_TIMES, small=st.floats(0.0, 2.0), large=st.floats(0.0, 2.0))
def test_host_sensitivity_grows_with_the_host_time_error(value, small, large):
    """log(step at a host one error slower / step) is >= 0, 0 with CUDA graphs (no per-kernel
    dispatch), and non-decreasing in the error."""
    small, large = sorted((small, large))
    low, high = _sensitivity(_with_error(value, small)), _sensitivity(_with_error(value, large))
    assert 0.0 <= low <= high + 1e-12
    assert _sensitivity(_with_error(value, large), cuda_graphs=True) == 0.0


def test_host_sensitivity_is_the_log_change_of_a_fully_host_bound_step():
    """Far past the GPU's work, every pass is host-bound: the passes scale by exp(error) and the
    step by 1 + compute share x (exp(error) - 1), the error the stack's (0.5) and the A100 host
    scale's prior width in quadrature."""
    profile = _with_error(HOST.high / 2, 0.5)
    error = host_log_error(profile, "megatron", CLUSTER.gpu.architecture)
    assert error == pytest.approx(math.hypot(0.5, PARAMETERS["host_dispatch_scale"].prior_log_sigma))
    plan = resolve_plan(Plan(tp=8, pp=1, micro_batch=1, global_batch=8, recompute="full"), 8, CLUSTER.gpu,
                        "transformer")
    out = evaluate(SMALL, CLUSTER, as_arrays(plan), precision="bf16", flash_attention=True, optimizer="adam",
                   profile=profile, framework="megatron")
    assert out["launch_bound_share"][0] > 0.999
    expected = math.log1p(out["gpu_utilization"][0] * math.expm1(error))
    assert math.isclose(out["host_log_sensitivity"][0], expected, rel_tol=1e-9)
    far_below = _with_error(1e-6, 0.7)  # 1 us per kernel, x2 slower, is still far below the GPU's work
    assert _sensitivity(far_below) == 0.0


def test_an_estimate_a_slower_host_would_slow_gets_a_wider_interval_at_a_prior_host_time():
    """The same host-bound job: its interval is wider when the stack's host time is a prior the
    rows did not determine (x2 at one error) than when rows fitted it tightly (1 %), and the
    confidence line says why."""
    scenario = HOST_BOUND_MEGATRON
    shipped = default_profile()
    key, value = "host_dispatch_time[megatron]", 2e-5
    widths = {}
    fitted = [name for name in shipped.provenance.get("not_determined", []) if name not in (key, *TIGHT_AMPERE_HOST)]
    for determined in (True, False):
        provenance = {**shipped.provenance, "not_determined": fitted if determined else [*fitted, key]}
        profile = shipped.model_copy(update={"values": {**shipped.values, key: value, **TIGHT_AMPERE_HOST},
                                             "uncertainty": {**shipped.uncertainty, key: value * 0.01,
                                                             **{scale: 0.01 for scale in TIGHT_AMPERE_HOST}},
                                             "provenance": provenance})
        result = estimate(scenario, profile=profile)
        widths[determined] = result.interval_80["step_time_high_s"] / result.interval_80["step_time_low_s"]
        said = [line for line in result.confidence["extrapolates"] if "host dispatch time" in line]
        assert bool(said) == (not determined)
    assert widths[False] > 1.05 * widths[True]


def test_the_confidence_line_says_a_pooled_host_time_is_pooled_and_counts_it_at_the_prior_spread():
    scenario = HOST_BOUND_MEGATRON
    shipped = default_profile()
    key, value = "host_dispatch_time[megatron]", 1.5e-4
    not_determined = [name for name in shipped.provenance.get("not_determined", [])
                      if name not in (key, *TIGHT_AMPERE_HOST)]
    pooled = sorted({*shipped.provenance.get("pooled", []), key})
    profile = shipped.model_copy(update={
        "values": {**shipped.values, key: value, **TIGHT_AMPERE_HOST},
        "uncertainty": {**shipped.uncertainty, key: 2 * value, **{scale: 0.01 for scale in TIGHT_AMPERE_HOST}},
        "provenance": {**shipped.provenance, "not_determined": not_determined, "pooled": pooled}})
    said = [line for line in estimate(scenario, profile=profile).confidence["extrapolates"]
            if "host dispatch time" in line]
    assert len(said) == 1 and "pooled over the stacks whose rows determine it" in said[0]
    assert "150 us per kernel x 2.00" in said[0]  # the prior spread, not the box prior's x3 (host scale x1.01)


def test_the_fit_starts_the_host_time_where_it_binds_and_finds_it_on_host_bound_rows():
    """From the 10 us prior the pass's max(GPU, host) has no gradient on these rows, so the fit
    cannot move; from fit_start (where they are host-bound) it finds the host time they need."""
    import pytest

    from perfmodel.calibration.fit import _fit_stage
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.parameters import Parameter

    with pytest.raises(ValueError, match="fit_start"):
        Parameter(name="x", default=1.0, low=0.0, high=2.0, unit="", description="", source="", fit_start=3.0)
    rows = shipped_measurements().query("framework == 'nanotron' and tp == 8 and micro_batch == 1")
    assert len(rows) == 3
    key = "host_dispatch_time[nanotron]"
    catalog = load_catalog(include_env=False)
    from_start, _, ratio, _, _ = _fit_stage(rows, [key], CalibrationProfile(), catalog, max_evaluations=10)
    from_prior, _, _, _, _ = _fit_stage(rows, [key], CalibrationProfile(values={key: HOST.default}), catalog,
                                        max_evaluations=10)
    assert from_prior[key] == pytest.approx(HOST.default)  # stuck: no gradient below the binding point
    assert from_start[key] > 5 * HOST.default and ratio[key] < 0.5  # found, and determined by the rows


# ---------------------------------------------------------------- the host of each GPU generation

SCALE = PARAMETERS["host_dispatch_scale"]
HOPPER = load_catalog().cluster(gpu="H100-SXM5-80GB", num_gpus=8)
SCALES = st.floats(SCALE.low, SCALE.high)


def test_the_reference_host_is_never_fitted_and_other_generations_are():
    """Hopper's DGX H100 host is the unit of host_dispatch_scale: a scale for it would trade freely
    with every framework's host time, so calibrate fits only the other architectures' rows."""
    import pandas as pd

    from perfmodel.calibration.fit import parameter_keys

    assert SCALE.per == "architecture" and SCALE.reference_group == "Hopper" and not SCALE.pools
    rows = pd.DataFrame({"kind": ["train"] * 3, "gpu": ["H100-SXM5-80GB", "A100-SXM4-80GB", "V100-SXM2-32GB"],
                         "num_gpus": [8, 8, 8], "framework": ["megatron"] * 3})
    assert parameter_keys(["host_dispatch_scale"], rows, load_catalog(include_env=False)) == \
        ["host_dispatch_scale[Ampere]", "host_dispatch_scale[Volta]"]
    fitted = CalibrationProfile(values={"host_dispatch_scale[Ampere]": 1.6})
    assert fitted.get("host_dispatch_scale", "Hopper") == 1.0
    assert fitted.get("host_dispatch_scale", "Blackwell") == 1.0  # not pooled: an unmeasured host is the reference's


def _step_on(cluster, profile):
    plan = resolve_plan(Plan(tp=8, pp=1, micro_batch=1, global_batch=8, recompute="full"), 8, cluster.gpu,
                        "transformer")
    return evaluate(SMALL, cluster, as_arrays(plan), precision="bf16", flash_attention=True, optimizer="adam",
                    profile=profile, framework="megatron")["step_time_s"][0]


@settings(max_examples=20, deadline=None)
@given(host=st.floats(HOST.low, HOST.high / SCALE.high), low=SCALES, high=SCALES)
def test_the_host_dispatch_is_the_stacks_time_times_its_generations_scale(host, low, high):
    """Only the product counts (a stack twice as slow on a host twice as fast is the same step);
    the step is non-decreasing in the scale of its own GPU's architecture and blind to another's."""
    low, high = sorted((low, high))
    scaled = CalibrationProfile(values={"host_dispatch_time[megatron]": host, "host_dispatch_scale[Ampere]": low})
    product = CalibrationProfile(values={"host_dispatch_time[megatron]": host * low})
    assert math.isclose(_step_on(CLUSTER, scaled), _step_on(CLUSTER, product), rel_tol=1e-9)
    slower = scaled.with_values(**{"host_dispatch_scale[Ampere]": high})
    assert _step_on(CLUSTER, scaled) <= _step_on(CLUSTER, slower) * (1 + 1e-12)
    assert _step_on(HOPPER, scaled) == _step_on(HOPPER, slower)


def test_the_host_error_adds_the_generations_scale_error_in_quadrature():
    profile = CalibrationProfile(values={"host_dispatch_time[megatron]": 2e-5, "host_dispatch_scale[Ampere]": 1.5},
                                 uncertainty={"host_dispatch_time[megatron]": 2e-6, "host_dispatch_scale[Ampere]": 0.3})
    assert host_log_error(profile, "megatron", "Hopper") == pytest.approx(0.1)  # the reference: no scale error
    assert host_log_error(profile, "megatron", "Ampere") == pytest.approx(math.hypot(0.1, 0.2))
    # a generation no host-bound row fitted: the scale's prior width
    assert host_log_error(profile, "megatron", "Turing") == pytest.approx(math.hypot(0.1, SCALE.prior_log_sigma))
    undetermined = profile.model_copy(update={"provenance": {"not_determined": ["host_dispatch_scale[Ampere]"]}})
    assert host_log_error(undetermined, "megatron", "Ampere") == pytest.approx(math.hypot(0.1, SCALE.prior_log_sigma))


@pytest.mark.parametrize("gpu, architecture", [("B200", "Blackwell"), ("H100-SXM5-80GB", "Hopper"),
                                               ("A100-SXM4-80GB", "Ampere")])
def test_the_confidence_line_says_when_the_generations_host_speed_is_a_prior(gpu, architecture):
    """The host-error line of a host-sensitive estimate names the generation's host speed as a prior
    where no row fitted it (Blackwell), not on the reference (Hopper) or a fitted one (Ampere)."""
    scenario = {**HOST_BOUND_MEGATRON, "hardware": {"gpu": gpu, "num_gpus": 8}}
    said = [line for line in estimate(scenario).confidence["extrapolates"] if "host dispatch time" in line]
    assert len(said) == 1
    assert (f"the {architecture} host's speed relative to DGX H100's is a prior" in said[0]) == \
        (architecture == "Blackwell")


# --- Python-side bookkeeping: ops an eager framework dispatches one by one, a graph batches away

from perfmodel.models.compute import framework_runs, kernel_launches  # noqa: E402
from perfmodel.vocabulary import GRAPH_FRAMEWORKS  # noqa: E402
from perfmodel.workloads.zoo import get_workload  # noqa: E402
from perfmodel.workloads.cnn import cnn  # noqa: E402
from perfmodel.workloads.vision import DETECTION_HOST_OPS  # noqa: E402

MASKRCNN = get_workload("maskrcnn")


def _bookkeeping_launches(micro_batch, framework):
    table = MASKRCNN.ops(micro_batch)
    forward, backward = kernel_launches(table, "fp16", framework)
    eager = table.per_op("eager_only").astype(bool)
    return float((forward * eager).sum()), float((backward * eager).sum())


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64))
def test_mask_rcnn_bookkeeping_grows_with_the_images_in_eager_frameworks_only(micro_batch):
    forward, backward = _bookkeeping_launches(micro_batch, "dle-pytorch")
    assert forward == DETECTION_HOST_OPS["forward_ops"] + DETECTION_HOST_OPS["forward_ops_per_sample"] * micro_batch
    assert backward == DETECTION_HOST_OPS["backward_ops"]
    assert _bookkeeping_launches(micro_batch, None) == (forward, backward)  # not stated: eager PyTorch
    for graph in GRAPH_FRAMEWORKS:
        assert _bookkeeping_launches(micro_batch, graph) == (0.0, 0.0)


def test_the_bookkeeping_count_is_per_plan_when_the_micro_batch_is_an_array():
    table = MASKRCNN.ops(np.array([1, 4, 12]))
    row = table.name.index("detection.bookkeeping")
    per_image = DETECTION_HOST_OPS["forward_ops_per_sample"]
    assert table.kernels_forward.shape == (len(table), 3)
    assert table.kernels_forward[row].tolist() == [DETECTION_HOST_OPS["forward_ops"] + per_image * b for b in (1, 4, 12)]
    assert table.flops[row].tolist() == [0.0] * 3 and table.bytes[row].tolist() == [0.0] * 3
    # every other op of the table launches as many kernels whatever the micro-batch
    others = np.delete(table.kernels_forward, row, axis=0)
    assert (others == others[:, :1]).all()
    assert table.eager_only.sum() == 1 and framework_runs(table, "jax")[row].item() == 0.0


def test_a_host_op_row_is_checked_and_leaves_the_running_tensor_alone():
    with pytest.raises(ValueError, match=r"layer 1 \('bad'\): forward_ops must be a number of ops from 0 to 1e6, got -3"):
        cnn("bad", [{"op": "relu", "channels": 4, "size": [8, 8]}, {"op": "host", "name": "bad", "forward_ops": -3}])
    with pytest.raises(ValueError, match="host needs forward_ops"):
        cnn("bad", [{"op": "host"}])


def test_mask_rcnn_in_an_eager_stack_is_host_bound_and_slower_than_in_a_graph():
    """Eager PyTorch dispatches the per-image bookkeeping from the host, so with many images per GPU
    the step is host-bound; a traced graph (same host time per op) is not, and is faster.  Both
    step times grow with the images per GPU, the eager one by at least the added dispatches."""
    profile = default_profile().with_values(**{"host_dispatch_time[dle-pytorch]": 50e-6,
                                               "host_dispatch_time[dle-tensorflow]": 50e-6})
    cluster = load_catalog().cluster(gpu="A100-SXM4-80GB", num_gpus=1)
    steps = {}
    for framework in ("dle-pytorch", "dle-tensorflow"):
        for micro_batch in (2, 12):
            plan = resolve_plan(Plan(precision="fp16", micro_batch=micro_batch, global_batch=micro_batch),
                                1, cluster.gpu, "cnn", framework)
            result = evaluate(MASKRCNN, cluster, as_arrays(plan), precision="fp16", flash_attention=False,
                              optimizer="sgd", profile=profile, framework=framework)
            steps[framework, micro_batch] = float(result["step_time_s"][0])
            if framework == "dle-pytorch" and micro_batch == 12:
                assert result["launch_bound_share"][0] > 0.5
    assert steps["dle-pytorch", 12] > steps["dle-tensorflow", 12]
    added = DETECTION_HOST_OPS["forward_ops_per_sample"] * 10 * 50e-6 * profile.get("host_dispatch_scale", "Ampere")
    assert steps["dle-pytorch", 12] - steps["dle-pytorch", 2] >= added * (1 - 1e-9)


def test_an_estimate_without_a_framework_says_the_bookkeeping_was_counted_as_eager():
    scenario = {"workload": {"model": "maskrcnn"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 1},
                "plan": {"precision": "fp16", "micro_batch": 4, "global_batch": 4}}
    assumed = estimate(scenario).assumptions["assumed"]
    per_batch = (DETECTION_HOST_OPS["forward_ops"] + 4 * DETECTION_HOST_OPS["forward_ops_per_sample"]
                 + DETECTION_HOST_OPS["backward_ops"])
    assert any(line.startswith("framework not stated: detection.bookkeeping") and f"{per_batch:,}" in line
               for line in assumed)
    stated = estimate({**scenario, "framework": "dle-pytorch"}).assumptions.get("assumed", [])
    assert not any("detection.bookkeeping" in line for line in stated)
    assert not any("bookkeeping" in line for line in estimate({**scenario, "workload": {"model": "resnet50"}})
                   .assumptions.get("assumed", []))


def test_workload_show_reports_the_bookkeeping_an_eager_framework_dispatches(capsys):
    from perfmodel.cli import main

    host = MASKRCNN.summary()["host_ops"]
    assert host == {"ops": ["detection.bookkeeping"], "forward_per_step": DETECTION_HOST_OPS["forward_ops"],
                    "forward_per_sample": DETECTION_HOST_OPS["forward_ops_per_sample"],
                    "backward_per_step": DETECTION_HOST_OPS["backward_ops"]}
    assert "host_ops" not in get_workload("resnet50").summary()
    assert main(["workload", "show", "maskrcnn"]) == 0
    assert "host-side bookkeeping (detection.bookkeeping): 226 + 410 per sample ops forward" in capsys.readouterr().out


def test_the_roofline_lists_the_bookkeeping_only_where_the_framework_dispatches_it():
    from perfmodel.models.compute import roofline_points

    gpu = load_catalog().gpu("A100-SXM4-80GB")
    eager = roofline_points(MASKRCNN, gpu, "fp16", default_profile(), micro_batch=2, framework="dle-pytorch")
    row = eager[eager["op"] == "detection.bookkeeping"]
    assert len(row) == 1 and row["bound"].item() == "launch" and row["time_s"].item() > 0
    graph = roofline_points(MASKRCNN, gpu, "fp16", default_profile(), micro_batch=2, framework="dle-tensorflow")
    assert "detection.bookkeeping" not in set(graph["op"]) and len(graph) == len(eager) - 1
    assert (graph["time_s"] > 0).all() and graph["attained_flops"].notna().all()
