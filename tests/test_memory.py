"""Memory model and activation recomputation: published formulas, invariants, errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import plans
from perfmodel.models import memory, recompute
from perfmodel.profile import PARAMETERS
from perfmodel.workloads import get_workload

GB = 1e9
BUFFERS = {"bucket_bytes": 26214400, "framework_bytes": 1e9, "fragmentation": 0.05}

# GPT-3 175B (Brown et al. 2020 Table 2.1) as in Korthikanti et al. 2022 Table 3
S, B, H, A, L = 2048, 1, 12288, 96, 96


# --- model state -----------------------------------------------------------------------------

def test_mixed_precision_adam_is_16_bytes_per_param():
    state = memory.model_state_bytes(1.0)
    assert (state["weights"], state["gradients"], state["optimizer"]) == (2.0, 2.0, 12.0)


@pytest.mark.parametrize("precision, optimizer, expected", [
    ("bf16", "sgd", (2, 2, 8)), ("fp32", "adam", (4, 4, 8)), ("tf32", "sgd", (4, 4, 4)),
    ("fp8", "adam", (2, 2, 12)),
])
def test_other_precisions_and_optimizers(precision, optimizer, expected):
    assert memory.state_bytes_per_param(precision, optimizer) == expected


def test_zero_figure_1_numbers():
    # Rajbhandari et al. 2020 Fig. 1: 7.5B parameters, 64-way data parallel
    totals = [sum(memory.model_state_bytes(7.5e9, dp=64, zero=z).values()) / GB for z in range(4)]
    assert [round(t, 1) for t in totals] == [120.0, 31.4, 16.6, 1.9]


@given(params=st.floats(1e6, 1e12), dp=st.integers(1, 4096), extra=st.integers(1, 4096),
       zero=st.integers(0, 3))
def test_more_gpus_never_increase_per_gpu_state(params, dp, extra, zero):
    small = sum(memory.model_state_bytes(params, dp, zero).values())
    large = sum(memory.model_state_bytes(params, dp + extra, zero).values())
    assert large <= small * (1 + 1e-12)
    if zero == 3:
        assert math.isclose(large * (dp + extra), small * dp, rel_tol=1e-9)


def test_model_state_broadcasts_over_stages():
    state = memory.model_state_bytes(7.5e9, 64, np.array([0, 1, 2, 3]))
    assert state["optimizer"].shape == (4,)
    assert np.all(np.diff(sum(state.values())) < 0)


# --- activations: Korthikanti et al. 2022 Table 2 ----------------------------------------------

def per_layer(t=1, sp=False, recompute_name="none", flash=False, cp=1, bpv=2):
    return float(memory.transformer_activation_bytes(S, B, H, A, 1, tp=t, cp=cp, sequence_parallel=sp,
                                                     recompute=recompute_name, flash_attention=flash,
                                                     bytes_per_value=bpv))


def test_table_2_no_parallelism():
    assert per_layer() == S * B * H * (34 + 5 * A * S / H)
    assert per_layer() == 2_868_903_936  # 114 sbh for GPT-3 175B


@pytest.mark.parametrize("t", [2, 4, 8])
def test_table_2_tensor_parallel(t):
    assert math.isclose(per_layer(t), S * B * H * (10 + 24 / t + 5 * A * S / (H * t)))
    assert math.isclose(per_layer(t, sp=True), S * B * H / t * (34 + 5 * A * S / H))
    assert math.isclose(per_layer(t, recompute_name="selective"), S * B * H * (10 + 24 / t))
    assert math.isclose(per_layer(t, sp=True, recompute_name="selective"), 34 * S * B * H / t)
    assert math.isclose(per_layer(t, recompute_name="full"), 2 * S * B * H)
    assert math.isclose(per_layer(t, sp=True, recompute_name="full"), 2 * S * B * H / t)


def test_sequence_parallel_plus_selective_is_5x_smaller():
    # Korthikanti abstract: "reduces activation memory by 5x" (GPT-3, t = 8: 23 sbh -> 4.25 sbh)
    assert math.isclose(per_layer(8) / per_layer(8, sp=True, recompute_name="selective"), 23 / 4.25)


def test_flash_attention_drops_the_score_matrix_like_selective():
    assert per_layer(8, sp=True, flash=True) == per_layer(8, sp=True, recompute_name="selective")


def test_context_parallel_divides_and_precision_scales():
    assert math.isclose(per_layer(8, sp=True, cp=4), per_layer(8, sp=True) / 4)
    assert math.isclose(per_layer(bpv=4), 2 * per_layer())


def test_activation_arrays_match_scalars():
    tps = np.array([1, 2, 4, 8])
    array = memory.transformer_activation_bytes(S, B, H, A, L, tp=tps, sequence_parallel=True)
    for index, t in enumerate(tps):
        assert array[index] == memory.transformer_activation_bytes(S, B, H, A, L, tp=int(t),
                                                                   sequence_parallel=True)


def test_sqrt_and_every_k_counts():
    # 96 layers: sqrt keeps ceil(96 / 10) = 10 segment inputs
    args = dict(layer_bytes=100.0, selective_bytes=40.0, input_bytes=2.0)
    assert recompute.kept_bytes("sqrt", 96, **args) == 10 * 2.0
    assert recompute.working_bytes("sqrt", 96, **args) == 10 * 100.0 - 2.0
    # every 4th layer keeps everything: 24 kept, 72 recomputed
    assert recompute.kept_bytes("every_k", 96, every=4, **args) == 24 * 100.0 + 72 * 2.0
    assert recompute.extra_forward_fraction("every_k", 96, every=4) == 0.75
    assert recompute.kept_bytes("every_k", 96, every=1, **args) == recompute.kept_bytes("none", 96, **args)


@st.composite
def transformer_shapes(draw):
    t = draw(st.sampled_from([1, 2, 4, 8]))
    heads = t * draw(st.integers(1, 16))
    return dict(seq_len=draw(st.integers(1, 8192)), micro_batch=draw(st.integers(1, 16)),
                hidden=heads * draw(st.integers(1, 256)), heads=heads, layers=draw(st.integers(1, 128)),
                tp=t, sequence_parallel=draw(st.booleans()), flash_attention=draw(st.booleans()))


def peak(shape, strategy, every=1, inflight=1):
    kept = memory.transformer_activation_bytes(**shape, recompute=strategy, recompute_every=every)
    return inflight * kept + memory.transformer_recompute_working_bytes(**shape, recompute=strategy,
                                                                        recompute_every=every)


@settings(max_examples=200)
@given(shape=transformer_shapes(), k=st.integers(1, 64), inflight=st.integers(1, 32))
def test_more_recomputation_never_increases_memory(shape, k, inflight):
    def at(strategy, every=1):
        return float(peak(shape, strategy, every, inflight))

    def no_more(a, b):
        return a <= b * (1 + 1e-12)

    assert no_more(at("selective"), at("none"))
    assert no_more(at("full"), at("selective"))
    assert no_more(at("every_k", k), at("none"))
    assert no_more(at("every_k", k + 1), at("every_k", k))
    assert no_more(at("full"), at("every_k", k))
    assert no_more(at("sqrt"), at("none"))
    # and recomputing more layers costs more forward work
    layers = shape["layers"]
    assert (recompute.extra_forward_fraction("every_k", layers, every=k)
            <= recompute.extra_forward_fraction("every_k", layers, every=k + 1)
            <= recompute.extra_forward_fraction("full", layers) == 1.0)


# --- pipeline ---------------------------------------------------------------------------------

def test_1f1b_first_stage_holds_p_microbatches():
    assert memory.pipeline_inflight_microbatches(16, 64) == 16
    assert memory.pipeline_inflight_microbatches(16, 4) == 4
    assert memory.pipeline_inflight_microbatches(16, 64, stage=15) == 1
    # Korthikanti Sec. 4.2.3: with 1F1B the first stage holds L/p layers x p micro-batches = L layers
    for p in (1, 2, 4, 8, 16):
        stage = memory.transformer_activation_bytes(S, B, H, A, L // p, tp=8, sequence_parallel=True)
        held = stage * memory.pipeline_inflight_microbatches(p, 1024)
        assert math.isclose(held, memory.transformer_activation_bytes(S, B, H, A, L, tp=8, sequence_parallel=True))


@pytest.mark.parametrize("p, v", [(4, 2), (8, 3), (16, 4)])
def test_interleaving_factor(p, v):
    # Korthikanti Sec. 4.2.3: interleaving multiplies the first stage's memory by 1 + (p-1)/(p v)
    assert math.isclose(memory.pipeline_inflight_microbatches(p, 10**6, vp=v), p * (1 + (p - 1) / (p * v)))


# --- assembly, feasibility, reasons --------------------------------------------------------------

def test_components_sum_to_total_and_reasons_empty_when_fitting():
    result = memory.memory_per_gpu(1e9, 10 * GB, 80 * GB, dp=8, zero=1, logits=1e8, **BUFFERS)
    parts = sum(result[name] for name in memory.COMPONENTS)
    assert math.isclose(result["total"], parts)
    assert result["comm_buckets"] == 2 * 26214400
    assert result["fits"] and result["reasons"] == []
    assert math.isclose(result["headroom"], 80 * GB - result["total"])


def test_single_gpu_has_no_comm_buckets_and_arrays_work():
    result = memory.memory_per_gpu(np.array([1e9, 1e10]), 1 * GB, 80 * GB, **BUFFERS)
    assert result["comm_buckets"] == 0
    assert result["fits"].tolist() == [True, False]
    assert result["reasons"] is None


def test_mig_slice_gets_its_share():
    assert memory.gpu_capacity_bytes(80 * GB, 7) == 80 * GB / 7


def test_shortfall_reasons_name_numbers():
    result = memory.memory_per_gpu(175e9 / 4, 0.0, 80 * GB, **BUFFERS)
    assert not result["fits"]
    assert "short by" in result["reasons"][0] and "74.5 GiB" in result["reasons"][0]  # 80e9 bytes
    assert any("model state alone" in r and "652 GiB" in r for r in result["reasons"])  # 700e9 bytes


def test_gpt3_175b_never_fits_on_four_a100_80gb():
    """Article claim 6: Megatron TP on 4 x A100 training GPT-3 175B.  Model state alone is
    at least 175e9 x 16 / 4 = 700 GB per GPU, whatever the plan."""
    gpt3 = get_workload("gpt3-175b")
    for tp, pp in [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (4, 1)]:
        dp = 4 // (tp * pp)
        for zero in range(4 if pp == 1 else 2):  # ZeRO-2/3 with pipeline parallelism is not a valid plan
            plan = dict(tp=tp, pp=pp, dp=dp, zero=zero, sequence_parallel=tp > 1)
            choice = plans.best_recompute(gpt3, plan, 80 * GB)
            assert choice["strategy"] is None
            assert any("model state alone" in r for r in choice["reasons"])
            assert choice["total_bytes"] >= 175e9 * 16 / 4 * 0.99


def test_gpt3_175b_megatron_plan():
    """Korthikanti et al. 2022 Fig. 1 / Sec. 6: GPT-3 175B on A100-80GB with t = 8, p = 16 does
    not fit with tensor parallelism alone and fits with sequence parallelism + selective."""
    gpt3 = get_workload("gpt3-175b")
    plan = dict(tp=8, pp=16, micro_batch=1, flash_attention=False, sequence_parallel=False)
    options = plans.recompute_options(gpt3, plan, 80 * GB).set_index("strategy")
    assert not options.loc["none", "fits"] and options.loc["selective", "fits"]
    choice = plans.best_recompute(gpt3, {**plan, "sequence_parallel": True}, 80 * GB)
    assert choice["strategy"] == "none"  # SP alone already fits; least recomputation wins
    tight = plans.best_recompute(gpt3, {**plan, "sequence_parallel": True}, 50 * GB)
    assert tight["strategy"] == "selective"
    assert 0.02 < tight["extra_forward_flops"] < 0.035  # Korthikanti Sec. 5: 2.7 % for GPT-3 175B


def test_best_recompute_on_a_cnn():
    resnet = get_workload("resnet50")
    options = plans.recompute_options(resnet, dict(micro_batch=256), 80 * GB)
    none, sqrt = options.set_index("strategy").loc[["none", "sqrt"], "activation_bytes"]
    assert sqrt < none / 2
    assert plans.best_recompute(resnet, dict(micro_batch=256), 200 * GB)["strategy"] == "none"
    budget = (none + sqrt) / 2 + 2 * GB
    assert plans.best_recompute(resnet, dict(micro_batch=256), budget)["strategy"] == "sqrt"
    nothing = plans.best_recompute(resnet, dict(micro_batch=256), 1 * GB)
    assert nothing["strategy"] is None and nothing["reasons"]


def test_cnn_activations_are_the_saved_bytes():
    table = get_workload("resnet50").ops(32)
    assert memory.cnn_activation_bytes(table) == (table.saved_bytes * table.repeat).sum()
    kept, top = memory.cnn_sqrt_activation_bytes(np.array([4.0, 1, 1, 1, 1, 1, 1, 1, 1]))
    assert kept == 6.0 and top == 4.0 + 1.0 + 3.0  # segments [4,1,1] [1,1,1] [1,1,1]: last one after inputs 4, 1


def test_parameters_registered_with_sources():
    for name in ("framework_memory_bytes", "allocator_fragmentation", "ddp_bucket_bytes"):
        assert PARAMETERS[name].source


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda: memory.model_state_bytes(1e9, 8, 4), "zero stage must be 0, 1, 2 or 3, got 4"),
    (lambda: memory.model_state_bytes(-1.0), "params must be"),
    (lambda: memory.model_state_bytes(1e9, 0), "dp must be an integer >= 1"),
    (lambda: memory.model_state_bytes(1e9, precision="fp4"), "precision 'fp4' is unknown"),
    (lambda: memory.model_state_bytes(1e9, optimizer="lamb"), "optimizer 'lamb' is unknown"),
    (lambda: memory.transformer_activation_bytes(S, B, H, A, L, recompute="half"),
     "recompute strategy 'half' is unknown"),
    (lambda: memory.transformer_activation_bytes(S, B, H, A, L, tp=5), "tp=5 does not divide heads=96"),
    (lambda: memory.transformer_activation_bytes(S, B, H, A, L, recompute="every_k", recompute_every=0),
     "recompute_every must be an integer >= 1"),
    (lambda: memory.pipeline_inflight_microbatches(0, 8), "pp must be an integer >= 1"),
    (lambda: plans.plan_settings(get_workload("gpt3-175b"), dict(pp=16, vp=8)),
     "pp=16, vp=8.*interleaving .vp > 1. needs pp\\*vp at most the layers \\+ 2"),
    (lambda: plans.plan_settings(get_workload("gpt3-175b"), dict(pp=97)), "pp=97.*pp exceeds the layers"),
    (lambda: plans.plan_settings(get_workload("gpt3-175b"), dict(tp=7)), "tp=7.*96 heads.*tp does not divide the attention heads"),
    (lambda: plans.plan_settings(get_workload("gpt3-175b"), dict(recompute="every_k")),
     "needs recompute_every"),
    (lambda: plans.plan_settings(get_workload("resnet50"), dict(recompute="selective")),
     "needs a transformer (CNNs: none or sqrt)"),
    (lambda: plans.best_recompute(get_workload("resnet50"), dict(bogus=1), 80 * GB), "unknown plan fields"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# --- vectorized plan level (the path estimate and search use) -----------------------------------

def test_strategy_codes_match_the_scenario_order():
    from perfmodel.scenario import RECOMPUTE

    assert recompute.STRATEGIES == RECOMPUTE


def test_plan_memory_arrays_equal_one_plan_at_a_time():
    from perfmodel.profile import default_profile

    gpt3 = get_workload("gpt3-1.3b")
    columns = dict(tp=[1, 2, 4, 8], pp=[1, 2, 4, 8], dp=[8, 2, 1, 1], cp=[1, 1, 2, 1], vp=[1, 2, 1, 3],
                   micro_batch=[1, 2, 1, 4], global_batch=[64, 64, 64, 64], recompute=[0, 1, 3, 4],
                   recompute_every=[1, 1, 4, 1], zero=[1, 0, 0, 0], sequence_parallel=[0, 1, 1, 0])
    plans = {key: np.array(value) for key, value in columns.items()}
    kwargs = dict(precision="bf16", optimizer="adam", flash_attention=False, profile=default_profile(),
                  capacity=80 * GB)
    together = memory.plan_memory(gpt3, None, plans, **kwargs)
    for i in range(4):
        alone = memory.plan_memory(gpt3, None, {k: v[i:i + 1] for k, v in plans.items()}, **kwargs)
        for key in memory.COMPONENTS + ("total",):
            assert math.isclose(together[key][i], alone[key][0]), key
        assert together["stage"][i] == alone["stage"][0]
    parts = sum(together[name] for name in memory.COMPONENTS)
    assert np.allclose(parts, together["total"])


def test_recompute_forward_share_for_codes():
    codes = np.array([0, 1, 2, 3, 4])
    share = recompute.recompute_forward_share(codes, layers=96, every=np.array([1, 1, 1, 4, 1]))
    assert share.tolist() == [0.0, 0.0, 1.0, 0.75, 1.0]
    with pytest.raises(ValueError, match="every_k' needs the layers per stage"):
        recompute.recompute_forward_share(codes)
