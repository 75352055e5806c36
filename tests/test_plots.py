"""Figures: each returns a Figure built from real library output, with unit-carrying labels, and
draws the numbers it is given (bar heights = breakdown seconds / memory GB, y = x diagonal)."""

import re

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from perfmodel import plots
from perfmodel import estimate
from perfmodel.hardware.catalog import load_catalog

UNIT = re.compile(r"\((?:[^)]*\b(?:s|ms|GB|GiB|TFLOP/s|FLOP/byte|bytes|GB/s|USD|days|%|x|us)\b[^)]*)\)")

SCENARIO = {
    "workload": {"model": "resnet50"},
    "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3"},
    "plan": {"precision": "fp16", "micro_batch": 256, "global_batch": 2048},
    "run": {"epochs": 90, "dataset_samples": 1281167},
}
BIG = {
    "workload": {"model": "gpt3-175b"},
    "hardware": {"gpu": "A100-SXM4-40GB", "num_gpus": 4, "gpus_per_node": 4, "intra": "nvlink3"},
    "plan": {"precision": "bf16", "tp": 4, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1},
}


@pytest.fixture(scope="module")
def feasible():
    result = estimate(SCENARIO)
    assert result.feasible, result.reasons
    return result


@pytest.fixture(scope="module")
def too_big():
    result = estimate(BIG)
    assert not result.feasible
    return result


def labelled(ax):
    """Both axis labels present and carrying a unit in parentheses."""
    return bool(UNIT.search(ax.get_ylabel())) and bool(ax.get_xlabel())


def test_breakdown_bars_add_up_to_the_step_time(feasible):
    fig = plots.breakdown(feasible)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert labelled(ax)
    unit = re.search(r"\((ms|s)\)", ax.get_ylabel()).group(1)
    per_second = {"ms": 1e3, "s": 1.0}[unit]
    assert (unit == "ms") == (feasible.step_time_s < 1.0)
    heights = [patch.get_height() for patch in ax.patches]
    assert sum(heights) == pytest.approx(feasible.step_time_s * per_second, rel=1e-9)
    # the bar's label is in the axis's unit, and the title names model, GPUs and plan
    assert any(t.get_text().startswith(f"{feasible.step_time_s * per_second:.3g} {unit}") for t in ax.texts)
    title = ax.get_title()
    assert "resnet50" in title and "8 x A100-SXM4-80GB" in title and "DP8" in title
    drawn = {text.get_text() for text in ax.get_legend().get_texts()}
    nonzero = {name.replace("_", " ") for name, s in feasible.breakdown_s.items() if s > 0}
    assert drawn == nonzero


def test_relative_breakdown_stacks_to_one_hundred_percent(feasible):
    ax = plots.breakdown([feasible, feasible], relative=True).axes[0]
    assert "%" in ax.get_ylabel()
    assert sum(patch.get_height() for patch in ax.patches) == pytest.approx(200.0)


def test_breakdown_of_a_list_has_one_bar_per_estimate_and_marks_infeasible(feasible, too_big):
    fig = plots.breakdown([feasible, too_big], labels=["resnet", "gpt3"])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["resnet", "gpt3"]
    assert any(t.get_text() == "infeasible" for t in ax.texts)


def test_memory_bars_are_the_components_in_gib_with_the_capacity_line(feasible, too_big):
    fig = plots.memory([feasible, too_big])
    ax = fig.axes[0]
    assert labelled(ax) and "GiB" in ax.get_ylabel()
    n = 2
    tops = np.zeros(n)
    for patch in ax.patches:
        tops[round(patch.get_x() + patch.get_width() / 2)] += patch.get_height()
    assert tops[0] == pytest.approx(feasible.memory["total"] / 2**30, rel=1e-9)
    assert tops[1] == pytest.approx(too_big.memory["total"] / 2**30, rel=1e-9)
    capacity = ax.collections[0].get_segments()[0][0][1]
    assert capacity == pytest.approx(feasible.memory["capacity"] / 2**30)
    assert any("short" in t.get_text() for t in ax.texts)  # 175B on 4 GPUs does not fit
    drawn = {text.get_text() for text in ax.get_legend().get_texts()}
    assert not any("share" in name for name in drawn)  # only byte components are stacked
    # the feasible bar's total is written at its own top, not on the capacity line
    label = next(t for t in ax.texts if t.get_text() == f"{feasible.memory['total'] / 2**30:.1f} GiB")
    assert label.xy[1] == pytest.approx(feasible.memory["total"] / 2**30)


def test_memory_of_one_estimate_is_titled_with_model_gpus_and_plan(too_big):
    title = plots.memory(too_big).axes[0].get_title()
    assert "gpt3-175b" in title and "4 x A100-SXM4-40GB" in title and "TP4" in title


def test_memory_refuses_an_estimate_without_memory():
    with pytest.raises(ValueError, match="memory.capacity"):
        plots.memory({"workload": "x", "memory": {}})


def test_breakdown_refuses_mismatched_labels(feasible):
    with pytest.raises(ValueError, match="labels has 1 entries for 2"):
        plots.breakdown([feasible, feasible], labels=["one"])


