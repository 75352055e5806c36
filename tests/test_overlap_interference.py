"""What hidden data-parallel, ZeRO and offload traffic costs the compute under it: a per-second
term (the collective's kernels hold SMs) and a per-byte term (its copies contend for HBM), each
monotone, never more than exposing the traffic, and the per-byte term blind to the link."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.chain import exposed_communication, run_chain
from perfmodel.hardware.catalog import CatalogError, load_catalog
from perfmodel.parameters import PARAMETERS
from perfmodel.plans import check_plans, enumerate_plans, select
from perfmodel.profile import default_profile
from perfmodel.scenario import Plan
from perfmodel.workloads import get_workload

from scenario_helpers import dp_scenario

seconds = st.floats(0.0, 10.0)
fraction = st.floats(0.0, 1.0)
PER_BYTE_HIGH = PARAMETERS["overlap_interference_per_byte"].high


@settings(max_examples=200, deadline=None)
@given(comm=seconds, extra=st.floats(0.0, 10.0), window=seconds, interference=fraction, share=fraction)
def test_more_communication_never_costs_less_and_hiding_never_costs_more_than_exposing(
        comm, extra, window, interference, share):
    """Within the bound that keeps a collective's memory charge below its own time (``share`` of
    it), the exposed time grows with the communication and lies between the unhidden part and the
    whole."""
    def exposed(t):
        return float(exposed_communication(t, window, interference, share * t))

    assert exposed(comm + extra) >= exposed(comm) - 1e-12
    assert comm - min(comm, window) - 1e-12 <= exposed(comm) <= comm + 1e-12


@settings(max_examples=100, deadline=None)
@given(comm=st.floats(1e-6, 10.0), window=seconds, interference=fraction, memory=st.floats(0.0, 1.0))
def test_a_larger_memory_charge_never_costs_less(comm, window, interference, memory):
    low = exposed_communication(comm, window, interference, memory * comm)
    high = exposed_communication(comm, window, interference, min(1.0, memory + 0.1) * comm)
    assert high >= low - 1e-12


def test_the_per_byte_bound_keeps_the_charge_below_the_collective_on_every_catalog_gpu():
    """The bytes a ring moves take at least bytes / link bandwidth; the charge at the upper bound is
    bytes x bound / HBM bandwidth, below that wherever the GPU's HBM is over ``bound`` x its link."""
    catalog = load_catalog(include_env=False)
    checked = []
    for name, gpu in catalog.gpus.items():
        try:
            cluster = catalog.cluster(gpu=name, num_gpus=8 if gpu.nvlink_generation else 2)
        except CatalogError:  # a GPU the catalog cannot build a node of (no intra link known)
            continue
        assert gpu.memory_bandwidth / cluster.intra.bandwidth_per_direction > PER_BYTE_HIGH, name
        checked.append(name)
    assert {"V100-SXM2-32GB", "A100-SXM4-40GB", "H100-SXM5-80GB", "B200"} <= set(checked)


def _dp_step(nodes, gpus_per_node, profile):
    """A ZeRO-0 data-parallel GPT-1.3B step on ``nodes`` x ``gpus_per_node`` A100s (PyTorch DDP)."""
    workload = get_workload("gpt3-1.3b")
    gpus = nodes * gpus_per_node
    cluster = load_catalog(include_env=False).cluster(gpu="A100-SXM4-80GB", num_gpus=gpus,
                                                      gpus_per_node=gpus_per_node, inter="8 x ib-hdr")
    grid = enumerate_plans(Plan(tp=1, pp=1, cp=1, vp=1, dp=gpus, micro_batch=4, global_batch=4 * gpus, recompute="none",
                                zero=0, offload="none"),
                           workload, gpus, gpus_per_node)
    plans = select(grid, check_plans(grid, workload, gpus, gpus_per_node) == 0)
    result = run_chain(workload, cluster, plans, framework="pytorch", precision="bf16", flash_attention=True,
                       optimizer="adam", profile=profile)
    return {key: value for values in result.steps.values() for key, value in values.items()}


def test_fully_hidden_gradients_cost_the_same_bytes_inside_a_node_and_across_two():
    """With no per-second term and every byte hidden, 8 GPUs in one node and 8 GPUs in two nodes
    pay the same per-byte charge: each GPU moves 2 x 7/8 of its gradients either way."""
    profile = default_profile().with_values(dp_overlap=1.0, overlap_interference=0.0, overlap_interference_per_byte=1.0)
    one, two = _dp_step(1, 8, profile), _dp_step(2, 4, profile)
    assert np.all(one["t_grad"] < two["t_grad"])  # the ring over the network is slower ...
    assert np.all(one["t_grad"] <= one["t_bwd"]) and np.all(two["t_grad"] <= two["t_bwd"])  # ... yet hidden
    np.testing.assert_allclose(one["dp_comm_s"], two["dp_comm_s"], rtol=1e-12)
    assert np.all(one["dp_comm_s"] > 0)


def test_the_per_byte_term_scales_the_charge_of_fully_hidden_gradients():
    values = dict(dp_overlap=1.0, overlap_interference=0.0)
    one = _dp_step(1, 8, default_profile().with_values(**values, overlap_interference_per_byte=1.0))
    two = _dp_step(1, 8, default_profile().with_values(**values, overlap_interference_per_byte=2.0))
    np.testing.assert_allclose(two["dp_comm_s"], 2.0 * one["dp_comm_s"], rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(interference=fraction, per_byte=st.floats(0.0, PER_BYTE_HIGH), overlap=fraction,
       model=st.sampled_from(["gpt3-125m", "gpt3-1.3b", "bert-large"]), micro_batch=st.sampled_from([1, 4]))
def test_weak_scaling_across_the_node_boundary_stays_sublinear_for_any_interference(
        interference, per_byte, overlap, model, micro_batch):
    """From one 8-GPU V100 node (NVLink 2) to two (4 x HDR), twice the GPUs never give more than
    twice the throughput, whatever the interference values within their bounds.  A per-second
    charge that depended on the link broke this (session 16): the 2-node ring takes longer but
    was charged less per second."""
    profile = default_profile().with_values(overlap_interference=interference, overlap_interference_per_byte=per_byte,
                                            dp_overlap=overlap)

    def run(gpus):
        return estimate(dp_scenario(model, "V100-SXM2-32GB", gpus, micro_batch, framework="pytorch"), profile=profile)

    small, large = run(8), run(16)
    assert large.samples_per_s <= 2 * small.samples_per_s * (1 + 1e-12)


def test_the_prior_is_an_assumption_and_the_parameter_is_fitted_with_the_training_rows():
    from perfmodel.calibration.fit import STAGES
    parameter = PARAMETERS["overlap_interference_per_byte"]
    assert "ASSUMPTION" in parameter.source
    assert parameter.low == 0.0 and parameter.low <= parameter.default <= parameter.high
    train = dict((name, fitted) for name, _, fitted in STAGES)["train"]
    assert "overlap_interference_per_byte" in train
