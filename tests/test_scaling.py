"""scaling(): strong scaling never beats linear and never slows down for a data-parallel CNN; weak
scaling grows the global batch with the GPU count."""

import numpy as np
import pytest

from perfmodel import estimate, scaling
from perfmodel.plans import PLAN_TIE_FRACTION

RESNET = {"workload": {"model": "resnet50"},
          "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3",
                       "inter": "4 x ib-hdr"},
          "plan": {"global_batch": 4096, "precision": "fp16"}}
COUNTS = [1, 2, 4, 8, 16, 32, 64, 128]


@pytest.fixture(scope="module")
def strong():
    return scaling(RESNET, COUNTS, "strong")


def test_strong_scaling_is_at_most_linear_and_monotone(strong):
    assert list(strong["num_gpus"]) == COUNTS and strong["reason"].isna().all()
    assert (strong["global_batch"] == 4096).all()
    assert strong["speedup"].iloc[0] == pytest.approx(1.0) and strong["efficiency"].iloc[0] == pytest.approx(1.0)
    # each count runs the conventional plan within the tie band of its fastest (perfmodel.choice):
    # efficiency may exceed 1 by at most that band
    assert np.all(strong["efficiency"] <= 1 + PLAN_TIE_FRACTION + 1e-9)
    # more GPUs never slow it down by more than a hair: once the per-GPU batch is small enough that
    # the host's dispatch bounds a pass, the compute time stops falling and a wider all-reduce adds
    # a few microseconds of latency per node doubling
    speedup = strong["speedup"].to_numpy()
    assert np.all(np.diff(speedup) >= -0.02 * speedup[:-1])
    np.testing.assert_allclose(strong["speedup"], strong["samples_per_s"] / strong["samples_per_s"].iloc[0])


def test_strong_scaling_loses_efficiency_across_nodes(strong):
    # 4096 images over 128 GPUs is 32 per GPU: the gradient all-reduce over 16 nodes no longer hides
    # (measured on the step's exposed communication: the plans of the two counts differ in
    # micro-batch, within the tie band, so their efficiencies alone do not isolate it)
    shares = []
    for count in (8, 128):
        result = estimate({**RESNET, "hardware": {**RESNET["hardware"], "num_gpus": count}})
        shares.append((result.breakdown_s["dp_comm"] + result.breakdown_s["zero_gather"]) / result.step_time_s)
    assert shares[1] > 5 * shares[0] > 0


def test_weak_scaling_grows_the_global_batch():
    weak = scaling(RESNET, [8, 16, 32, 64], "weak")
    assert list(weak["global_batch"]) == [4096, 8192, 16384, 32768]
    assert np.all(np.diff(weak["samples_per_s"]) > 0)


def test_weak_scaling_without_a_batch_keeps_the_per_gpu_default():
    case = {**RESNET, "plan": {}}
    weak = scaling(case, [8, 16], "weak")
    assert list(weak["global_batch"]) == [8 * 32, 16 * 32]


def test_counts_without_a_feasible_plan_say_why():
    case = {"workload": {"model": "gpt3-175b"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8,
                                                           "gpus_per_node": 8, "intra": "nvlink3"}}
    frame = scaling(case, [4, 8])
    assert frame["samples_per_s"].isna().all()
    assert "does not fit in GPU memory" in frame["reason"].iloc[0]


@pytest.mark.parametrize("mode, counts, match", [("linear", [1, 2], "mode"), ("strong", [0, 2], "positive"),
                                                 ("strong", [], "positive")])
def test_bad_arguments_are_value_errors(mode, counts, match):
    with pytest.raises(ValueError, match=match):
        scaling(RESNET, counts, mode)


def test_strong_scaling_of_the_resnet_example_has_a_plan_at_every_count():
    from pathlib import Path

    example = Path(__file__).parent.parent / "examples" / "resnet50-8xa100.yaml"
    frame = scaling(str(example), [8, 16, 32], "strong")
    assert frame["samples_per_s"].notna().all(), list(frame["reason"])


def test_a_gpu_count_without_gpus_per_node_takes_the_catalogs_node_at_each_count():
    """Without gpus_per_node each count gets the catalog's node: 8 per SXM board, and for GB200 the
    NVL72 NVLink domain (64 GPUs in one domain, 128 in two), not the base scenario's count."""
    gb200 = {**RESNET, "hardware": {"gpu": "GB200", "num_gpus": 8}}
    curve = scaling(gb200, [8, 64, 128], "strong").set_index("num_gpus")
    assert list(curve["nodes"]) == [1, 1, 2]
    sxm = {**RESNET, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 4, "inter": "4 x ib-hdr"}}
    assert list(scaling(sxm, [4, 16], "strong")["nodes"]) == [1, 2]
