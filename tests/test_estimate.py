"""estimate(): breakdown and rate contracts, DP scaling, ideal networks, published FLOP and bubble
formulas, time to train, infeasible and malformed scenarios."""

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.chain import BOTTLENECK_OF, BREAKDOWN
from perfmodel.hardware.catalog import CatalogError, load_catalog
from perfmodel.profile import default_profile
from perfmodel.scenario import ScenarioError
from perfmodel.workloads import get_workload

from scenario_helpers import DP_INTRA, dp_scenario

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.yaml"))
COMM = ("tp_comm", "cp_comm", "pp_comm", "dp_comm", "zero_gather")

GPT3_1024 = {
    "workload": {"model": "gpt3-175b"},
    "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 1024, "gpus_per_node": 8, "intra": "nvlink3",
                 "inter": "8 x ib-hdr"},
    "plan": {"precision": "bf16", "tp": 8, "pp": 16, "micro_batch": 1, "global_batch": 1536,
             "recompute": "none", "zero": 1, "sequence_parallel": True},
}


def scenario(**plan):
    case = copy.deepcopy(GPT3_1024)
    case["plan"].update(plan)
    return case


def check_contracts(result):
    """The invariants every feasible-or-not estimate with a step time must satisfy."""
    assert set(result.breakdown_s) == set(BREAKDOWN)
    assert sum(result.breakdown_s.values()) == pytest.approx(result.step_time_s, rel=1e-12)
    assert all(seconds >= 0 for seconds in result.breakdown_s.values()), result.breakdown_s
    assert 0 < result.mfu <= result.hfu <= 1
    assert 0 < result.gpu_utilization <= 1
    assert result.bottleneck in set(BOTTLENECK_OF.values()) | {"host dispatch"}  # see bottleneck_of
    assert result.samples_per_s == pytest.approx(result.plan["global_batch"] / result.step_time_s, rel=1e-12)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_satisfy_the_contracts(path):
    result = estimate(path)
    assert result.feasible and result.reasons == []
    check_contracts(result)
    assert result.memory["total"] <= result.memory["capacity"]


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_recompute_keeps_mfu_below_hfu(recompute):
    result = estimate(scenario(recompute=recompute, flash_attention=False))
    check_contracts(result)
    if recompute == "none":
        assert result.hfu == pytest.approx(result.mfu, rel=1e-12)
    else:  # recomputed forward work counts as hardware FLOPs only
        assert result.hfu > result.mfu
        assert result.breakdown_s["recompute"] > 0


# --- doubling data-parallel GPUs at a fixed per-GPU batch ----------------------------------------

MODELS = ("gpt3-125m", "gpt3-1.3b", "bert-large", "llama2-7b", "vit-b16", "resnet50", "unet3d")
GPUS = sorted(DP_INTRA)


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       num_gpus=st.sampled_from([1, 2, 4, 8, 16, 32]), micro_batch=st.sampled_from([1, 2, 8, 32]))
def test_doubling_dp_gpus_never_more_than_doubles_throughput(model, gpu, num_gpus, micro_batch):
    small = estimate(dp_scenario(model, gpu, num_gpus, micro_batch))
    large = estimate(dp_scenario(model, gpu, 2 * num_gpus, micro_batch))
    check_contracts(small)
    check_contracts(large)
    assert large.samples_per_s <= 2 * small.samples_per_s * (1 + 1e-12)
    if 2 * num_gpus <= 8:
        # on the same fabric more GPUs never slow a DP job down; across the node boundary the
        # gradient reduction moves from NVLink to the NICs, and a communication-bound job (BERT-large
        # at micro-batch 1 on 4 x HDR) may lose throughput from 1 to 2 nodes, as it does in practice
        assert large.samples_per_s >= small.samples_per_s * (1 - 1e-12)


# --- an ideal network: every link 1e18 B/s with zero latency --------------------------------------

@pytest.fixture(scope="module")
def ideal_network(tmp_path_factory):
    """A user catalog that overrides the links the GPT-3 scenario uses with 1e18 B/s and 0 s
    latency, and a profile with every collective latency floor at the lowest value it allows
    (collective_base_latency and nvls_latency 1 us, link latencies 0.1 us, no pipeline fill): only
    those floors remain (a calibrated link latency in the profile overrides the catalog's)."""
    path = tmp_path_factory.mktemp("catalog") / "ideal.yaml"
    links = [{"name": name, "kind": kind, "bandwidth_per_direction": 1e18, "latency": 0.0,
              "source": "test: ideal link"} for name, kind in (("nvlink3", "nvlink"), ("ib-hdr", "infiniband"))]
    path.write_text(yaml.safe_dump({"links": links}))
    floors = {"collective_base_latency": 1e-6, "nvls_latency": 1e-6, "pipeline_fill": 0.0,
              "link_latency[nvlink]": 1e-7, "link_latency[infiniband]": 1e-7}
    profile = default_profile().with_values(**floors)
    return load_catalog(str(path)), profile


