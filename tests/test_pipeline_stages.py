"""Pipeline stages that do not divide the layers (the largest stage sets the pace), FSDP with
pipelines, tensor parallelism across nodes, and Llama 3 405B's 4D layout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from perfmodel import estimate, load_catalog
from perfmodel.chain import BREAKDOWN, run_chain
from perfmodel.models import memory
from perfmodel.models.stages import cost_balanced_stages, head_cost_in_layers, stage_layers
from perfmodel.plans import PLAN_FIELDS, RECOMPUTE_CODES, check_plans, reasons_from_mask
from perfmodel.profile import default_profile
from perfmodel.workloads import get_workload
from perfmodel.workloads.transformer import transformer

SETTINGS = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=default_profile())


def one_plan(**fields) -> dict[str, np.ndarray]:
    plan = dict(tp=1, pp=1, dp=1, cp=1, vp=1, micro_batch=1, global_batch=8, recompute=RECOMPUTE_CODES["none"],
                recompute_every=1, zero=0, sequence_parallel=0, offload=0)
    plan.update(fields)
    return {name: np.array([plan[name]], dtype=np.int64) for name in PLAN_FIELDS}


def h100(num_gpus):
    return load_catalog().cluster(gpu="H100-SXM5-80GB", num_gpus=num_gpus, gpus_per_node=8, intra="nvlink4",
                                  inter="8 x ib-ndr" if num_gpus > 8 else None)


@settings(max_examples=300, deadline=None)
@given(layers=st.integers(1, 200), data=st.data())
def test_stages_hold_every_layer_and_none_more_than_the_ceiling(layers, data):
    pp = data.draw(st.integers(1, layers))
    first, middle, last = (float(x) for x in stage_layers(layers, pp))
    ceiling = -(-layers // pp)
    assert max(first, middle, last) == ceiling  # the largest stage: ceil(layers / pp)
    if pp == 1:
        assert first == last == layers
        return
    assert 1 <= first <= last <= ceiling  # first and last give up the layers too many
    if pp == 2:
        assert first + last == layers
    else:
        middle_stages = pp - 2
        # the middle stages hold the rest, spread evenly: the largest holds `middle`
        assert middle_stages * (middle - 1) < layers - first - last <= middle_stages * middle


def test_llama3_405b_stages_are_seven_eight_seven():
    # Dubey et al. 2024, Sec. 3.3.2: 126 layers on 16 stages, one layer less on the first and the last
    assert [float(x) for x in stage_layers(126, 16)] == [7.0, 8.0, 7.0]
    assert [float(x) for x in stage_layers(96, 8)] == [12.0, 12.0, 12.0]


@pytest.mark.parametrize("layers, pp", [(96, 5), (126, 16), (30, 4), (40, 3)])
def test_the_largest_stage_sets_the_pace(layers, pp):
    # A stage of ceil(layers/pp) layers paces the pipeline: the step's forward time per micro-batch is
    # at least that stage's layers (no edges), and at most that of the model padded to pp x ceil
    # layers, whose first and last stages are full and carry the embedding and output layer too.
    ceiling = -(-layers // pp)
    model = dict(arch="gpt", hidden=2048, heads=16, seq_len=2048, vocab=51200)
    uneven = transformer(layers=layers, **model)
    padded = transformer(layers=pp * ceiling, **model)
    gpus = h100(pp)
    plan = one_plan(pp=pp, global_batch=4 * pp)
    steps = run_chain(uneven, gpus, plan, **SETTINGS).steps["compute"]
    padded_steps = run_chain(padded, gpus, plan, **SETTINGS).steps["compute"]
    per_layer_fwd = steps["layer_fwd"][0] / layers
    assert steps["stage_layers"][0] == ceiling
    assert steps["t_fwd"][0] >= ceiling * per_layer_fwd * (1 - 1e-12)
    assert steps["t_fwd"][0] <= padded_steps["t_fwd"][0] * (1 + 1e-12)
    assert steps["t_bwd"][0] <= padded_steps["t_bwd"][0] * (1 + 1e-12)


def test_uneven_stages_and_chunks_are_valid_but_only_the_end_chunks_may_hold_no_layer():
    workload = get_workload("llama3-405b")
    assert check_plans(one_plan(tp=8, pp=16, dp=64, global_batch=64), workload, 8192, 8)[0] == 0
    # 126 layers in 32 chunks: uneven, as Megatron-Bridge runs Llama 3.1 405B
    assert check_plans(one_plan(tp=8, pp=16, vp=2, dp=64, global_batch=64), workload, 8192, 8)[0] == 0
    assert check_plans(one_plan(tp=4, pp=16, vp=8, dp=4, global_batch=64), workload, 256, 64)[0] == 0  # 128 chunks
    mask = check_plans(one_plan(tp=1, pp=64, vp=4, dp=128, global_batch=128), workload, 8192, 8)[0]
    assert reasons_from_mask(mask) == [
        "interleaving (vp > 1) needs pp*vp at most the layers + 2 (only the first and last model chunks may hold no layer)"]
    mask = check_plans(one_plan(pp=127, dp=1, global_batch=8), workload, 127, 8)[0]
    assert reasons_from_mask(mask) == ["pp exceeds the layers (every pipeline stage needs a layer)"]


def test_megatron_bridge_405b_split_has_one_layer_less_on_the_first_and_last_chunk():
    """126 layers on PP 8 x VP 8: Megatron-Bridge counts the embedding and the loss as layers, 128
    over 64 chunks of 2, so the first and last chunks hold one transformer layer each: the first
    and last stages 15 layers, the middle ones 16 (NVIDIA-NeMo/Megatron-Bridge performance tables,
    account_for_embedding/loss_in_pipeline_split)."""
    first, middle, last = stage_layers(126, 8, 8)
    assert (first, middle, last) == (15, 16, 15)
    # PP 16 x VP 8: 128 chunks of one, the first holding only the embedding, the last only the loss
    assert stage_layers(126, 16, 8) == (7, 8, 7)
    assert stage_layers(126, 16, 1) == stage_layers(126, 16)  # vp 1: the chunks are the stages


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 200), pp=st.integers(1, 64), vp=st.integers(1, 8))
def test_interleaved_stages_hold_every_layer_and_never_less_than_an_even_share(layers, pp, vp):
    """Every layer has a stage (first + (pp-2) middle + last >= layers), the largest stage holds at
    least the even share ceil(layers/pp) - as equal chunks do when pp vp divides the layers."""
    assume(pp <= layers and pp * vp <= layers + 2 * (vp > 1) and (vp == 1 or pp > 1))
    first, middle, last = (float(x) for x in stage_layers(layers, pp, vp))
    if pp == 1:
        assert first == last == layers
        return
    assert first + max(pp - 2, 0) * middle + last >= layers
    assert max(first, middle, last) >= math.ceil(layers / pp)
    if layers % (pp * vp) == 0:
        assert max(first, middle, last) == layers // pp


@pytest.mark.parametrize("zero", [2, 3])
def test_fsdp_with_pipeline_parallelism_is_valid(zero):
    workload = get_workload("llama2-70b")
    plan = one_plan(tp=4, pp=4, dp=4, micro_batch=1, global_batch=32, zero=zero, sequence_parallel=1)
    assert check_plans(plan, workload, 64, 8)[0] == 0
    out = run_chain(workload, h100(64), plan, **SETTINGS).outputs
    assert sum(out[f"{name}_s"][0] for name in BREAKDOWN) == pytest.approx(out["step_time_s"][0], rel=1e-12)


def test_tensor_parallelism_across_nodes_is_valid_and_slower():
    # TP 16 on 8-GPU nodes: legal; its all-reduces cross the inter-node network, slower than NVLink
    workload = get_workload("llama2-70b")
    plans = {tp: one_plan(tp=tp, dp=16 // tp, micro_batch=1, global_batch=16, sequence_parallel=1) for tp in (8, 16)}
    assert check_plans(plans[16], workload, 16, 8)[0] == 0
    per_layer = {tp: run_chain(workload, h100(16), plans[tp], **SETTINGS).steps["tp_comm"]["t_tp"][0] for tp in plans}
    # the same bytes per all-reduce (sequence parallel shards them), 1/2 of the layers' work per rank at TP 16
    assert per_layer[16] > per_layer[8]


def test_llama3_405b_tp8_pp16_fsdp_on_8192_h100_estimates():
    # Dubey et al. 2024, Table 4: 8,192 H100, TP 8, CP 1, PP 16, DP 64 with FSDP, sequence 8,192
    scenario = {"workload": {"model": "llama3-405b", "seq_len": 8192},
                "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8192, "gpus_per_node": 8, "intra": "nvlink4",
                             "inter": "8 x ib-ndr"},
                "plan": {"tp": 8, "pp": 16, "dp": 64, "micro_batch": 1, "global_batch": 2048, "zero": 3,
                         "recompute": "none"}}
    result = estimate(scenario)
    assert result.feasible, result.reasons
    assert (result.plan["tp"], result.plan["pp"], result.plan["dp"], result.plan["zero"]) == (8, 16, 64, 3)
    assert result.breakdown_s["zero_gather"] > 0 and result.breakdown_s["pp_bubble"] > 0
    assert sum(result.breakdown_s.values()) == pytest.approx(result.step_time_s, rel=1e-9)
    assert 0 < result.mfu < 1


def test_the_largest_middle_stage_can_need_the_most_memory():
    # 126 layers on 16 stages: the second stage holds 8 layers and 15 in-flight micro-batches (1F1B),
    # 120 layers' activations, more than the first stage's 7 layers x 16 (plus the embedding masks)
    workload = get_workload("llama3-405b")
    plan = one_plan(tp=8, pp=16, dp=64, micro_batch=1, global_batch=2048, zero=1, sequence_parallel=1)
    out = run_chain(workload, h100(8192), plan, **SETTINGS).outputs
    shape = workload.shape
    per_layer = memory.transformer_layer_activation_bytes(shape.seq_len, 1, shape.hidden, shape.heads, 8, 1, True,
                                                          True, 2.0)["layer"]
    assert out["memory_stage"][0] == "middle"
    inflight = memory.pipeline_inflight_microbatches(16, 32, 1, 1)
    assert out["memory_activations"][0] >= inflight * 8 * per_layer


# --- stages placed by compute cost (nanotron) ------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(layers=st.integers(1, 160), head_cost=st.floats(0.0, 12.0), data=st.data())
def test_cost_balanced_stages_place_every_block_once_and_in_order(layers, head_cost, data):
    pp = data.draw(st.integers(1, layers))
    stages = cost_balanced_stages(layers, head_cost, pp)
    assert len(stages) == pp and sum(n for n, _, _ in stages) == layers
    assert stages[0][1] and sum(pre for _, pre, _ in stages) == 1
    head = [i for i, (_, _, post) in enumerate(stages) if post]
    assert len(head) == 1
    assert all(n == 0 for n, _, _ in stages[head[0] + 1:])  # blocks keep their order: nothing after the head
    # a stage stops at the block that passes its share of the cost: at most one block over its share
    costs = [n + post * head_cost for n, _, post in stages]
    assert max(costs) <= (layers + head_cost) / pp + max(1.0, head_cost) + 1e-9


def test_nanotron_gives_a_large_vocabulary_head_a_stage_of_its_own():
    # 16 layers of a 1B Llama (h 2048, ffn 8192) and a 131,072-word LM head: the head weighs
    # 131072 h / (4 h^2 + 3 x 8192 h) = 4 layers, so on 8 stages it gets a stage to itself
    shape = transformer(arch="llama", layers=16, hidden=2048, heads=32, ffn_hidden=8192, seq_len=4096,
                        vocab=131072).shape
    assert head_cost_in_layers(shape) == pytest.approx(4.0)
    stages = cost_balanced_stages(16, head_cost_in_layers(shape), 8)
    assert [n for n, _, _ in stages] == [3, 3, 2, 3, 2, 3, 0, 0] and stages[6][2]
    assert cost_balanced_stages(16, 4.0, 4) == [(6, True, False), (5, False, False), (5, False, False),
                                                (0, False, True)]


def test_cost_balanced_stages_pace_the_pipeline_for_nanotron_only():
    workload = transformer(arch="llama", layers=16, hidden=2048, heads=32, ffn_hidden=8192, seq_len=4096,
                           vocab=131072)
    plan = one_plan(pp=8, global_batch=64)
    steps = {framework: run_chain(workload, h100(8), plan, framework=framework, **SETTINGS).steps["compute"]
             for framework in ("nanotron", "megatron")}
    nano = steps["nanotron"]
    per_layer, post = nano["layer_fwd"][0] / 16, nano["post_fwd"][0]
    # the slowest of the placed stages: 3 layers (+ the embedding) or the LM head alone
    assert nano["t_fwd"][0] == pytest.approx(max(3 * per_layer + nano["pre_fwd"][0], post), rel=1e-12)
    assert nano["stage_layers"][0] == 3
    mega = steps["megatron"]  # Megatron's even split: 2 layers and the LM head on the last stage
    assert mega["t_fwd"][0] == pytest.approx(max(2 * mega["layer_fwd"][0] / 16 + mega["pre_fwd"][0],
                                                 2 * mega["layer_fwd"][0] / 16 + mega["post_fwd"][0]), rel=1e-12)
