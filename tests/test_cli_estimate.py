"""`perfmodel estimate|search|scaling|memory`: JSON keys per issue 6, human output with shares,
infeasible scenarios exit 3 with advice, malformed ones exit 2 naming the field; runs on a catalog
instance are priced."""

import json
from pathlib import Path

import pytest
import yaml

from perfmodel.cli import main
from perfmodel.cli.estimate import MIN_SHOWN_SHARE
from perfmodel.plans import PLAN_TIE_FRACTION

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.yaml"))
EXAMPLE = {path.stem: str(path) for path in EXAMPLES}
ESTIMATE_KEYS = {"feasible", "reasons", "step_time_s", "breakdown_s", "samples_per_s", "tokens_per_s",
                 "tflops_per_gpu", "mfu", "hfu", "gpu_utilization", "bottleneck", "memory", "time_to_train_s",
                 "gpu_hours"}


def run(capsys, *argv):
    code = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, scenario, name="scenario.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_estimate_json_has_the_issue_keys(capsys, path):
    code, out, _ = run(capsys, "estimate", path, "--json")
    assert code == 0
    data = json.loads(out)
    assert ESTIMATE_KEYS <= set(data)
    assert data["feasible"] is True and data["reasons"] == []
    assert sum(data["breakdown_s"].values()) == pytest.approx(data["step_time_s"], rel=1e-12)
    assert {"total", "capacity", "fits"} <= set(data["memory"])
    has_run = "run" in yaml.safe_load(path.read_text())
    assert (data["time_to_train_s"] is not None) == has_run and (data["gpu_hours"] is not None) == has_run
    if data["workload"].startswith("resnet"):
        assert data["tokens_per_s"] is None
    else:
        assert data["tokens_per_s"] > data["samples_per_s"]


def test_estimate_human_output_shows_breakdown_shares(capsys):
    code, out, _ = run(capsys, "estimate", EXAMPLE["gpt3-175b-1024xa100"])
    data = json.loads(run(capsys, "estimate", EXAMPLE["gpt3-175b-1024xa100"], "--json")[1])
    assert code == 0
    for name, seconds in data["breakdown_s"].items():
        if seconds / data["step_time_s"] >= 0.001:
            share = f"{seconds / data['step_time_s']:.1%}"
            assert any(line.split()[:1] == [name] and share in line for line in out.splitlines()), (name, share)
    assert "MFU" in out and "bottleneck" in out and "time to train" in out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_estimate_table_leaves_out_components_that_would_print_as_zero(capsys, path):
    """A component under MIN_SHOWN_SHARE of the step (a fitted overhead of 1e-10 s) is left out of
    the table and stays in the JSON; every component the table shows prints a non-zero share."""
    out = run(capsys, "estimate", path)[1]
    data = json.loads(run(capsys, "estimate", path, "--json")[1])
    shown = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "%" in line}
    for name, seconds in data["breakdown_s"].items():
        share = seconds / data["step_time_s"]
        assert (name in shown) == (share >= MIN_SHOWN_SHARE), (name, share)
    assert all(" 0.0%" not in line for line in shown.values())


def test_infeasible_estimate_is_an_answer(capsys, tmp_path):
    path = write(tmp_path, {"workload": {"model": "gpt3-175b"},
                            "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 4, "gpus_per_node": 4,
                                         "intra": "nvlink3"}})
    code, out, err = run(capsys, "estimate", path, "--json")
    assert code == 3 and err == ""
    data = json.loads(out)
    assert data["feasible"] is False and data["reasons"]
    code, out, _ = run(capsys, "estimate", path)
    assert code == 3 and "DOES NOT FIT" in out


def test_invalid_plan_is_an_answer_with_the_reason(capsys, tmp_path):
    scenario = yaml.safe_load(Path(EXAMPLE["gpt3-175b-1024xa100"]).read_text())
    scenario["plan"].update(tp=5, pp=1)
    code, out, _ = run(capsys, "estimate", write(tmp_path, scenario), "--json")
    data = json.loads(out)
    assert code == 3 and data["feasible"] is False and data["step_time_s"] is None
    assert "tp does not divide the attention heads" in data["reasons"]