def test_ideal_catalog_links_are_what_the_override_says(ideal_network):
    catalog, _ = ideal_network
    assert catalog.link("nvlink3").bandwidth_per_direction == 1e18
    assert catalog.link("ib-hdr").latency == 0.0


@pytest.mark.parametrize("plan", [dict(), dict(tp=4, pp=8, cp=2, zero=0), dict(tp=8, pp=1, zero=3, micro_batch=2)],
                         ids=["tp8-pp16", "tp4-pp8-cp2", "tp8-zero3"])
def test_communication_vanishes_with_infinite_bandwidth(ideal_network, plan):
    catalog, profile = ideal_network
    real = estimate(scenario(**plan), profile=profile)
    ideal = estimate(scenario(**plan), catalog=catalog, profile=profile)
    check_contracts(ideal)
    assert sum(real.breakdown_s[name] for name in COMM) > 0.01 * real.step_time_s  # there was something to remove
    # what is left is the latency floor of a few thousand collectives per step (ZeRO-3 over 128 ranks:
    # 96 layers x 3 gathers/reduce-scatters x 6 micro-batches ~ 1.7e3 collectives of ~20 us, ~35 ms
    # of a ~16 s step)
    assert sum(ideal.breakdown_s[name] for name in COMM) < 5e-3 * ideal.step_time_s
    for name in ("forward", "backward", "recompute", "optimizer", "overhead"):
        assert ideal.breakdown_s[name] == pytest.approx(real.breakdown_s[name], rel=1e-12)


@pytest.mark.parametrize("pp, vp, micro_batch", [(16, 1, 1), (16, 2, 1), (8, 4, 2), (4, 1, 4)])
def test_pipeline_bubble_is_narayanan_fraction_of_ideal_compute(ideal_network, pp, vp, micro_batch):
    # Narayanan et al. 2021, Sec. 2.2: bubble = (p - 1) / (v m) of the ideal (bubble-free) time
    catalog, profile = ideal_network
    result = estimate(scenario(pp=pp, vp=vp, micro_batch=micro_batch, tp=8, zero=0), catalog=catalog, profile=profile)
    assert result.step_time_s is not None, result.reasons  # fits or not, the time is estimated
    m = result.plan["global_batch"] / (result.plan["dp"] * micro_batch)
    ideal = sum(result.breakdown_s[name] for name in ("forward", "backward", "recompute"))
    assert result.breakdown_s["pp_bubble"] == pytest.approx((pp - 1) / (vp * m) * ideal, rel=1e-3)


# --- published model-FLOP count ---------------------------------------------------------------

@pytest.mark.parametrize("model, vocab", [("gpt3-175b", None), ("gpt3-13b", 51200), ("gpt3-1.3b", None)])
def test_model_flops_match_megatron_formula(model, vocab):
    # Korthikanti et al. 2022 (Sec. 6.2) / Narayanan et al. 2021 (Sec. 5.1) without recomputation:
    # model FLOPs per step = 72 B s l h^2 (1 + s / 6h + V / 12 l h)
    workload = {"model": model} | ({"vocab": vocab} if vocab else {})
    result = estimate({**scenario(tp=8, pp=8 if model == "gpt3-175b" else 1), "workload": workload})
    shape = get_workload(model).shape
    B, s, l, h, V = 1536, shape.seq_len, shape.layers, shape.hidden, vocab or shape.vocab
    megatron = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    ours = result.tflops_per_gpu * 1e12 * result.hardware["num_gpus"] * result.step_time_s
    assert ours == pytest.approx(megatron, rel=1e-6)
    assert result.mfu == pytest.approx(megatron / result.step_time_s / 1024 / 312e12, rel=0.01)  # A100 bf16 dense


# --- run size ---------------------------------------------------------------------------------

@pytest.mark.parametrize("run, samples", [
    ({"train_tokens": 300e9}, 300e9 / 2048), ({"train_samples": 1e6}, 1e6),
    ({"epochs": 2, "dataset_samples": 5e5}, 1e6)])
