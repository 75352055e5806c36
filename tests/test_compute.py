"""Roofline compute model, gemm/memcpy predictors and `perfmodel roofline`."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.calibration.predictors.kernel import predict_gemm, predict_memcpy
from perfmodel.hardware.catalog import CatalogError
from perfmodel.hardware.specs import GPU
from perfmodel.models import compute, gemm
from perfmodel.profile import PARAMETERS, CalibrationProfile
from perfmodel.vocabulary import FRAMEWORKS
from perfmodel.workloads.ops import OpTable

DEFAULTS = CalibrationProfile()  # registered defaults, no fitted values


def _gpu(name, architecture, bandwidth, sm_count, **peaks_tflops):
    return GPU(name=name, vendor="NVIDIA", architecture=architecture, memory="80 GB",
               memory_bandwidth=bandwidth, sm_count=sm_count, tdp="400 W", source="datasheet",
               peak_flops={p: v * 1e12 for p, v in peaks_tflops.items()})


# Dense datasheet peaks (NVIDIA A100 / H100 / V100 / T4 datasheets; H100 sparse figures halved).
A100 = _gpu("A100-SXM4-80GB", "Ampere", "2039 GB/s", 108, fp32=19.5, tf32=156, fp16=312, bf16=312)
H100 = _gpu("H100-SXM5-80GB", "Hopper", "3.35 TB/s", 132, fp32=67, tf32=494.5, fp16=989.5, bf16=989.5,
            fp8=1979)
V100 = _gpu("V100-SXM2-32GB", "Volta", "900 GB/s", 80, fp32=15.7, fp16=125)
T4 = _gpu("T4", "Turing", "320 GB/s", 40, fp32=8.1, fp16=65)
L4 = _gpu("L4", "Ada", "300 GB/s", 58, fp32=30.3, tf32=60, fp16=121, bf16=121, fp8=242.5)
A10 = _gpu("A10", "Ampere", "600 GB/s", 72, fp32=31.2, tf32=62.5, fp16=125, bf16=125)


class FakeCatalog:
    def __init__(self, *gpus):
        self.gpus = {g.name: g for g in gpus}

    def gpu(self, name):
        if name not in self.gpus:
            raise CatalogError(f"gpu {name!r} is not in the catalog")
        return self.gpus[name]


CATALOG = FakeCatalog(A100, H100, V100, T4, L4, A10)

positive = st.floats(1e-3, 1e18, allow_nan=False, allow_infinity=False)
fraction = st.floats(0.01, 1.0)
rate = st.floats(1e9, 1e16)
launch = st.floats(0.0, 1e-4)


# --- roofline_time: physics invariants ---------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(positive, positive, rate, rate, fraction, fraction, launch, st.floats(1.0, 100.0))
def test_more_peak_or_bandwidth_never_slower(flops, nbytes, peak, bandwidth, eta_c, eta_m, overhead, factor):
    base = compute.roofline_time(flops, nbytes, peak, bandwidth, eta_c, eta_m, overhead)
    assert compute.roofline_time(flops, nbytes, peak * factor, bandwidth, eta_c, eta_m, overhead) <= base
    assert compute.roofline_time(flops, nbytes, peak, bandwidth * factor, eta_c, eta_m, overhead) <= base
    assert math.isfinite(base) and base > 0


@settings(max_examples=200, deadline=None)
@given(positive, positive, rate, rate, fraction, fraction, launch)
def test_attained_flops_never_exceeds_peak(flops, nbytes, peak, bandwidth, eta_c, eta_m, overhead):
    time = compute.roofline_time(flops, nbytes, peak, bandwidth, eta_c, eta_m, overhead)
    assert compute.attained_flops(flops, time) <= peak * eta_c * (1 + 1e-12)


def test_roofline_picks_the_slower_term_and_adds_launch():
    # 1 TFLOP at 100 TFLOP/s x 0.5 = 20 ms; 1 GB at 1 TB/s x 0.5 = 2 ms; + 5 us launch
    assert compute.roofline_time(1e12, 1e9, 100e12, 1e12, 0.5, 0.5, 5e-6) == pytest.approx(0.020005)
    assert compute.roofline_time(1e9, 1e12, 100e12, 1e12, 0.5, 0.5, 0.0) == pytest.approx(2.0)


def test_ridge_point_of_h100_bf16():
    # 989.5 TFLOP/s over 3.35 TB/s: about 295 FLOP per byte
    assert compute.ridge_point(989.5e12, 3.35e12) == pytest.approx(295.4, rel=1e-3)
    assert compute.ridge_points(A100) == pytest.approx(
        {"fp32": 19.5e12 / 2039e9, "tf32": 156e12 / 2039e9, "fp16": 312e12 / 2039e9, "bf16": 312e12 / 2039e9})
    assert compute.arithmetic_intensity(2.0 * 4096**3, 3 * 4096**2 * 2) == pytest.approx(4096 / 3)


# --- predictors against published measurements -------------------------------------------------
# Rows copied from the project's dev kernel measurements, with their sources:
#  K0001: stas00/ml-engineering compute/accelerator/README.md @ 744d01e, 'Maximum Achievable Matmul
#         FLOPS comparison table' -- A100 SXM, bf16, best shape 1024x10240x5120, 271.2 TFLOP/s
#  K0004: same table -- H100 SXM, bf16, best shape 2048x2048x13312, 794.5 TFLOP/s
#  K0030: zzc0721/torch-performance-test-data issue #79 -- H100 SXM bf16 2048^3, 676.59 TFLOP/s
#  K0026: same issue -- H100 SXM fp16 4096^3, 760.04 TFLOP/s
#  K0027: same issue -- H100 SXM fp16 8192^3, 736.19 TFLOP/s
#  K0088 / K0096: chsasank/device-benchmarks README.md @ 7ccc883 -- device copy of ~3.8e8 bytes,
#         read + write: L4 235 GB/s, A10 469 GB/s
LARGE_GEMMS = pd.DataFrame([
    ("K0001", "gemm", "A100-SXM4-80GB", 1024, 10240, 5120, "bf16", "tflops", 271.2),
    ("K0004", "gemm", "H100-SXM5-80GB", 2048, 2048, 13312, "bf16", "tflops", 794.5),
    ("K0030", "gemm", "H100-SXM5-80GB", 2048, 2048, 2048, "bf16", "tflops", 676.59),
    ("K0026", "gemm", "H100-SXM5-80GB", 4096, 4096, 4096, "fp16", "tflops", 760.04),
    ("K0027", "gemm", "H100-SXM5-80GB", 8192, 8192, 8192, "fp16", "tflops", 736.19),
], columns=["id", "kind", "gpu", "m", "n", "k", "dtype", "metric", "value"])


def test_large_gemms_within_twenty_percent_of_measurements():
    # the GEMM kernel model with its registered priors (not fitted to these rows); K0030 (a 25 us
    # kernel) is left out: its loop overlaps the host's per-call work, which the model's per-call
    # floor (fitted on synchronised single calls) does not (a known miss, see models/gemm.py)
    large = LARGE_GEMMS[LARGE_GEMMS["id"] != "K0030"]
    predicted = predict_gemm(large, CATALOG, DEFAULTS)
    assert predicted["reason"].isna().all()
    error = (predicted["predicted"] - large["value"]).abs() / large["value"]
    assert (error < 0.20).all(), dict(zip(large["id"], error))


def test_gemm_time_metric_matches_tflops_metric():
    rows = pd.concat([LARGE_GEMMS.iloc[:1], LARGE_GEMMS.iloc[:1].assign(metric="time_us")], ignore_index=True)
    tflops, time_us = predict_gemm(rows, CATALOG, DEFAULTS)["predicted"]
    assert time_us == pytest.approx(2 * 1024 * 10240 * 5120 / (tflops * 1e12) * 1e6)


def test_memcpy_close_to_measurements_and_below_datasheet():
    rows = pd.DataFrame({"id": ["K0088", "K0096"], "kind": "memcpy", "gpu": ["L4", "A10"],
                         "bytes": 379625060, "metric": "GBps", "value": [235.0, 469.0]})
    predicted = predict_memcpy(rows, CATALOG, DEFAULTS)["predicted"]
    assert ((predicted - rows["value"]).abs() / rows["value"] < 0.05).all()
    assert (predicted < np.array([300.0, 600.0])).all()  # never above the datasheet HBM bandwidth


def test_memcpy_needs_no_flop_peak():
    """A copy does no arithmetic: a GPU whose catalog entry has no FLOP peaks (A10G's are unknown)
    still gets its copy rate, the same as the GPU with the same memory."""
    no_peaks = _gpu("A10-no-peaks", "Ampere", "600 GB/s", 72)
    rows = pd.DataFrame({"id": ["Z", "A"], "kind": "memcpy", "gpu": [no_peaks.name, "A10"], "bytes": 1e9,
                         "metric": "GBps", "value": 1.0})
    out = predict_memcpy(rows, FakeCatalog(no_peaks, A10), DEFAULTS)
    assert out["reason"].isna().all(), out["reason"].tolist()
    assert out["predicted"].iloc[0] == pytest.approx(out["predicted"].iloc[1])


def test_predictors_give_reasons_not_numbers():
    rows = pd.DataFrame([
        ("X1", "gemm", "NoSuchGPU", 1024, 1024, 1024, "bf16", "tflops", 1.0),
        ("X2", "gemm", "T4", 1024, 1024, 1024, "bf16", "tflops", 1.0),
        ("X3", "gemm", "A100-SXM4-80GB", 1024, 1024, 1024, "fp8", "tflops", 1.0),
        ("X4", "gemm", "A100-SXM4-80GB", 1024, None, 1024, "bf16", "tflops", 1.0),
        ("X5", "gemm", "A100-SXM4-80GB", 1024, 1024, 1024, "int4", "tflops", 1.0),
    ], columns=["id", "kind", "gpu", "m", "n", "k", "dtype", "metric", "value"])
    out = predict_gemm(rows, CATALOG, DEFAULTS)
    assert out["predicted"].isna().all()
    reasons = out["reason"].tolist()
    assert "NoSuchGPU" in reasons[0]
    assert "bf16" in reasons[1] and "T4" in reasons[1]
    assert "fp8" in reasons[2] and "A100" in reasons[2]
    assert "n, k" in reasons[3]
    assert "int4" in reasons[4] and "bf16" in reasons[4]
    memcpy = predict_memcpy(pd.DataFrame({"id": ["Y"], "kind": "memcpy", "gpu": ["H100-SXM5-80GB"],
                                          "bytes": [None], "metric": ["GBps"], "value": [1.0]}), CATALOG, DEFAULTS)
    assert "'bytes'" in memcpy["reason"].iloc[0]


# --- op_times over an OpTable ------------------------------------------------------------------

def _table(micro_batch):
    """A hand-built transformer-like layer: qkv matmul, flash attention, an fp32 norm, a GeLU."""
    b = np.asarray(micro_batch, dtype=float)
    s, h, heads = 2048.0, 4096.0, 32
    ones = np.ones_like(b)
    tokens = b * s
    rows = {
        #            kind         m          n          k          batch        flops                        bytes
        "qkv": ("matmul", tokens, 3 * h * ones, h * ones, ones, 2 * tokens * 3 * h * h, 2 * (tokens * h + 3 * h * h + tokens * 3 * h)),
        "attn": ("attention", s * ones, s * ones, h / heads * ones, b * heads, 4 * b * s * s * h, 2 * 4 * tokens * h),
        "ln": ("norm", 0 * ones, 0 * ones, 0 * ones, ones, 5 * tokens * h, 4 * 2 * tokens * h),
        "gelu": ("elementwise", 0 * ones, 0 * ones, 0 * ones, ones, 8 * tokens * h, 2 * 2 * tokens * h),
    }
    names = list(rows)
    column = lambda i: np.stack([np.broadcast_to(rows[n][i], b.shape).astype(float) for n in names])  # noqa: E731
    zeros = np.zeros((len(names), *b.shape))
    return OpTable(name=names, kind=[rows[n][0] for n in names], placement=["layer"] * 4,
                   repeat=np.ones(4), fp32=np.array([False, False, True, False]),
                   m=column(1), n=column(2), k=column(3), batch_gemms=column(4), flops=column(5),
                   bytes=column(6), params=zeros, saved_bytes=zeros, plan_shape=b.shape)


def test_op_times_shapes_and_vectorization():
    batches = np.array([1, 2, 4])
    forward, backward = compute.op_times(_table(batches), H100, "bf16", DEFAULTS)
    assert forward.shape == backward.shape == (4, 3)
    for j, b in enumerate(batches):
        f, bw = compute.op_times(_table(int(b)), H100, "bf16", DEFAULTS)
        np.testing.assert_allclose(forward[:, j], f, rtol=1e-12)
        np.testing.assert_allclose(backward[:, j], bw, rtol=1e-12)
    assert np.all(np.isfinite(forward)) and np.all(forward > 0)
    assert np.all(backward > forward)  # backward does 2-2.5x the FLOPs and 2x the bytes


@settings(max_examples=60, deadline=None)
@given(micro_batch=st.sampled_from([1, 2, 8, 64]), host=st.floats(0.0, 3e-4),
       precision=st.sampled_from(["bf16", "fp8", "fp32"]))
def test_a_queued_pass_lies_between_its_gpu_work_and_ops_run_one_at_a_time(micro_batch, host, precision):
    """Asynchronous dispatch: a sequence of ops never takes less than the GPU's own work or the host's
    dispatch work, and never more than running each op alone behind its own dispatch (per-op floor)."""
    table = _table(micro_batch)
    profile = DEFAULTS.with_values(host_dispatch_time=host)
    gpu_fwd, gpu_bwd = compute.op_times(table, H100, precision, profile, host_floor=False)
    alone_fwd, alone_bwd = compute.op_times(table, H100, precision, profile)
    launches_fwd, launches_bwd = compute.kernel_launches(table, precision)
    for gpu_s, launches in ((gpu_fwd, launches_fwd), (gpu_bwd, launches_bwd)):
        queued = compute.queued_time(gpu_s.sum(axis=0), launches.sum(axis=0), host)
        assert queued >= gpu_s.sum() and queued >= launches.sum() * host
    if precision != "fp8":  # one kernel per op forward: sum of max(kernel, host) >= max of the sums
        assert compute.queued_time(gpu_fwd.sum(axis=0), launches_fwd.sum(axis=0), host) <= alone_fwd.sum() * (1 + 1e-12)
    assert np.all(alone_fwd >= gpu_fwd) and np.all(alone_bwd >= gpu_bwd) and np.all(gpu_fwd > 0)


def test_kernel_launches_count_two_gradient_gemms_and_the_fp8_casts():
    table = _table(4)  # qkv matmul, attention, norm, gelu
    forward, backward = compute.kernel_launches(table, "bf16")
    np.testing.assert_array_equal(forward.ravel(), [1, 1, 1, 1])
    np.testing.assert_array_equal(backward.ravel(), [2, 1, 1, 1])
    forward, backward = compute.kernel_launches(table, "fp8")
    np.testing.assert_array_equal(forward.ravel(), [2, 1, 1, 1])  # the matmul's input cast
    np.testing.assert_array_equal(backward.ravel(), [3, 1, 1, 1])  # and its output-gradient cast


def test_op_times_uses_the_precision_of_each_op():
    table = _table(4)
    bf16, _ = compute.op_times(table, H100, "bf16", DEFAULTS)
    fp8, _ = compute.op_times(table, H100, "fp8", DEFAULTS)
    fp32, _ = compute.op_times(table, H100, "fp32", DEFAULTS)
    assert fp8[0] < bf16[0]  # matmul in FP8
    assert fp8[1] == pytest.approx(bf16[1])  # attention stays in BF16 under FP8 training
    assert fp32[0] > 10 * bf16[0]  # FP32 matmul on CUDA cores (67 vs 989.5 TFLOP/s)
    # unfused attention (not implicit): its score and PV GEMMs at the rate of a batched cuBLAS GEMM of
    # its shape (the GEMM kernel model, operands and scores in memory)
    launch = PARAMETERS["kernel_launch_overhead"].default
    kernel_s = gemm.gpu_time(2048.0, 2048.0, 128.0, 128.0, H100, "bf16", DEFAULTS, include_floor=False)
    eta = 2 * 2048 * 2048 * 128 * 128 / (kernel_s * 989.5e12)
    assert bf16[1] - launch == pytest.approx(table.flops[1] / (989.5e12 * eta))
    # fused (flash) attention: attention_efficiency x the rate of its tiles (an implicit GEMM: no matrix
    # in memory), plus the kernel's fixed latency once
    fused = dataclasses.replace(table, implicit=np.array([False, True, False, False]))
    fused_bf16, _ = compute.op_times(fused, H100, "bf16", DEFAULTS)
    tiles = {**gemm.gemm_parameters(H100, "bf16", DEFAULTS), "input_bytes": 0.0, "output_bytes": 0.0,
             "kernel_latency": 0.0}
    tiles_s = gemm.gemm_kernel_time(2048.0, 2048.0, 128.0, 128.0, **tiles)
    kernel_s = tiles_s / PARAMETERS["attention_efficiency"].default + PARAMETERS["gemm_kernel_latency"].default
    eta = 2 * 2048 * 2048 * 128 * 128 / (kernel_s * 989.5e12)
    compute_s = table.flops[1] / (989.5e12 * eta)
    assert fused_bf16[1] - launch == pytest.approx(max(compute_s, table.bytes[1] / (3.35e12 * PARAMETERS["memory_efficiency"].default)))
    # memory-bound ops: the bytes term, independent of the tensor precision
    assert bf16[2] - launch == pytest.approx(table.bytes[2] / (3.35e12 * PARAMETERS["memory_efficiency"].default))


def test_roofline_points_places_ops():
    class Workload:
        def ops(self, micro_batch, precision="bf16", flash_attention=True):
            return _table(micro_batch)

    points = compute.roofline_points(Workload(), H100, "bf16", DEFAULTS, micro_batch=4)
    assert list(points.columns) == ["op", "kind", "flops", "bytes", "intensity", "attained_flops", "efficiency",
                                    "time_s", "bound"]
    assert ((points["efficiency"] > 0) & (points["efficiency"] <= 1)).all()
    bound = dict(zip(points["op"], points["bound"]))
    assert bound == {"qkv": "compute", "attn": "compute", "ln": "memory", "gelu": "memory"}
    assert (points["attained_flops"] <= 989.5e12).all()
    with pytest.raises(ValueError, match="micro_batch"):
        compute.roofline_points(Workload(), H100, "bf16", DEFAULTS, micro_batch=0)


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gpu, precision, words", [
    (A100, "fp8", ["fp8", "A100-SXM4-80GB", "allowed"]),
    (V100, "bf16", ["bf16", "V100-SXM2-32GB", "fp16"]),
    (T4, "bf16", ["bf16", "T4"]),
    (H100, "fp4", ["fp4", "allowed", "bf16"]),
    (H100, "int8", ["int8", "allowed", "fp8"]),
])
def test_precision_errors_are_clear(gpu, precision, words):
    with pytest.raises(ValueError) as error:
        compute.op_times(_table(1), gpu, precision, DEFAULTS)
    for word in words:
        assert word in str(error.value)


def test_parameters_are_documented():
    for name in ("gemm_cuda_core_efficiency", "gemm_tensor_core_efficiency", "gemm_tile_edge_cost",
                 "gemm_k_overhead", "gemm_l2_bandwidth_gain", "gemm_memory_efficiency", "gemm_power_activity",
                 "gemm_call_floor", "gemm_linear_call_overhead", "gemm_floor_overlap", "attention_efficiency", "conv_efficiency",
                 "conv_winograd_gain", "memory_efficiency", "kernel_launch_overhead", "host_dispatch_time"):
        parameter = PARAMETERS[name]
        assert parameter.source and parameter.unit and parameter.description
    assert PARAMETERS["gemm_tensor_core_efficiency"].per == "architecture"
    # the power drawn at a given clock is a trait of a generation, not shared across them
    assert PARAMETERS["gemm_power_activity"].per == "architecture" and not PARAMETERS["gemm_power_activity"].pools


# --- CLI and figure ----------------------------------------------------------------------------

@pytest.fixture
def zoo_model():
    workloads = pytest.importorskip("perfmodel.workloads")
    if not hasattr(workloads, "get_workload"):
        pytest.skip("workload zoo not available")
    return "gpt3-1.3b" if "gpt3-1.3b" in getattr(workloads, "ZOO_NAMES", []) else "bert-base"


def _roofline_cli(argv):
    """Run the roofline subcommand alone (its parser and handler, not the other commands)."""
    import argparse

    from perfmodel.cli import roofline as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["roofline", *argv])
    return args.func(args)


def test_cli_roofline_json(zoo_model, capsys, tmp_path):
    png = tmp_path / "roofline.png"
    assert _roofline_cli(["--gpu", "H100-SXM5-80GB", "--model", zoo_model, "--json", "-o", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ridge_points_flop_per_byte"]["bf16"] == pytest.approx(989.5e12 / 3.35e12, rel=0.01)
    kinds = {op["kind"]: op["bound"] for op in out["ops"]}
    assert kinds["matmul"] == "compute" or any(op["bound"] == "compute" for op in out["ops"])
    assert all(op["attained_flops"] <= 989.5e12 * 1.001 for op in out["ops"] if op["attained_flops"])
    # an element-wise op is never compute-bound: its bytes or its dispatch set its time
    assert set(out["memory_bound"]) | set(out["launch_bound"]) >= {op["op"] for op in out["ops"]
                                                                   if op["kind"] == "elementwise"}
    assert png.stat().st_size > 10_000


def test_cli_roofline_launch_floor_follows_the_framework(zoo_model, capsys):
    """A slower host per op can only make more ops launch-bound (the floor rises, kernels do not
    change); the host time used is stated."""
    def launch_bound(extra):
        assert _roofline_cli(["--gpu", "H100-SXM5-80GB", "--model", zoo_model, "--json", "--attention", "fused",
                              *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        return out["host_dispatch_time_s"], set(out["launch_bound"])

    frameworks = [name for name in FRAMEWORKS if name != "dle-tensorflow"]
    results = [launch_bound([])] + [launch_bound(["--framework", name]) for name in ("dle-tensorflow", *frameworks[:2])]
    for host_a, ops_a in results:
        for host_b, ops_b in results:
            if host_a <= host_b:
                assert ops_a <= ops_b
    assert _roofline_cli(["--gpu", "A100-SXM4-80GB", "--model", zoo_model, "--framework", "dle-tensorflow"]) == 0
    # the text names the stack whose host time it used, fitted or at its prior
    assert re.search(r"framework dle-tensorflow(: the prior, [^,]*)?, longer than the kernel", capsys.readouterr().out)


def test_cli_roofline_attention_follows_the_framework_and_unfused_is_slower(capsys):
    def attention(*extra):
        # 16 sequences per GPU: the attention kernel outlasts any stack's host dispatch time, so its
        # time is the kernel's, not the launch floor's (which differs between stacks)
        assert _roofline_cli(["--gpu", "A100-SXM4-80GB", "--model", "gpt3-350m", "--micro-batch", "16",
                              "--json", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        op = next(op for op in out["ops"] if op["kind"] == "attention")
        assert op["bound"] != "launch"
        return out["flash_attention"], op["time_s"], op["bytes"]

    fused, fused_s, fused_bytes = attention("--framework", "composer")
    unfused, unfused_s, unfused_bytes = attention("--framework", "dle-pytorch")
    assert (fused, unfused) == (True, False)
    # the s x s scores go through memory only when unfused (FlashAttention keeps them on chip)
    assert unfused_bytes > fused_bytes and unfused_s > fused_s
    # the same fused kernel takes the same time whichever stack launches it
    assert attention("--framework", "dle-pytorch", "--attention", "fused")[1] == pytest.approx(fused_s)


def test_cli_roofline_table_and_bad_precision(zoo_model, capsys):
    assert _roofline_cli(["--gpu", "A100-SXM4-80GB", "--model", zoo_model]) == 0
    out = capsys.readouterr().out
    assert "ridge points" in out and "memory-bound:" in out
    with pytest.raises(ValueError, match="fp8.*A100-SXM4-80GB"):
        _roofline_cli(["--gpu", "A100-SXM4-80GB", "--model", zoo_model, "--precision", "fp8"])


def test_cli_roofline_explains_an_efficiency_above_one(capsys):
    """Only Winograd lifts an op above its dense peak, and the text says why; in TF32 none is."""
    assert _roofline_cli(["--gpu", "V100-SXM2-32GB", "--model", "nnunet-2d", "--precision", "fp32",
                          "--micro-batch", "64", "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    above = {op["op"] for op in ops if op["efficiency"] > 1}
    assert above and all(op["kind"] == "conv" for op in ops if op["op"] in above)
    assert _roofline_cli(["--gpu", "V100-SXM2-32GB", "--model", "nnunet-2d", "--precision", "fp32",
                          "--micro-batch", "64"]) == 0
    assert "Winograd" in capsys.readouterr().out
    assert _roofline_cli(["--gpu", "A100-SXM4-80GB", "--model", "nnunet-2d", "--precision", "tf32",
                          "--micro-batch", "64"]) == 0
    assert "Winograd" not in capsys.readouterr().out


def test_roofline_figure_has_labelled_axes():
    class Workload:
        def ops(self, micro_batch, precision="bf16", flash_attention=True):
            return _table(micro_batch)

    from perfmodel.plots.roofline import roofline

    points = compute.roofline_points(Workload(), A100, "bf16", DEFAULTS, micro_batch=2)
    figure = roofline(A100, points, ["fp32", "bf16"])
    axes = figure.axes[0]
    assert "FLOP/byte" in axes.get_xlabel() and "TFLOP/s" in axes.get_ylabel()
    assert axes.get_xscale() == "log" and len(axes.lines) == 2


def test_zoo_op_times_array_equals_scalar(zoo_model):
    from perfmodel.workloads import get_workload

    workload = get_workload(zoo_model)
    micro_batch, tp = np.array([[1], [2], [8]]), np.array([[1, 2, 4]])
    forward, backward = compute.op_times(workload.ops(micro_batch, tp), A100, "bf16", DEFAULTS)
    assert forward.shape == (len(workload.ops(1)), 3, 3)
    for i, b in enumerate(micro_batch[:, 0]):
        for j, t in enumerate(tp[0]):
            f, bw = compute.op_times(workload.ops(int(b), int(t)), A100, "bf16", DEFAULTS)
            np.testing.assert_allclose(forward[:, i, j], f, rtol=1e-12)
            np.testing.assert_allclose(backward[:, i, j], bw, rtol=1e-12)
    # more micro-batch never makes a step's compute cheaper
    assert np.all(np.diff(forward.sum(axis=0), axis=0) >= 0)


@settings(max_examples=20, deadline=None)
@given(seq_len=st.sampled_from([2048, 4096, 16384, 65536]), gpu=st.sampled_from(["A100-SXM4-80GB", "H100-SXM5-80GB"]))
def test_flash_attention_keeps_its_rate_at_long_sequences_the_materialised_one_does_not(seq_len, gpu):
    """Fused (flash) attention never writes its s x s score matrix (Dao et al. 2022): its FLOP rate
    does not fall as the sequence grows (x4 the sequence = x16 the score FLOPs of a micro-batch,
    timed at least at 95 % of the rate; it may rise, as the short kernel pays its fixed latency on
    fewer FLOPs), and it is never slower than the same op with the scores materialised."""
    from perfmodel.hardware.catalog import load_catalog
    from perfmodel.profile import default_profile
    from perfmodel.workloads.transformer import transformer

    device, profile = load_catalog().gpu(gpu), default_profile()

    def attention_rate(seq, flash):
        table = transformer("t", arch="llama", layers=2, hidden=4096, heads=32, seq_len=seq,
                            vocab=32000).ops(1, 1, 1, precision="bf16", flash_attention=flash)
        i = table.name.index("attention")
        forward, _ = compute.op_times(table, device, "bf16", profile, host_floor=False)  # the kernel's own rate
        assert bool(table.implicit[i]) is flash
        return float(table.flops[i].item() / forward[i].item()), float(forward[i].item())

    short_rate, _ = attention_rate(seq_len, True)
    long_rate, long_fused = attention_rate(4 * seq_len, True)
    assert long_rate >= 0.95 * short_rate
    _, long_materialised = attention_rate(4 * seq_len, False)
    assert long_fused <= long_materialised


@pytest.mark.parametrize("kernel,size", [(3, [64, 64, 64]), (3, [224, 224]), (1, [56, 56])])
def test_an_implicit_gemm_convolution_moves_its_tensors_not_its_im2col_matrix(kernel, size):
    """A convolution reads its input activation once, not the k x (kernel volume) im2col matrix
    the GEMM view implies (cuDNN/CUTLASS implicit GEMM): its time is at least the roofline of its
    true bytes and at most the same op timed as an explicit GEMM (equal for 1x1 kernels, where
    im2col is the activation itself, up to the output and weights)."""
    import dataclasses

    from perfmodel.workloads.cnn import cnn

    layer = {"op": "conv", "in_channels": 32, "out_channels": 32, "kernel": kernel, "padding": kernel // 2,
             "input_size": size}
    table = cnn("c", [layer]).ops(8, 1, 1, precision="bf16")
    assert bool(table.implicit[0])
    implicit, _ = compute.op_times(table, A100, "bf16", DEFAULTS)
    explicit, _ = compute.op_times(dataclasses.replace(table, implicit=np.zeros(1, dtype=bool)), A100, "bf16",
                                   DEFAULTS)
    floor = table.bytes[0] / (A100.memory_bandwidth * DEFAULTS.get("memory_efficiency", A100.architecture))
    assert floor <= implicit[0] <= explicit[0] * (1 + 1e-12)


@pytest.mark.parametrize("layer, marked", [
    ({"kernel": 3, "padding": 1, "input_size": [56, 56]}, True),
    ({"kernel": 3, "padding": 1, "stride": 2, "input_size": [56, 56]}, False),
    ({"kernel": 1, "input_size": [56, 56]}, False),
    ({"kernel": 3, "padding": 1, "groups": 32, "input_size": [56, 56]}, False),
    ({"kernel": 3, "padding": 1, "input_size": [32, 32, 32]}, False),
    ({"kernel": 3, "padding": 1, "transposed": True, "input_size": [28, 28]}, False),
])
def test_only_a_2d_3x3_stride_1_dense_convolution_is_a_winograd_candidate(layer, marked):
    from perfmodel.workloads.cnn import cnn

    table = cnn("c", [{"op": "conv", "in_channels": 64, "out_channels": 64, **layer}]).ops(8, 1, 1, precision="fp32")
    assert bool(table.per_op("winograd")[0]) is marked


@settings(max_examples=40, deadline=None)
@given(gain=st.floats(1.0, 4.0), batch=st.sampled_from([1, 8, 64]), channels=st.sampled_from([16, 64, 256]))
def test_winograd_divides_an_fp32_3x3_convolution_by_its_gain_and_spares_tensor_cores(gain, batch, channels):
    """The gain scales the convolution's tiles (forward and both gradients) by exactly 1/gain in
    FP32 -- the kernel's fixed latency and the host floor aside -- and leaves TF32/FP16 (tensor-core
    implicit GEMMs) and 1x1 convolutions untouched."""
    from perfmodel.workloads.cnn import cnn

    layers = [{"op": "conv", "in_channels": channels, "out_channels": channels, "kernel": 3, "padding": 1,
               "input_size": [28, 28]},
              {"op": "conv", "in_channels": channels, "out_channels": channels, "kernel": 1, "input_size": [28, 28]}]
    profile = DEFAULTS.with_values(gemm_kernel_latency=0.0, kernel_launch_overhead=0.0, memory_efficiency=1e6)
    for precision in ("fp32", "tf32", "fp16"):
        table = cnn("c", layers).ops(batch, 1, 1, precision=precision)
        plain = compute.op_times(table, A100, precision, profile.with_values(conv_winograd_gain=1.0), host_floor=False)
        fast = compute.op_times(table, A100, precision, profile.with_values(conv_winograd_gain=gain), host_floor=False)
        for before, after in zip(plain, fast):
            expected_3x3 = before[0] / gain if precision == "fp32" else before[0]
            assert after[0] == pytest.approx(expected_3x3, rel=1e-9)
            assert after[1] == pytest.approx(before[1], rel=1e-12)


def test_the_winograd_gain_is_fitted_on_training_rows_once_for_all_gpus():
    from perfmodel.calibration.fit import INFORMED_BY, STAGES
    from perfmodel.profile import default_profile

    parameter = PARAMETERS["conv_winograd_gain"]
    assert parameter.per is None and parameter.low == 1.0 <= parameter.default <= parameter.high == 4.0
    assert "conv_winograd_gain" in dict((name, fitted) for name, _, fitted in STAGES)["train"]
    assert INFORMED_BY["conv_winograd_gain"] == ("train",)
    assert "conv_winograd_gain" in default_profile().values  # the shipped profile carries a fitted value


# --- ops of several kernels: unfused attention ------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(positive, positive, st.floats(0.0, 1.0), rate, rate, fraction, fraction, launch, st.integers(1, 8))
def test_side_kernels_never_hide_under_the_gemms(flops, nbytes, share, peak, bandwidth, eta_c, eta_m, overhead,
                                                kernels):
    """A chain of kernels takes at least the roofline of all its work and at most its compute plus
    its memory time; moving bytes from the GEMMs to a side kernel never makes it faster; one kernel
    with no side bytes is the roofline."""
    side = share * nbytes
    chain = compute.chain_time(flops, nbytes, side, kernels, peak, bandwidth, eta_c, eta_m, overhead)
    compute_s, memory_s = flops / (peak * eta_c), nbytes / (bandwidth * eta_m)
    assert chain >= max(compute_s, memory_s) * (1 - 1e-12) + kernels * overhead * (1 - 1e-12)
    assert chain <= (compute_s + memory_s + kernels * overhead) * (1 + 1e-12)
    more_side = compute.chain_time(flops, nbytes, min(nbytes, 2 * side), kernels, peak, bandwidth, eta_c, eta_m,
                                   overhead)
    assert more_side >= chain * (1 - 1e-12)
    assert compute.chain_time(flops, nbytes, 0.0, 1, peak, bandwidth, eta_c, eta_m, overhead) == pytest.approx(
        compute.roofline_time(flops, nbytes, peak, bandwidth, eta_c, eta_m, overhead))


@pytest.mark.parametrize("arch, flash, forward, backward", [
    ("gpt", False, 4, 6),      # QK^T, softmax, dropout, PV; 4 gradient GEMMs, softmax and dropout backward
    ("llama", False, 3, 5),    # no dropout
    ("gpt", True, 1, 3),       # FlashAttention-2: one kernel; dO.O preprocess, main, dQ conversion
    ("txl", True, 6, 8),       # never fused: AC, BD, their add, softmax, dropout, PV
])
def test_attention_counts_the_kernels_it_launches(arch, flash, forward, backward):
    from perfmodel.workloads.transformer import transformer

    extra = {"mem_len": 64} if arch == "txl" else {}
    table = transformer("t", arch=arch, layers=2, hidden=1024, heads=16, seq_len=512, vocab=32000,
                        **extra).ops(2, 1, 1, precision="bf16", flash_attention=flash)
    i = table.name.index("attention")
    launches_fwd, launches_bwd = compute.kernel_launches(table, "bf16")
    assert (launches_fwd[i].item(), launches_bwd[i].item()) == (forward, backward)
    # the side kernels' bytes are part of the op's bytes, and only unfused attention has them
    assert 0.0 < table.pass_bytes[i].item() < table.bytes[i].item() if not table.implicit[i] else \
        table.pass_bytes[i].item() == 0.0
    assert np.all(table.pass_bytes[np.arange(len(table)) != i] == 0.0)


def test_unfused_attention_times_softmax_and_dropout_as_kernels_of_their_own():
    """Unfused attention on an A100: the chain of its kernels, which is its GEMMs' roofline plus the
    softmax/dropout traffic at the memory rate and a launch per kernel -- slower than one roofline
    over all its work by the softmax and dropout passes the GEMMs cannot hide."""
    from perfmodel.hardware.catalog import load_catalog
    from perfmodel.profile import default_profile
    from perfmodel.workloads.transformer import transformer

    gpu, profile = load_catalog().gpu("A100-SXM4-80GB"), default_profile()
    table = transformer("t", arch="gpt", layers=2, hidden=1024, heads=16, seq_len=2048,
                        vocab=51200).ops(4, 1, 1, precision="fp16", flash_attention=False)
    i = table.name.index("attention")
    forward, backward = compute.op_times(table, gpu, "fp16", profile, host_floor=False)
    peak, bandwidth, eta_c, eta_m, launch = (np.broadcast_to(x, np.shape(table.flops))[i].item() if np.ndim(x) else x
                                             for x in compute.roofline_inputs(table, gpu, "fp16", profile))
    flops, nbytes, side = table.flops[i].item(), table.bytes[i].item(), table.pass_bytes[i].item()
    gemms = max(flops / (peak * eta_c), (nbytes - side) / (bandwidth * eta_m))
    assert forward[i].item() == pytest.approx(gemms + side / (bandwidth * eta_m) + 4 * launch)
    one_roofline = compute.roofline_time(flops, nbytes, peak, bandwidth, eta_c, eta_m, launch)
    assert forward[i].item() > one_roofline
    assert backward[i].item() > forward[i].item()