@pytest.mark.parametrize("edit, named", [
    (lambda s: s["plan"].update(pipeline=4), "pipeline"),
    (lambda s: s.update(data={"bytes_per_sample": "110 parsecs"}), "bytes_per_sample"),
    (lambda s: s["hardware"].update(gpu="A1000-SXM"), "A1000-SXM"),
    (lambda s: s["plan"].update(precision="fp4"), "precision"),
    (lambda s: s["workload"].update(model="gpt5"), "gpt5"),
])
def test_malformed_scenario_exits_2_naming_the_field(capsys, tmp_path, edit, named):
    scenario = yaml.safe_load(Path(EXAMPLE["gpt3-175b-1024xa100"]).read_text())
    edit(scenario)
    code, out, err = run(capsys, "estimate", write(tmp_path, scenario), "--json")
    assert code == 2 and out == ""
    assert err.startswith("perfmodel: error:") and named in err and "Traceback" not in err


def test_missing_file_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, "estimate", tmp_path / "nope.yaml")
    assert code == 2 and "nope.yaml" in err


def test_search_top_5_json(capsys):
    code, out, _ = run(capsys, "search", EXAMPLE["bert-large-8xv100"], "--top", "5", "--json")
    assert code == 0
    data = json.loads(out)
    assert {"evaluated", "candidates", "feasible", "infeasible", "plans"} <= set(data)
    assert 0 < len(data["plans"]) <= 5 and data["feasible"] >= len(data["plans"])
    times = [plan["step_time_s"] for plan in data["plans"]]
    assert times == sorted(times)
    for plan in data["plans"]:  # fields the example fixes stay fixed
        assert (plan["micro_batch"], plan["global_batch"], plan["precision"]) == (64, 512, "fp16")
        assert plan["memory_total"] <= plan["memory_capacity"]


def test_search_human_output_counts_dropped_plans(capsys):
    code, out, _ = run(capsys, "search", EXAMPLE["bert-large-8xv100"], "--top", "3")
    assert code == 0 and "candidate plans" in out and "dropped" in out


def test_search_bad_top_exits_2(capsys):
    code, _, err = run(capsys, "search", EXAMPLE["bert-large-8xv100"], "--top", "0")
    assert code == 2 and "--top" in err


def test_scaling_json(capsys, tmp_path):
    scenario = yaml.safe_load(Path(EXAMPLE["resnet50-8xa100"]).read_text())
    del scenario["plan"]["micro_batch"]  # a fixed per-GPU batch cannot strong-scale a fixed global batch
    scenario["hardware"]["inter"] = "4 x ib-hdr"
    code, out, _ = run(capsys, "scaling", write(tmp_path, scenario), "--gpus", "8,16,32", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "strong" and [row["num_gpus"] for row in data["rows"]] == [8, 16, 32]
    for row in data["rows"]:
        assert {"speedup", "efficiency", "step_time_s", "samples_per_s", "plan"} <= set(row)
        # each count runs the conventional plan within the tie band of its fastest (perfmodel.choice),
        # so efficiency may exceed 1 by at most that band
        assert row["efficiency"] <= 1 + PLAN_TIE_FRACTION + 1e-9


def test_scaling_bad_gpus_exits_2(capsys):
    code, _, err = run(capsys, "scaling", EXAMPLE["resnet50-8xa100"], "--gpus", "8,x")
    assert code == 2 and "--gpus" in err


def test_memory_json(capsys):
    code, out, _ = run(capsys, "memory", EXAMPLE["gpt3-175b-1024xa100"], "--json")
    assert code == 0
    data = json.loads(out)
    assert {"fits", "capacity", "headroom", "reasons", "total", "weights", "gradients", "optimizer",
            "activations"} <= set(data)
    assert data["fits"] is True and data["reasons"] == []
    assert data["capacity"] == 80 * 2**30  # bytes: 80 GiB
    assert data["headroom"] == pytest.approx(data["capacity"] - data["total"])
    assert data["weights"] > 1e9  # 175B / (tp 8 x pp 16) parameters in 16 bits: bytes, not GB


def test_memory_json_infeasible(capsys, tmp_path):
    path = write(tmp_path, {"workload": {"model": "gpt3-175b"},
                            "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 4, "gpus_per_node": 4,
                                         "intra": "nvlink3"}})
    code, out, _ = run(capsys, "memory", path, "--json")
    data = json.loads(out)
    assert code == 3 and data["fits"] is False and data["headroom"] < 0 and data["reasons"]