def test_time_to_train_and_gpu_hours(run, samples):
    result = estimate({**scenario(), "run": run})
    assert result.time_to_train_s == pytest.approx(samples / result.samples_per_s, rel=1e-12)
    assert result.gpu_hours == pytest.approx(result.time_to_train_s * 1024 / 3600, rel=1e-12)


def test_no_run_no_time_to_train():
    result = estimate(scenario())
    assert result.time_to_train_s is None and result.gpu_hours is None


# --- infeasible = an answer; malformed = an error naming the field --------------------------------

def test_gpt3_on_four_a100_is_infeasible_with_numbers():
    result = estimate({"workload": {"model": "gpt3-175b"},
                       "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 4, "gpus_per_node": 4, "intra": "nvlink3"}})
    assert result.feasible is False
    assert result.memory["fits"] is False and result.memory["total"] > result.memory["capacity"] == 80 * 2**30
    text = " ".join(result.reasons)
    assert "80 GiB" in text and "TiB" in text  # reasons in numbers: what is needed vs what there is


def test_tp_not_dividing_heads_is_infeasible_with_the_reason():
    result = estimate(scenario(tp=5, pp=1, dp=None))
    assert result.feasible is False and result.step_time_s is None
    assert "tp does not divide the attention heads" in result.reasons


@pytest.mark.parametrize("change, field", [
    (lambda s: s["plan"].update(tensor_parallel=8), "tensor_parallel"),
    (lambda s: s["plan"].update(micro_batch=0), "micro_batch"),
    (lambda s: s["plan"].update(recompute="some"), "recompute"),
    (lambda s: s.update(data={"bytes_per_sample": "110 parsecs"}), "bytes_per_sample"),
    (lambda s: s.update(run={"epochs": 3}), "run"),
])
def test_malformed_scenario_names_the_field(change, field):
    case = scenario()
    change(case)
    with pytest.raises(ScenarioError, match=field):
        estimate(case)


def test_unknown_gpu_names_it():
    case = scenario()
    case["hardware"]["gpu"] = "A1000-SXM"
    with pytest.raises(CatalogError, match="A1000-SXM"):
        estimate(case)


def test_precision_the_gpu_lacks_is_an_error():
    case = dp_scenario("bert-large", "V100-SXM2-32GB", 8, 8)
    case["plan"]["precision"] = "bf16"
    with pytest.raises(ValueError, match="bf16"):
        estimate(case)


# --- ZeRO-1/2: the updated parameters are gathered after the optimizer step ---------------------

def test_zero1_parameter_gather_hides_only_under_the_next_forward_pass():
    # Rajbhandari et al. 2020, Sec. 5.1: after the sharded update every rank all-gathers the updated
    # parameters, which the next forward pass needs (Megatron-LM's --overlap-param-gather runs it
    # under that forward); the step's backward pass is already over.  Lower bound of that gather:
    # (dp - 1)/dp of the 16-bit weights through one GPU's NVLink, less dp_overlap x one forward pass.
    params = get_workload("gpt3-1.3b").params
    wire_time = 7 / 8 * 2 * params / load_catalog().link("nvlink3").bandwidth_per_direction
    for dp_overlap in (0.0, 1.0):
        case = dp_scenario("gpt3-1.3b", "A100-SXM4-80GB", 8, 16)
        case["plan"]["zero"] = 1
        result = estimate(case, profile=default_profile().with_values(dp_overlap=dp_overlap))
        one_forward = result.breakdown_s["forward"] * result.plan["micro_batch"] * 8 / result.plan["global_batch"]
        assert result.breakdown_s["zero_gather"] >= wire_time - dp_overlap * one_forward


def test_a_step_of_short_kernels_is_host_bound_and_a_long_one_is_not():
    """ResNet-50 at one image per step on an H100: its kernels are shorter than the host takes to
    dispatch them, so the host is the bottleneck (its dispatch, or the fitted per-step framework
    overhead, which at one image outweighs the GPU's work too); at 256 images they are not; with
    no dispatch time nothing is host-bound."""
    def run(micro_batch, profile=None):
        return estimate({"workload": {"model": "resnet50"}, "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 1},
                         "plan": {"micro_batch": micro_batch}}, profile=profile)

    assert run(1).bottleneck in ("host dispatch", "framework overhead")
    assert run(1, default_profile().with_values(step_overhead=0.0)).bottleneck == "host dispatch"
    assert run(256).bottleneck not in ("host dispatch", "framework overhead")
    no_host = default_profile().with_values(host_dispatch_time=0.0, step_overhead=0.0)
    assert run(1, no_host).bottleneck != "host dispatch"
