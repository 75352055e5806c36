"""The chain's moe_comm step: all-to-all dispatch and combine over the expert-parallel group.

The step reads the workload's interface (``shape.moe``, ``shape.experts``, the op table's
``total("params", expert=True)`` and
``perfmodel.workloads.transformer.moe_all_to_all_bytes(shape, micro_batch, cp, precision)``, the
bytes one GPU sends per all-to-all).  :func:`moe_workload` gives a dense zoo model that interface
(its MLP GEMMs as the experts) with a stand-in byte count (dropless top-k: ``2 top_k b s / cp h``
bytes in bf16), so the step's physics is tested whatever workloads are installed; the Mixtral
test runs with the zoo's model.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel import estimate, load_catalog
from perfmodel.chain import BREAKDOWN, MOE_ALL_TO_ALLS_PER_LAYER, run_chain, transformer_workloads
from perfmodel.models import comm
from perfmodel.plans import PLAN_FIELDS, RECOMPUTE_CODES
from perfmodel.profile import default_profile
from perfmodel.workloads import get_workload

SETTINGS = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=default_profile())


class MoEShape:
    """A dense shape seen as a mixture of ``experts`` experts with ``top_k`` routing."""

    def __init__(self, shape, experts: int, top_k: int):
        self._shape, self.moe, self.experts, self.top_k = shape, True, experts, top_k

    def __getattr__(self, name):
        return getattr(self._shape, name)


class ExpertTable:
    """An op table whose MLP GEMMs are the experts (``total(..., expert=True)``)."""

    def __init__(self, table):
        self._table = table

    def __getattr__(self, name):
        return getattr(self._table, name)

    def __len__(self):
        return len(self._table)

    def total(self, column, expert=None, **selection):
        if expert is None:
            return self._table.total(column, **selection)
        experts = np.isin(self._table.name, ("mlp_up", "mlp_down")) == expert
        keep = self._table.mask(**selection) & experts.reshape(self._table.mask().shape)
        return (getattr(self._table, column) * self._table.per_op("repeat") * keep).sum(axis=0)


class MoEWorkload:
    """A dense zoo workload seen as a mixture of experts."""

    def __init__(self, dense, experts: int, top_k: int):
        self._dense, self.shape = dense, MoEShape(dense.shape, experts, top_k)

    def __getattr__(self, name):
        return getattr(self._dense, name)

    def ops(self, *args, **kwargs):
        return ExpertTable(self._dense.ops(*args, **kwargs))


def stand_in_bytes(shape, micro_batch=1, cp=1, precision="bf16"):
    return 2.0 * shape.top_k * np.asarray(micro_batch, dtype=float) * shape.seq_len / np.asarray(cp) * shape.hidden


@pytest.fixture
def moe_workload(monkeypatch):
    monkeypatch.setattr(transformer_workloads, "moe_all_to_all_bytes", stand_in_bytes, raising=False)

    def make(model="llama2-7b", experts=8, top_k=2):
        return MoEWorkload(get_workload(model), experts, top_k)
    return make


def one_plan(**fields) -> dict[str, np.ndarray]:
    plan = dict(tp=1, pp=1, dp=1, cp=1, vp=1, micro_batch=1, global_batch=None, recompute=RECOMPUTE_CODES["none"],
                recompute_every=1, zero=0, sequence_parallel=0, offload=0)
    plan.update(fields)
    if plan["global_batch"] is None:
        plan["global_batch"] = 2 * plan["dp"] * plan["micro_batch"]
    return {name: np.array([plan[name]], dtype=np.int64) for name in PLAN_FIELDS}


def h100(num_gpus):
    return load_catalog().cluster(gpu="H100-SXM5-80GB", num_gpus=num_gpus, gpus_per_node=8, intra="nvlink4",
                                  inter="8 x ib-ndr" if num_gpus > 8 else None)


def test_dense_models_exchange_no_tokens():
    for model in ("llama2-7b", "gpt3-1.3b", "resnet50"):
        workload = get_workload(model)
        tp = 1 if model == "resnet50" else 2
        steps = run_chain(workload, h100(16), one_plan(tp=tp, dp=16 // tp), **SETTINGS).steps
        assert steps["moe_comm"]["moe_comm_s"][0] == 0 and steps["moe_comm"]["t_moe"][0] == 0
        assert steps["compute"]["ep"][0] == 1


def test_each_rank_keeps_its_share_of_the_experts(moe_workload):
    workload = moe_workload(experts=8)
    for dp, ep in ((16, 8), (4, 4), (2, 2), (1, 1)):
        compute = run_chain(workload, h100(dp), one_plan(dp=dp), **SETTINGS).steps["compute"]
        assert compute["ep"][0] == ep
        experts, layer = compute["expert_params"][0], compute["layer_params"][0]
        assert 0 < experts < layer
        expected = layer - experts + experts / ep + compute["pre_params"][0] + compute["post_params"][0]
        assert compute["params_local"][0] == pytest.approx(expected, rel=1e-12)


def test_four_all_to_alls_per_layer_and_micro_batch_over_the_expert_group(moe_workload):
    workload = moe_workload(experts=8, top_k=2)
    cluster = h100(16)
    result = run_chain(workload, cluster, one_plan(dp=16, micro_batch=2), **SETTINGS)
    steps = result.steps
    assert steps["compute"]["ep"][0] == 8  # gcd(dp 16, 8 experts): one expert per rank
    message = stand_in_bytes(workload.shape, 2)
    # ranks ordered tp, cp, dp: the 8 ranks of an expert group fill one node
    links = comm.link_numbers(cluster, SETTINGS["profile"])
    one = comm.collective_time("all_to_all", message, 8, 8, **links)
    expected = steps["compute"]["micro_batches"][0] * MOE_ALL_TO_ALLS_PER_LAYER * workload.layers * one
    assert result.outputs["moe_comm_s"][0] == pytest.approx(float(expected), rel=1e-12)
    assert sum(result.outputs[f"{name}_s"][0] for name in BREAKDOWN) == pytest.approx(
        result.outputs["step_time_s"][0], rel=1e-12)


def test_an_expert_group_across_nodes_is_slower_than_one_inside_a_node(moe_workload):
    # the same tokens per GPU: 16 experts spread over 2 nodes (InfiniBand) vs 8 on one node's NVLink
    plan = one_plan(dp=16, micro_batch=1)
    inside = run_chain(moe_workload(experts=8), h100(16), plan, **SETTINGS).steps
    across = run_chain(moe_workload(experts=16), h100(16), plan, **SETTINGS).steps
    assert (inside["compute"]["ep"][0], across["compute"]["ep"][0]) == (8, 16)
    assert across["moe_comm"]["t_moe"][0] > inside["moe_comm"]["t_moe"][0]


def test_full_recompute_repeats_the_forward_exchanges(moe_workload):
    workload = moe_workload()
    plain, full = (run_chain(workload, h100(16), one_plan(dp=16, recompute=RECOMPUTE_CODES[name]), **SETTINGS)
                   .outputs["moe_comm_s"][0] for name in ("none", "full"))
    assert full / plain == pytest.approx((MOE_ALL_TO_ALLS_PER_LAYER + 2) / MOE_ALL_TO_ALLS_PER_LAYER, rel=1e-12)


def test_the_exchange_lengthens_every_pipeline_slot(moe_workload):
    plan = one_plan(pp=2, dp=8, global_batch=64)
    dense = run_chain(get_workload("llama2-7b"), h100(16), plan, **SETTINGS).outputs
    moe = run_chain(moe_workload(), h100(16), plan, **SETTINGS).outputs
    assert moe["moe_comm_s"][0] > 0
    assert moe["pp_bubble_s"][0] - dense["pp_bubble_s"][0] == pytest.approx(
        moe["moe_comm_s"][0] / moe["num_micro_batches"][0], rel=1e-9)


def test_mixtral_on_64_h100_pays_the_all_to_all():
    from pathlib import Path

    from perfmodel.workloads.hf import load_hf_config

    config = Path(__file__).parent / "data" / "hf" / "mixtral-8x7b" / "config.json"
    workload = load_hf_config(config, seq_len=4096)
    scenario = {"workload": {"hf_config": str(config), "seq_len": 4096},
                "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 64, "gpus_per_node": 8, "intra": "nvlink4",
                             "inter": "8 x ib-ndr"},
                "plan": {"tp": 1, "pp": 1, "dp": 64, "micro_batch": 1, "global_batch": 256, "zero": 3,
                         "recompute": "full"}}
    result = estimate(scenario)
    assert result.feasible, result.reasons
    assert workload.shape.moe and result.breakdown_s["moe_comm"] > 0
