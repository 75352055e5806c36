"""A fused attention kernel written for asynchronous tensor cores (Transformer Engine's cuDNN attention on
Hopper and Blackwell) against the FlashAttention-2-class kernel every other stack runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.models import compute
from perfmodel.profile import PARAMETERS, CalibrationProfile, default_profile
from perfmodel.vocabulary import ASYNC_ATTENTION_FRAMEWORKS, ASYNC_TENSOR_CORE_ARCHITECTURES, FRAMEWORKS
from perfmodel.workloads.transformer import transformer
from tests.test_compute import A100, H100, V100

DEFAULTS = CalibrationProfile()
OTHER_FRAMEWORKS = [f for f in FRAMEWORKS if f not in ASYNC_ATTENTION_FRAMEWORKS]
B200 = H100.model_copy(update={"name": "B200", "architecture": "Blackwell"})


def test_the_gain_applies_to_async_tensor_cores_and_transformer_engine_stacks_only():
    efficiency = PARAMETERS["attention_efficiency"].default
    gain = PARAMETERS["attention_async_kernel_gain"].default
    assert set(ASYNC_TENSOR_CORE_ARCHITECTURES) == {"Hopper", "Blackwell"}
    for gpu in (H100, B200):
        for framework in ASYNC_ATTENTION_FRAMEWORKS:
            assert compute.attention_factor(gpu, DEFAULTS, framework) == pytest.approx(min(1.0, efficiency * gain))
        for framework in [*OTHER_FRAMEWORKS, None]:  # flash-attn 2, SDPA's flash backend, or not stated
            assert compute.attention_factor(gpu, DEFAULTS, framework) == pytest.approx(efficiency)
    for gpu in (A100, V100):  # synchronous mma.sync: one kernel class whatever the stack
        for framework in [*FRAMEWORKS, None]:
            assert compute.attention_factor(gpu, DEFAULTS, framework) == pytest.approx(efficiency)


@settings(max_examples=25, deadline=None)
@given(gain=st.floats(1.0, 3.0), efficiency=st.floats(0.1, 1.0))
def test_the_factor_never_outruns_the_gemm_and_never_slows_attention(gain, efficiency):
    profile = DEFAULTS.with_values(attention_async_kernel_gain=gain, attention_efficiency=efficiency)
    factor = compute.attention_factor(H100, profile, "nemo")
    assert efficiency - 1e-12 <= factor <= 1.0
    assert factor == pytest.approx(min(1.0, efficiency * gain))


def _op_seconds(workload, gpu, framework, profile=DEFAULTS, micro_batch=1):
    table = workload.ops(micro_batch, precision="bf16", flash_attention=True)
    forward, backward = compute.op_times(table, gpu, "bf16", profile, host_floor=False, framework=framework)
    return table, forward.ravel() + backward.ravel()


@settings(max_examples=15, deadline=None)
@given(seq_len=st.sampled_from([1024, 4096, 16384, 65536]), gain=st.floats(1.05, 3.0))
def test_only_the_fused_attention_op_gets_faster(seq_len, gain):
    workload = transformer(layers=2, hidden=2048, heads=16, seq_len=seq_len, vocab=32000)
    profile = DEFAULTS.with_values(attention_async_kernel_gain=gain, attention_efficiency=0.3)
    table, cudnn = _op_seconds(workload, H100, "nemo", profile)
    _, flash2 = _op_seconds(workload, H100, "composer", profile)
    attention = (table.per_op("kind").ravel() == "attention") & table.per_op("implicit").ravel().astype(bool)
    assert attention.any()
    assert np.all(cudnn[attention] < flash2[attention])
    np.testing.assert_allclose(cudnn[~attention], flash2[~attention])
    # on an Ampere GPU both stacks run FlashAttention-2-class kernels
    _, ampere_te = _op_seconds(workload, A100, "nemo", profile)
    _, ampere_fa2 = _op_seconds(workload, A100, "composer", profile)
    np.testing.assert_allclose(ampere_te, ampere_fa2)


def test_the_step_gains_more_at_long_sequences():
    """Attention's share of the work grows with the sequence (its FLOP ~ s^2, a matmul's ~ s), so the
    same kernel gain shortens a long-sequence step by more."""
    profile = DEFAULTS.with_values(attention_async_kernel_gain=1.8, attention_efficiency=0.3)
    speedups = []
    for seq_len in (2048, 32768):
        workload = transformer(layers=2, hidden=4096, heads=32, seq_len=seq_len, vocab=32000)
        _, cudnn = _op_seconds(workload, H100, "nemo", profile)
        _, flash2 = _op_seconds(workload, H100, "nanotron", profile)
        speedups.append(flash2.sum() / cudnn.sum())
    assert 1.0 < speedups[0] < speedups[1] < 1.8


def _assumed(scenario, profile):
    return estimate(scenario, profile=profile).assumptions.get("assumed", [])


def test_an_estimate_without_a_framework_says_which_attention_kernel_it_assumed_on_hopper():
    scenario = {"workload": {"model": "llama2-7b", "seq_len": 16384},
                "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink4"},
                "plan": {"precision": "bf16", "tp": 2, "micro_batch": 1, "global_batch": 16,
                         "flash_attention": True}}
    profile = default_profile().with_values(attention_async_kernel_gain=1.8)
    lines = [line for line in _assumed(scenario, profile) if "FlashAttention-2-class" in line]
    assert len(lines) == 1
    # the gain shortens the step: the line gives a negative change, as a percentage
    change = float(lines[0].split("the step takes ")[1].split("%")[0])
    assert change < 0
    # stated frameworks and GPUs without asynchronous tensor cores need no such line
    assert not any("FlashAttention-2-class" in line for line in _assumed({**scenario, "framework": "nemo"}, profile))
    assert not any("FlashAttention-2-class" in line for line in _assumed({**scenario, "framework": "composer"}, profile))
    a100 = {**scenario, "hardware": {**scenario["hardware"], "gpu": "A100-SXM4-80GB", "intra": "nvlink3"}}
    assert not any("FlashAttention-2-class" in line for line in _assumed(a100, profile))
    # with no gain the line says the step would not change
    flat = [line for line in _assumed(scenario, profile.with_values(attention_async_kernel_gain=1.0))
            if "FlashAttention-2-class" in line]
    assert flat and "takes +0%" in flat[0]


def test_workload_show_times_ops_for_the_stated_framework(capsys):
    """``workload show --gpu --framework``: the op table of that stack (NeMo's attention kernel on an
    H100), said in the header; a framework the vocabulary does not know is refused by name."""
    import json

    from perfmodel.cli import main

    def ops(*extra):
        assert main(["workload", "show", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--json", *extra]) == 0
        shown = json.loads(capsys.readouterr().out)["ops_on_gpu"]
        return shown["framework"], {op["op"]: op for op in shown["ops"]}

    unstated, plain = ops()
    nemo, fused = ops("--framework", "nemo")
    assert (unstated, nemo) == (None, "nemo")
    assert fused["attention"]["time_s"] < plain["attention"]["time_s"]
    assert fused["mlp_up"]["time_s"] == pytest.approx(plain["mlp_up"]["time_s"])  # GEMMs: the same kernels
    assert main(["workload", "show", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--framework", "nemo"]) == 0
    assert "framework nemo" in capsys.readouterr().out
    assert main(["workload", "show", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--framework", "nemoo"]) == 2
    assert "nemoo" in capsys.readouterr().err


def test_workload_show_refuses_gpu_options_without_a_gpu(capsys):
    """--framework, --precision, --attention and --calibration time ops on a GPU: without --gpu they
    would be ignored silently, so the command says so and stops."""
    from perfmodel.cli import main

    assert main(["workload", "show", "llama3-8b", "--framework", "nemo", "--precision", "fp8"]) == 2
    err = capsys.readouterr().err
    assert "--precision, --framework" in err and "--gpu" in err
    assert main(["workload", "show", "llama3-8b"]) == 0
