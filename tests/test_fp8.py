"""fp8 training as Transformer Engine runs it: fp8 GEMMs at their own efficiency plus cast kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate, load_catalog
from perfmodel.models import compute, gemm
from perfmodel.profile import CalibrationProfile
from perfmodel.workloads import get_workload
from perfmodel.workloads.transformer import transformer

CATALOG = load_catalog()
H100 = CATALOG.gpu("H100-SXM5-80GB")
PROFILE = CalibrationProfile()


def _table(workload, micro_batch=2, tp=1, precision="fp8"):
    return workload.ops(micro_batch, tp, 1, precision=precision, flash_attention=True)


def test_cast_bytes_follow_the_gemm_shapes():
    """Input m x k, weight k x n, output gradient m x n: 4 bytes per element each (read bf16, write
    fp8 row-wise and transposed); only matmuls cast."""
    table = _table(transformer(layers=2, hidden=1024, heads=16, seq_len=2048, vocab=32000), micro_batch=4, tp=2)
    forward_input, forward_weight, backward_output = compute.fp8_cast_bytes(table)
    kind = table.per_op("kind")
    for i, name in enumerate(table.name):
        m, n, k, batch = (float(np.ravel(x[i])[0]) for x in (table.m, table.n, table.k, table.batch_gemms))
        cast = kind[i] == "matmul"
        assert float(np.ravel(forward_input[i])[0]) == pytest.approx(4.0 * batch * m * k if cast else 0.0)
        assert float(np.ravel(forward_weight[i])[0]) == pytest.approx(4.0 * batch * k * n if cast else 0.0)
        assert float(np.ravel(backward_output[i])[0]) == pytest.approx(4.0 * batch * m * n if cast else 0.0)
    qkv = list(table.name).index("qkv")
    assert float(np.ravel(forward_input[qkv])[0]) == 4.0 * (4 * 2048) * 1024  # tokens x hidden


def test_fp8_matmul_time_is_the_gemm_plus_its_casts_and_other_ops_stay_bf16():
    table = _table(get_workload("gpt3-2.7b"))
    fp8_fwd, fp8_bwd = compute.op_times(table, H100, "fp8", PROFILE)
    bf16_fwd, bf16_bwd = compute.op_times(table, H100, "bf16", PROFILE)
    kind = table.per_op("kind")
    other = np.ravel(kind != "matmul")
    np.testing.assert_allclose(np.ravel(fp8_fwd)[other], np.ravel(bf16_fwd)[other])
    np.testing.assert_allclose(np.ravel(fp8_bwd)[other], np.ravel(bf16_bwd)[other])
    # the casts, each its own memory-bound kernel (launch and host dispatch floor), on top of the GEMM
    kernel_fwd, kernel_bwd = compute._kernel_times(table, H100, "fp8", PROFILE, 1.0)
    eta_m, launch = PROFILE.get("memory_efficiency", "Hopper"), PROFILE.get("kernel_launch_overhead")
    host = PROFILE.get("host_dispatch_time")
    cast_s = [np.maximum(c / (H100.memory_bandwidth * eta_m) + launch, host) * (c > 0)
              for c in compute.fp8_cast_bytes(table)]
    matmul = np.ravel(kind == "matmul")
    expected_fwd = np.maximum(kernel_fwd, host) + cast_s[0]  # the weight's cast is once per step
    expected_bwd = np.maximum(kernel_bwd, host) + cast_s[2]
    np.testing.assert_allclose(np.ravel(fp8_fwd)[matmul], np.ravel(expected_fwd)[matmul], rtol=1e-12)
    np.testing.assert_allclose(np.ravel(fp8_bwd)[matmul], np.ravel(expected_bwd)[matmul], rtol=1e-12)
    assert np.all(np.ravel(cast_s[0])[matmul] > 0) and np.all(np.ravel(cast_s[2])[matmul] > 0)
    for mine, theirs in zip(compute.fp8_cast_times(table, H100, "fp8", PROFILE), cast_s):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    assert all(np.all(t == 0) for t in compute.fp8_cast_times(table, H100, "bf16", PROFILE))


def test_weights_are_cast_once_per_step_not_per_micro_batch():
    """Transformer Engine caches the fp8 weights over a step's micro-batches (is_first_microbatch):
    forward = micro-batches x (GEMMs + input casts) + one weight cast per matmul."""
    from perfmodel.chain import evaluate
    from perfmodel.plans import as_arrays, resolve_plan
    from perfmodel.scenario import Plan

    workload = get_workload("gpt3-2.7b")
    cluster = CATALOG.cluster(gpu="H100-SXM5-80GB", num_gpus=8)

    def forward_s(global_batch, precision):
        plan = resolve_plan(Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=global_batch), 8, H100, "transformer")
        return evaluate(workload, cluster, as_arrays(plan), precision=precision, flash_attention=True,
                        optimizer="adam", profile=PROFILE)["forward_s"][0]

    once = 2 * forward_s(8, "fp8") - forward_s(16, "fp8")  # the part that does not grow with micro-batches
    table = _table(workload, micro_batch=1)
    weight_cast = compute.fp8_cast_times(table, H100, "fp8", PROFILE)[1]
    assert once == pytest.approx(float((weight_cast * table.per_op("repeat")).sum()), rel=1e-9)
    assert once > 0 and 2 * forward_s(8, "bf16") - forward_s(16, "bf16") == pytest.approx(0.0, abs=1e-12)


def test_fp8_gemms_use_the_fp8_efficiency_of_the_architecture():
    share = PROFILE.get("fp8_gemm_efficiency", "Hopper")
    assert share == 0.88  # H100 MAMF shares of peak: fp8 1402.6 / 1979 over bf16 794.5 / 989.5
    assert gemm.gemm_parameters(H100, "fp8", PROFILE)["efficiency"] == pytest.approx(
        share * gemm.gemm_parameters(H100, "bf16", PROFILE)["efficiency"])
    table = _table(get_workload("gpt3-13b"), micro_batch=1)
    slow = PROFILE.with_values(**{"fp8_gemm_efficiency[Hopper]": 0.4})
    matmul = np.ravel(table.per_op("kind") == "matmul")
    fast_fwd, _ = compute.op_times(table, H100, "fp8", PROFILE)
    slow_fwd, _ = compute.op_times(table, H100, "fp8", slow)
    assert np.all(np.ravel(slow_fwd)[matmul] > np.ravel(fast_fwd)[matmul])
    np.testing.assert_allclose(np.ravel(slow_fwd)[~matmul], np.ravel(fast_fwd)[~matmul])
    bf16_fwd, _ = compute.op_times(table, H100, "bf16", slow)  # bf16 does not read it
    np.testing.assert_allclose(bf16_fwd, compute.op_times(table, H100, "bf16", PROFILE)[0])


def _scenario(model, precision):
    return {"workload": {"model": model}, "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8},
            "plan": {"precision": precision, "tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 64,
                     "recompute": "full", "zero": 1}}


def test_fp8_beats_bf16_on_a_large_model_but_less_than_the_peak_ratio():
    bf16 = estimate(_scenario("gpt3-6.7b", "bf16"), profile=PROFILE)
    fp8 = estimate(_scenario("gpt3-6.7b", "fp8"), profile=PROFILE)
    compute_bf16 = sum(bf16.breakdown_s[name] for name in ("forward", "backward", "recompute"))
    compute_fp8 = sum(fp8.breakdown_s[name] for name in ("forward", "backward", "recompute"))
    assert compute_fp8 < compute_bf16
    # casts and bf16 non-GEMM ops keep fp8 well short of the 2x of the peaks
    assert compute_bf16 / compute_fp8 < H100.peak("fp8") / H100.peak("bf16") * 0.9


@settings(max_examples=40, deadline=None)
@given(tokens=st.sampled_from([256, 1024, 4096, 16384]), hidden=st.sampled_from([512, 1024, 2048, 4096]))
def test_cast_time_never_negative_and_grows_with_tokens(tokens, hidden):
    shape = transformer(layers=1, hidden=hidden, heads=hidden // 128, seq_len=tokens, vocab=32000)
    small = _table(shape, micro_batch=1)
    large = _table(shape, micro_batch=2)
    for a, b in zip(compute.fp8_cast_bytes(small), compute.fp8_cast_bytes(large)):
        assert np.all(a >= 0) and np.all(b >= a)
