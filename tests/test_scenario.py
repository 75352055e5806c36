"""Scenario files (issue 2): the shipped examples load and resolve; malformed files name the field."""

import json
from pathlib import Path

import pytest
import yaml

from perfmodel.cli import main
from perfmodel.hardware.catalog import load_catalog
from perfmodel.scenario import ScenarioError, load_scenario

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def test_the_four_issue_examples_are_shipped():
    assert {p.name for p in EXAMPLES} >= {"gpt3-175b-1024xa100.yaml", "llama2-7b-p5.yaml", "resnet50-8xa100.yaml",
                                          "bert-large-8xv100.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads_and_resolves_to_catalog_hardware(path):
    scenario = load_scenario(path)
    cluster = load_catalog(include_env=False).cluster(**scenario.hardware.model_dump())
    if scenario.plan.tp and scenario.plan.pp:
        assert cluster.num_gpus % (scenario.plan.tp * scenario.plan.pp) == 0


def test_gpt3_example_matches_its_description():
    scenario = load_scenario(next(p for p in EXAMPLES if p.name.startswith("gpt3")))
    plan = scenario.plan
    assert (plan.tp, plan.pp, plan.micro_batch, plan.global_batch, plan.recompute) == (8, 16, 1, 1536, "selective")
    assert scenario.run.train_tokens == 300e9
    cluster = load_catalog(include_env=False).cluster(**scenario.hardware.model_dump())
    assert (cluster.nodes, cluster.gpus_per_node, cluster.nics_per_node, cluster.nic.name) == (128, 8, 8, "ib-hdr")


def test_resnet_example_data_section_is_si():
    scenario = load_scenario(next(p for p in EXAMPLES if p.name.startswith("resnet50")))
    assert scenario.data.bytes_per_sample == pytest.approx(110e3)
    assert (scenario.run.epochs, scenario.run.dataset_samples) == (90, 1281167)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_check_command_prints_the_resolved_cluster(path, capsys):
    assert main(["check", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cluster = out["cluster"]
    assert cluster["num_gpus"] == cluster["nodes"] * cluster["gpus_per_node"]
    assert cluster["intra_bandwidth_per_direction"] > 0
    assert out["scenario"]["workload"]["model"]


def test_check_on_an_instance_shows_its_price(capsys):
    path = next(p for p in EXAMPLES if p.name.startswith("llama2"))
    assert main(["check", str(path), "--json"]) == 0
    cluster = json.loads(capsys.readouterr().out)["cluster"]
    assert cluster["instance"] == "aws/p5.48xlarge"
    assert cluster["gpu"] == "H100-SXM5-80GB"
    assert cluster["price_usd_per_hour"] == pytest.approx(55.04)
    assert cluster["inter_bandwidth_per_node"] == pytest.approx(3200e9 / 8)   # 32 x 100 Gb/s EFA
    assert main(["check", str(path)]) == 0
    assert "55.04 USD per instance-hour" in capsys.readouterr().out


GOOD = {"workload": {"model": "gpt3-175b"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8}}


@pytest.mark.parametrize(("change", "words"), [
    ({"plan": {"tp": "eight"}}, ["field 'plan.tp'", "'eight'", "integer"]),
    ({"plan": {"tp": 0}}, ["field 'plan.tp'", "from 1 to"]),
    ({"plan": {"precision": "fp4"}}, ["field 'plan.precision'", "'fp4'", "bf16"]),
    ({"plan": {"tensor_parallel": 8}}, ["field 'plan.tensor_parallel'", "not a field of plan", "allowed here: precision, tp,"]),
    ({"plan": {"framework": "megatron"}}, ["field 'plan.framework'", "'framework' is a field of the top level"]),
    ({"hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "tp": 8}},
     ["field 'hardware.tp'", "'tp' is a field of plan", "allowed here: gpu,"]),
    ({"colour": "green"}, ["field 'colour'", "not a field of the top level", "allowed here: workload, hardware,"]),
    ({"data": {"bytes_per_sample": "110 KX"}}, ["field 'data.bytes_per_sample'", "unknown unit 'KX'", "a size"]),
    ({"data": {"bytes_per_sample": "110 KB", "storage_bandwidth": "-2 GB/s"}},
     ["field 'data.storage_bandwidth'", "greater than 0"]),
    ({"run": {"epochs": 90}}, ["field 'run'", "'epochs' needs 'dataset_samples'"]),
    ({"hardware": {"num_gpus": 8}}, ["field 'hardware'", "give 'gpu'"]),
    ({"workload": None}, ["field 'workload'"]),
])
def test_malformed_scenario_names_file_and_field(tmp_path, change, words):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**GOOD, **change}))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message


def test_missing_section_is_reported(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"workload": {"model": "resnet50"}}))
    with pytest.raises(ScenarioError, match=r"bad.json: field 'hardware'.*Field required"):
        load_scenario(path)


def test_unknown_gpu_in_a_scenario_fails_check_cleanly(tmp_path, capsys):
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "hardware": {"gpu": "A100-SXM9", "num_gpus": 8}}))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gpu 'A100-SXM9' is not in the catalog" in err and "Traceback" not in err


def test_unknown_instance_and_bad_yaml_fail_check_cleanly(tmp_path, capsys):
    path = tmp_path / "inst.yaml"
    path.write_text(yaml.safe_dump({**GOOD, "hardware": {"instance": "aws/p9.huge", "nodes": 2}}))
    assert main(["check", str(path)]) == 2
    assert "instance 'aws/p9.huge' is not in the catalog" in capsys.readouterr().err
    path.write_text("workload: [\n")
    assert main(["check", str(path)]) == 2
    assert "not valid YAML" in capsys.readouterr().err
