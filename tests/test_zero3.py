"""ZeRO-3 / FSDP as it runs: per-unit all-gathers in every micro-batch's forward and backward pass,
per-micro-batch gradient reduce-scatters, prefetch, exposure, and the gathered units' memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from perfmodel import load_catalog
from perfmodel.chain import evaluate, run_chain
from perfmodel.models import comm
from perfmodel.models.memory import activation_bytes_per_value
from perfmodel.plans import PLAN_FIELDS, RECOMPUTE_CODES, check_plans
from perfmodel.profile import default_profile
from perfmodel.workloads import get_workload

SETTINGS = dict(precision="bf16", flash_attention=True, optimizer="adam")


def one_plan(**fields) -> dict[str, np.ndarray]:
    plan = dict(tp=1, pp=1, dp=1, cp=1, vp=1, micro_batch=1, global_batch=None, recompute=RECOMPUTE_CODES["none"],
                recompute_every=1, zero=0, sequence_parallel=0, offload=0)
    plan.update(fields)
    if plan["global_batch"] is None:
        plan["global_batch"] = plan["dp"] * plan["micro_batch"]
    return {name: np.array([plan[name]], dtype=np.int64) for name in PLAN_FIELDS}


def cluster(num_gpus, gpu="A100-SXM4-80GB", inter="8 x ib-hdr"):
    return load_catalog().cluster(gpu=gpu, num_gpus=num_gpus, gpus_per_node=8, intra="nvlink3" if "A100" in gpu
                                  else "nvlink4", inter=inter if num_gpus > 8 else None)


def chain(workload, gpus, profile=None, **plan):
    return run_chain(workload, gpus, one_plan(**plan), profile=profile or default_profile(), **SETTINGS)


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["gpt3-350m", "gpt3-1.3b", "llama2-7b"]),
       nodes=st.sampled_from([1, 2, 8, 32]), micro_batch=st.sampled_from([1, 2, 8]),
       micro_batches=st.sampled_from([1, 2, 8]), tp=st.sampled_from([1, 2, 8, 16]),
       dp_overlap=st.floats(0.0, 1.0), zero3_overlap=st.floats(0.05, 1.0), interference=st.floats(0.0, 1.0))
def test_zero3_is_never_faster_than_zero2_nor_zero2_than_zero1(model, nodes, micro_batch, micro_batches, tp,
                                                               dp_overlap, zero3_overlap, interference):
    # Rajbhandari et al. 2020, Sec. 7: ZeRO-3 moves 3 Psi per micro-batch where ZeRO-1 moves 2 Psi per
    # step, and hides it under less compute (one unit at a time); ZeRO-2 reduce-scatters every
    # micro-batch: with communication not free none is faster than the stage below it, same plan.
    workload = get_workload(model)
    gpus = nodes * 8
    assume(tp <= gpus)
    dp = gpus // tp
    profile = default_profile().with_values(dp_overlap=dp_overlap, zero3_overlap=zero3_overlap,
                                            overlap_interference=interference)
    plan = dict(tp=tp, dp=dp, micro_batch=micro_batch, global_batch=dp * micro_batch * micro_batches,
                sequence_parallel=int(tp > 1))
    times = {zero: evaluate(workload, cluster(gpus), one_plan(zero=zero, **plan), profile=profile, **SETTINGS)
             for zero in (1, 2, 3)}
    for lower, higher in ((1, 2), (2, 3)):
        assert times[higher]["step_time_s"][0] >= times[lower]["step_time_s"][0] * (1 - 1e-12)
        comm_s = {zero: times[zero]["dp_comm_s"][0] + times[zero]["zero_gather_s"][0] for zero in (lower, higher)}
        assert comm_s[higher] >= comm_s[lower] * (1 - 1e-12)


def test_zero2_reduce_scatters_every_micro_batch_zero1_once_per_step():
    workload, gpus = get_workload("gpt3-1.3b"), cluster(32)
    plan = dict(dp=32, micro_batch=2, global_batch=32 * 2 * 8)
    out = {zero: evaluate(workload, gpus, one_plan(zero=zero, **plan), profile=default_profile(), **SETTINGS)
           for zero in (1, 2)}
    assert out[2]["dp_comm_s"][0] == pytest.approx(8 * out[1]["dp_comm_s"][0], rel=1e-12)
    assert out[2]["zero_gather_s"][0] == out[1]["zero_gather_s"][0]


@pytest.mark.parametrize("micro_batches", [1, 4])
def test_zero3_moves_three_psi_per_micro_batch_where_zero1_moves_two_per_step(micro_batches):
    # Nothing hidden (dp_overlap 0), 16-bit gradients (same bytes as the weights), one gather per unit,
    # no pipeline-fill term (it grows with the number of collectives): in the bandwidth limit the
    # exposed time is proportional to the bytes moved, 3 Psi x m vs 2 Psi.
    # latencies at their lower bounds (every link kind): the collectives are then bandwidth-bound
    floors = {key: 1e-7 for key in default_profile().values if key.startswith("link_latency")}
    profile = default_profile().with_values(dp_overlap=0.0, gradient_reduce_bytes=2.0, pipeline_fill=0.0,
                                            zero3_gather_bucket_params=1e10, collective_base_latency=1e-6,
                                            link_latency=1e-7, **floors)
    workload, gpus = get_workload("gpt3-13b"), cluster(16)
    plan = dict(dp=16, micro_batch=1, global_batch=16 * micro_batches)
    comm_s = {}
    for zero in (1, 3):
        out = evaluate(workload, gpus, one_plan(zero=zero, **plan), profile=profile, **SETTINGS)
        comm_s[zero] = out["dp_comm_s"][0] + out["zero_gather_s"][0]
    # the remaining latencies (40 units x 3 collectives, at their floors) keep it a little above the ratio
    assert comm_s[3] / comm_s[1] == pytest.approx(1.5 * micro_batches, rel=0.03)
    assert comm_s[3] / comm_s[1] >= 1.5 * micro_batches


def test_without_prefetch_every_zero3_collective_is_exposed():
    profile = default_profile().with_values(zero3_prefetch_units=0.0)
    workload, gpus = get_workload("gpt3-1.3b"), cluster(32)
    result = chain(workload, gpus, profile, dp=32, micro_batch=2, global_batch=256, zero=3)
    steps = result.steps
    units = steps["compute"]["stage_layers"][0]
    micro_batches = steps["compute"]["micro_batches"][0]
    t_ag, t_rs = steps["dp_comm"]["t_zero3_gather"][0], steps["dp_comm"]["t_zero3_scatter"][0]
    assert result.outputs["zero_gather_s"][0] == pytest.approx(micro_batches * units * 2 * t_ag, rel=1e-12)
    assert result.outputs["dp_comm_s"][0] == pytest.approx(micro_batches * units * t_rs, rel=1e-12)


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_deepspeed_gathers_again_for_the_recomputed_forward_fsdp_does_not(recompute):
    # Nothing hidden (no prefetch): FSDP gathers each unit once forward and once backward; DeepSpeed's
    # forward hooks gather it again for the recomputed forward of activation checkpointing
    # (vocabulary.ZERO3_REGATHER_ON_RECOMPUTE), 3 gathers per unit with full recompute, 2 without.
    profile = default_profile().with_values(zero3_prefetch_units=0.0)
    workload, gpus = get_workload("gpt3-1.3b"), cluster(32)
    plan = dict(dp=32, micro_batch=2, global_batch=256, zero=3, recompute=RECOMPUTE_CODES[recompute])
    gathers = {}
    for framework in ("fsdp", "deepspeed"):
        result = run_chain(workload, gpus, one_plan(**plan), profile=profile, framework=framework, **SETTINGS)
        steps = result.steps
        per_gather = (steps["compute"]["micro_batches"][0] * steps["compute"]["stage_layers"][0]
                      * steps["dp_comm"]["t_zero3_gather"][0])
        gathers[framework] = result.outputs["zero_gather_s"][0] / per_gather
    assert gathers["fsdp"] == pytest.approx(2.0, rel=1e-12)
    assert gathers["deepspeed"] == pytest.approx(3.0 if recompute == "full" else 2.0, rel=1e-12)


@pytest.mark.parametrize("framework, whole_unit", [("deepspeed", False), ("fsdp", True), ("nemo", True), (None, True)])
def test_a_unit_gather_is_the_all_gather_of_its_parameters_in_buckets(framework, whole_unit):
    # DeepSpeed collects at most stage3_prefetch_bucket_size (5e7) parameters per all-gather; PyTorch
    # FSDP and Megatron-FSDP gather a whole unit in one collective (the default).
    profile = default_profile()
    workload, gpus = get_workload("gpt3-13b"), cluster(64)
    result = run_chain(workload, gpus, one_plan(dp=64, micro_batch=1, global_batch=64, zero=3), profile=profile,
                       framework=framework, **SETTINGS)
    steps = result.steps
    unit_params = steps["compute"]["params_local"][0] / steps["compute"]["stage_layers"][0]
    buckets = np.ceil(unit_params / profile.get("zero3_gather_bucket_params", framework))
    links = comm.link_numbers(gpus, profile)  # 8 ranks of the group per node share its NICs
    expected = buckets * comm.collective_time("all_gather", unit_params / buckets * 2.0, 64, 8, **links)
    assert (buckets == 1) == whole_unit
    assert steps["dp_comm"]["t_zero3_gather"][0] == pytest.approx(float(expected), rel=1e-12)


def test_exposure_grows_as_the_per_gpu_batch_shrinks():
    # The same gathers hide under less compute per unit when each GPU computes fewer samples.
    workload, gpus = get_workload("llama2-7b"), cluster(256)
    exposed = []
    for micro_batch in (8, 4, 2, 1):
        out = evaluate(workload, gpus, one_plan(dp=256, micro_batch=micro_batch, global_batch=2048, zero=3),
                       profile=default_profile(), **SETTINGS)
        exposed.append((out["dp_comm_s"][0] + out["zero_gather_s"][0]) / out["step_time_s"][0])
    assert all(b > a for a, b in zip(exposed, exposed[1:]))


def test_gathered_units_take_memory_per_prefetched_unit():
    workload, gpus = get_workload("llama2-7b"), cluster(64)
    memory = {}
    for prefetch in (0.0, 1.0, 2.0):
        profile = default_profile().with_values(zero3_prefetch_units=prefetch)
        out = evaluate(workload, gpus, one_plan(dp=64, zero=3), profile=profile, **SETTINGS)
        memory[prefetch] = out["memory_comm_buckets"][0]
    zero1 = evaluate(workload, gpus, one_plan(dp=64, zero=1), profile=default_profile(), **SETTINGS)
    unit_bytes = workload.params / workload.layers * activation_bytes_per_value("bf16")
    # one more unit of 16-bit weights per prefetched unit (the embedding and output layer share the units)
    assert memory[2.0] - memory[1.0] == pytest.approx(memory[1.0] - memory[0.0], rel=1e-9)
    assert memory[1.0] - memory[0.0] == pytest.approx(unit_bytes, rel=0.02)
    # the unit computing holds its weights and its unsharded (fp32) gradients: 2 + 4 bytes per parameter
    assert memory[0.0] - zero1["memory_comm_buckets"][0] == pytest.approx(3 * unit_bytes, rel=0.02)


def test_zero3_with_pipeline_and_tensor_parallelism_is_a_valid_plan():
    workload = get_workload("llama2-70b")
    plan = one_plan(tp=8, pp=4, dp=8, micro_batch=1, global_batch=64, zero=3, sequence_parallel=1)
    assert check_plans(plan, workload, 256, 8)[0] == 0
    out = evaluate(workload, cluster(256, gpu="H100-SXM5-80GB", inter="8 x ib-ndr"), plan,
                   profile=default_profile(), **SETTINGS)
    assert out["zero_gather_s"][0] > 0 and out["pp_bubble_s"][0] > 0


@pytest.mark.parametrize("framework", [None, "fsdp", "deepspeed"])
def test_an_unstated_framework_says_how_zero3_gathers_and_what_deepspeed_buckets_would_cost(framework):
    # Whole-unit gathers are the default; only an estimate that does not state its framework says so,
    # with the step under DeepSpeed's buckets, which pay more ring latencies and so are never faster.
    from perfmodel import estimate
    scenario = {"workload": {"model": "llama2-70b"},
                "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 256, "gpus_per_node": 8, "intra": "nvlink4",
                             "inter": "8 x ib-ndr"},
                "plan": {"zero": 3, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 512, "precision": "bf16",
                         "recompute": "full"}}
    if framework is not None:
        scenario["framework"] = framework
    lines = [line for line in estimate(scenario).assumptions.get("assumed", []) if "ZeRO-3 assumed" in line]
    if framework is not None:
        assert lines == []
        return
    (line,) = lines
    assert "set framework to say which" in line
    change = float(line.split("the step takes ")[1].split("%")[0])
    assert change >= 0.0
