"""CUDA graphs as a plan setting: no per-kernel host dispatch, one launch per graph."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate, load_catalog
from perfmodel.chain import evaluate
from perfmodel.models import compute
from perfmodel.plans import as_arrays, resolve_plan
from perfmodel.profile import CalibrationProfile
from perfmodel.scenario import Plan
from perfmodel.workloads.transformer import transformer

CATALOG = load_catalog()
CLUSTER = CATALOG.cluster(gpu="A100-SXM4-80GB", num_gpus=8)
SMALL = transformer(layers=24, hidden=1024, heads=16, seq_len=2048, vocab=51200)


def _run(profile, cuda_graphs, micro_batch=1, tp=8):
    plan = resolve_plan(Plan(tp=tp, pp=1, micro_batch=micro_batch, global_batch=8 * micro_batch * 8 // tp,
                             recompute="full"), 8, CLUSTER.gpu, "transformer")
    return evaluate(SMALL, CLUSTER, as_arrays(plan), precision="bf16", flash_attention=True, optimizer="adam",
                    profile=profile, cuda_graphs=cuda_graphs)


@settings(max_examples=25, deadline=None)
@given(host=st.floats(0.0, 1e-4), micro_batch=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 8]))
def test_cuda_graphs_are_never_slower(host, micro_batch, tp):
    profile = CalibrationProfile().with_values(host_dispatch_time=host)
    eager = _run(profile, False, micro_batch, tp)
    graphs = _run(profile, True, micro_batch, tp)
    assert graphs["step_time_s"][0] <= eager["step_time_s"][0] * (1 + 1e-12)
    assert graphs["launch_bound_share"][0] == 0.0


def test_without_host_dispatch_graphs_change_nothing():
    profile = CalibrationProfile().with_values(host_dispatch_time=0.0)
    eager, graphs = _run(profile, False), _run(profile, True)
    for key in ("step_time_s", "forward_s", "backward_s", "recompute_s", "overhead_s"):
        assert graphs[key][0] == eager[key][0]


def test_a_host_bound_step_sheds_the_dispatch_floor():
    """With a 20 us dispatch (PyTorch eager order of magnitude) TP 8 on hidden 1,024 at micro-batch
    1 is host-bound: every kernel pays the floor, which graphs remove down to the kernels' own time."""
    profile = CalibrationProfile().with_values(host_dispatch_time=2e-5)
    eager, graphs = _run(profile, False), _run(profile, True)
    assert eager["launch_bound_share"][0] > 0.5
    table = SMALL.ops(1, 8, 1, precision="bf16", flash_attention=True, sequence_parallel=True)  # on at tp > 1
    kernels_fwd, _ = compute.op_times(table, CLUSTER.gpu, "bf16", profile,
                                      sustained=profile.get("sustained_clock_fraction", "Ampere"), cuda_graphs=True)
    micro_batches = graphs["num_micro_batches"][0]
    assert graphs["forward_s"][0] == pytest.approx(micro_batches * float((kernels_fwd * table.per_op("repeat")).sum()))
    assert graphs["forward_s"][0] < 0.7 * eager["forward_s"][0]


def test_the_graph_launch_floors_a_pass():
    """A pass never takes less than one host dispatch: its graph's launch."""
    profile = CalibrationProfile().with_values(host_dispatch_time=1.0)  # absurdly slow host
    graphs = _run(profile, True)
    micro_batches = graphs["num_micro_batches"][0]
    assert graphs["forward_s"][0] == pytest.approx(micro_batches * 1.0)
    assert graphs["backward_s"][0] == pytest.approx(micro_batches * 1.0)


def test_plan_setting_reaches_the_estimate():
    scenario = {"workload": {"model": "transformer", "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 2048,
                             "vocab": 51200},
                "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8},
                "plan": {"tp": 8, "micro_batch": 1, "global_batch": 8, "recompute": "full"}}
    profile = CalibrationProfile().with_values(host_dispatch_time=2e-5)
    eager = estimate(scenario, profile=profile)
    graphs = estimate({**scenario, "plan": {**scenario["plan"], "cuda_graphs": True}}, profile=profile)
    assert eager.plan["cuda_graphs"] is False and graphs.plan["cuda_graphs"] is True
    assert graphs.step_time_s < eager.step_time_s
    assert np.isclose(graphs.breakdown_s["tp_comm"], eager.breakdown_s["tp_comm"])