def test_estimate_of_an_instance_prints_its_cost(capsys):
    code, out, _ = run(capsys, "estimate", EXAMPLE["llama2-7b-p5"])
    data = json.loads(run(capsys, "estimate", EXAMPLE["llama2-7b-p5"], "--json")[1])
    assert code == 0
    on_demand = data["cost"]["on_demand"]
    # one p5.48xlarge node at the catalog's on-demand price, for the whole time to train
    assert on_demand["cost_usd"] == pytest.approx(data["time_to_train_s"] / 3600 * 55.04)
    assert f"${on_demand['cost_usd']:,.0f}" in out
    spot = data["cost"]["spot"]
    assert spot["time_s"] >= spot["ideal_time_s"] == pytest.approx(data["time_to_train_s"])
    assert spot["cost_usd"] <= spot["cost_usd_at_2x_rate"] <= spot["cost_usd_at_5x_rate"]
    assert "interruptions 1 per 3,650 h per node" in out and "at 2x / 5x that rate" in out


def test_estimate_without_an_instance_has_no_cost(capsys):
    data = json.loads(run(capsys, "estimate", EXAMPLE["gpt3-175b-1024xa100"], "--json")[1])
    assert data["cost"] is None


LLAMA_70B_ON_8_A100 = {"workload": {"model": "llama2-70b"},
                       "hardware": {"instance": "aws/p4de.24xlarge", "nodes": 1},
                       "plan": {"precision": "bf16", "global_batch": 512}, "run": {"train_tokens": 2e12}}


def test_llama2_70b_on_8_a100_exits_3_with_no_times_and_a_change_that_fits(capsys, tmp_path):
    path = write(tmp_path, LLAMA_70B_ON_8_A100)
    code, out, _ = run(capsys, "estimate", path)
    assert code == 3
    assert "step time" not in out and "time to train" not in out and "MFU" not in out
    assert "DOES NOT FIT" in out and "most memory-frugal plan" in out and "smallest change that fits" in out
    code, out, _ = run(capsys, "estimate", path, "--json")
    advice = json.loads(out)["advice"]
    frugal = advice["most_frugal"]
    # the frugal plan fully recomputes and needs no more memory than the plan that was tried
    assert frugal["plan"]["recompute"] == "full"
    assert frugal["memory"]["total"] <= json.loads(out)["memory"]["total"]
    change = advice["smallest_change"]
    assert change["num_gpus"] > 8
    # the suggested change really fits: estimate it
    fixed = dict(LLAMA_70B_ON_8_A100, hardware={"instance": "aws/p4de.24xlarge", "nodes": change["nodes"]},
                 plan={"precision": "bf16", **change["plan"]})
    code, out, _ = run(capsys, "estimate", write(tmp_path, fixed, "fixed.yaml"), "--json")
    assert code == 0 and json.loads(out)["feasible"] is True


def test_a_fixed_memory_setting_that_does_not_fit_gets_recompute_or_zero_advice(capsys, tmp_path):
    scenario = {"workload": {"model": "llama2-7b"}, "hardware": {"instance": "aws/p4de.24xlarge", "nodes": 1},
                "plan": {"precision": "bf16", "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 64,
                         "recompute": "none", "zero": 0}}
    code, out, _ = run(capsys, "estimate", write(tmp_path, scenario), "--json")
    assert code == 3
    change = json.loads(out)["advice"]["smallest_change"]
    assert change["num_gpus"] is None and change["text"].startswith("use ")
    assert (change["plan"]["recompute"], change["plan"]["zero"]) != ("none", 0)
    scenario["plan"].update(recompute=change["plan"]["recompute"], zero=change["plan"]["zero"])
    code, out, _ = run(capsys, "estimate", write(tmp_path, scenario, "fixed.yaml"), "--json")
    assert code == 0 and json.loads(out)["feasible"] is True


def test_most_frugal_plan_needs_no_more_memory_than_other_valid_plans():
    from perfmodel.advice import most_frugal
    from perfmodel import estimate

    scenario = {"workload": {"model": "gpt3-175b"},
                "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3"},
                "plan": {"precision": "bf16", "global_batch": 8}}
    frugal = most_frugal(scenario)
    assert frugal.plan["recompute"] == "full" and frugal.plan["micro_batch"] == 1
    for layout in ({"tp": 8, "pp": 1, "zero": 1}, {"tp": 4, "pp": 2, "zero": 1}, {"tp": 1, "pp": 8, "zero": 0},
                   {"tp": 2, "pp": 4, "recompute": "selective", "zero": 1}):
        plan = {"precision": "bf16", "global_batch": 8, "micro_batch": 1, "recompute": "full", **layout}
        other = estimate({**scenario, "plan": plan})
        assert frugal.memory["total"] <= other.memory["total"] * (1 + 1e-12), layout