def test_scaling_plot_has_linear_line_and_efficiency_axis():
    frame = pd.DataFrame({"num_gpus": [1, 2, 4, 8], "speedup": [1.0, 1.9, 3.5, np.nan],
                          "efficiency": [1.0, 0.95, 0.875, np.nan]})
    frame.attrs["mode"] = "strong"
    fig = plots.scaling_plot(frame)
    left, right = fig.axes
    assert labelled(left) and "GPUs" in left.get_xlabel() and "%" in right.get_ylabel()
    ideal = [line for line in left.lines if line.get_label() == "linear scaling"][0]
    assert list(ideal.get_ydata()) == [1.0, 4.0]  # 1 -> 4 GPUs: the NaN row is dropped
    efficiency = right.lines[0].get_ydata()
    assert list(efficiency) == pytest.approx([100, 95, 87.5])


def test_scaling_plot_names_missing_columns():
    with pytest.raises(ValueError, match="efficiency"):
        plots.scaling_plot(pd.DataFrame({"num_gpus": [1], "speedup": [1.0]}))


def test_prediction_error_on_the_shipped_measurements():
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.calibration.validate import validate

    frame = validate(shipped_measurements())
    fig = plots.prediction_error(frame)
    ratio_ax, cdf_ax = fig.axes[:2]
    assert ratio_ax.get_yscale() == "log" and "predicted / measured" in ratio_ax.get_ylabel()
    predicted = frame[frame["predicted"].notna() & (frame["predicted"] > 0) & (frame["measured"] > 0)]
    ratios = np.concatenate([np.asarray(c.get_offsets())[:, 1] for c in ratio_ax.collections if len(c.get_offsets())])
    assert len(ratios) == len(predicted)
    assert np.sort(ratios) == pytest.approx(np.sort((predicted["predicted"] / predicted["measured"]).to_numpy()))
    # one CDF per kind, ending at 100 %, its median in the legend
    kinds = sorted(predicted["kind"].unique())
    assert len(cdf_ax.lines) == len(kinds)
    for line, kind in zip(cdf_ax.lines, kinds):
        assert line.get_ydata()[-1] == pytest.approx(100.0)
        median = 100 * predicted.loc[predicted["kind"] == kind, "ape"].median()
        assert f"{kind} (median {median:.0f} %)" == line.get_label()
    assert "(%)" in cdf_ax.get_xlabel() and "(%)" in cdf_ax.get_ylabel()


def test_prediction_error_needs_a_validate_frame():
    with pytest.raises(ValueError, match="predicted"):
        plots.prediction_error(pd.DataFrame({"gpu": [], "kind": [], "measured": []}))


def test_roofline_labels_never_overprint():
    from perfmodel.models.compute import roofline_points
    from perfmodel.profile import default_profile
    from perfmodel.workloads import get_workload

    gpu = load_catalog().gpu("H100-SXM5-80GB")
    points = roofline_points(get_workload("gpt3-1.3b"), gpu, "bf16", default_profile(), 4)
    ax = plots.roofline(gpu, points, ["bf16"], workload="gpt3-1.3b").axes[0]
    anchors = [(np.log10(t.xy[0]), np.log10(t.xy[1])) for t in ax.texts]
    for i, (x1, y1) in enumerate(anchors):
        for x2, y2 in anchors[i + 1:]:
            assert abs(x1 - x2) >= 0.35 or abs(y1 - y2) >= 0.08
    assert "gpt3-1.3b" in ax.get_title() and "H100-SXM5-80GB" in ax.get_title()


def test_pareto_ticks_are_days_and_dollars():
    frame = pd.DataFrame({"time_to_train_s": [86400.0 * d for d in (3, 10, 40)], "cost_usd": [9e5, 2e5, 5e4],
                          "feasible": [True] * 3, "pareto": [True] * 3, "pricing": ["on_demand"] * 3,
                          "instance": ["aws/a", "aws/b", "aws/c"], "nodes": [8, 4, 1]})
    frame.attrs.update(workload="llama2-7b", basis="run", pricing=["on_demand"])
    fig = plots.pareto(frame)
    fig.canvas.draw()
    ax = fig.axes[0]
    ylabels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ylabels and all(text.startswith("$") for text in ylabels)
    assert not any("times" in t or "^" in t for t in ylabels + [t.get_text() for t in ax.get_xticklabels()])
    assert "days" in ax.get_xlabel() and "llama2-7b" in ax.get_title()


def test_other_figure_functions_are_exported_and_labelled():
    from perfmodel.models.comm import sweep
    from perfmodel.models.compute import roofline_points
    from perfmodel.profile import default_profile
    from perfmodel.workloads import get_workload

    catalog = load_catalog()
    gpu = catalog.gpu("H100-SXM5-80GB")
    points = roofline_points(get_workload("gpt3-125m"), gpu, "bf16", default_profile(), 8)
    cluster = catalog.cluster(gpu="H100-SXM5-80GB", num_gpus=16, gpus_per_node=8, intra="nvlink4",
                              inter="8 x ib-ndr")
    for fig in (plots.roofline(gpu, points, ["bf16"]), plots.busbw_figure(sweep(cluster))):
        assert isinstance(fig, Figure) and labelled(fig.axes[0])
    assert {"breakdown", "memory", "roofline", "scaling_plot", "busbw_figure", "pareto",
            "prediction_error"} <= set(plots.__all__)
