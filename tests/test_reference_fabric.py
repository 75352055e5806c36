"""Reference inter-node fabrics: what a multi-node job without ``inter`` is assumed to run on."""

import json

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import perfmodel.cli
from perfmodel import estimate
from perfmodel.calibration.validate import validate
from perfmodel.cli import main
from perfmodel.hardware.catalog import CatalogError, load_catalog, nvlink_domain_share

# DGX SuperPOD / DGX node networks (sources in the catalog entries): A100 8 x HDR 200, H100 8 x NDR 400,
# B300 8 x XDR 800 (ConnectX-8), GB300 one ConnectX-8 XDR 800 per GPU of a 4-GPU tray
EXPECTED = [("A100-SXM4-80GB", 8, "ib-hdr"), ("A100-SXM4-40GB", 8, "ib-hdr"), ("H100-SXM5-80GB", 8, "ib-ndr"),
            ("H200-SXM-141GB", 8, "ib-ndr"), ("B200", 8, "ib-ndr"), ("V100-SXM2-32GB", 4, "ib-edr"),
            ("V100-SXM3-32GB", 8, "ib-edr"), ("GB200", 4, "ib-ndr"), ("B300", 8, "ib-xdr"), ("GB300", 4, "ib-xdr")]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_env=False)


@pytest.mark.parametrize("gpu, ports, link", EXPECTED)
def test_multi_node_without_inter_takes_the_reference_fabric(catalog, gpu, ports, link):
    per_node = catalog.gpu(gpu).reference_fabric.gpus_per_node
    cluster = catalog.cluster(gpu=gpu, num_gpus=4 * per_node, gpus_per_node=per_node)
    assert (cluster.nics_per_node, cluster.nic.name) == (ports, link)
    assert len(cluster.assumed) == 1
    note = cluster.assumed[0]
    assert note.startswith(f"inter = {ports} x {link} (reference fabric for {catalog.gpu(gpu).name}: ")
    assert catalog.gpu(gpu).reference_fabric.source in note


@pytest.mark.parametrize("gpu, per_node, ports", [("GB200", 8, 8), ("GB200", 2, 2), ("V100-SXM2-32GB", 16, 8),
                                                   ("V100-SXM2-32GB", 1, 1), ("H100-SXM5-80GB", 4, 4)])
def test_a_node_of_another_size_keeps_the_reference_nics_per_gpu(catalog, gpu, per_node, ports):
    """The reference node's NICs per GPU (DGX-1: 4 per 8 GPUs; a DGX GB200 tray: 4 per 4), at least one
    per node, and the note says it was scaled."""
    cluster = catalog.cluster(gpu=gpu, num_gpus=3 * per_node, gpus_per_node=per_node)
    reference = catalog.gpu(gpu).reference_fabric
    assert cluster.nics_per_node == ports
    assert (f"scaled to this node's {per_node}" in cluster.assumed[0]) == (per_node != reference.gpus_per_node)


def test_reference_fabric_is_the_dgx_node_network(catalog):
    """Where the catalog has the DGX node, its NICs are the reference fabric (one fact, two places)."""
    for node in ("DGX-A100-640GB", "DGX-H100", "DGX-H200", "DGX-B200", "DGX-B300", "DGX-1", "DGX-2"):
        spec = catalog.node(node)
        for gpu in catalog.gpus.values():
            if gpu.name == catalog.gpu(spec.gpu).name and gpu.reference_fabric:
                assert catalog.inter_link(gpu.reference_fabric.inter) == (spec.nics, catalog.link(spec.nic))


def test_nothing_is_assumed_when_inter_is_given_or_one_node(catalog):
    given = catalog.cluster(gpu="H100", num_gpus=64, inter="4 x roce-400")
    assert (given.nics_per_node, given.nic.name, given.assumed) == (4, "roce-400", [])
    single = catalog.cluster(gpu="H100", num_gpus=8)
    assert single.nic is None and single.assumed == []


def test_a_gpu_without_a_reference_fabric_stays_without_network(catalog):
    assert catalog.gpu("A100-PCIe-80GB").reference_fabric is None
    cluster = catalog.cluster(gpu="A100-PCIe-80GB", num_gpus=16, gpus_per_node=8)
    assert cluster.nic is None and cluster.assumed == []
    with pytest.raises(ValueError, match="hardware.inter: 2 nodes need an inter-node network"):
        estimate({"workload": {"model": "resnet50"},
                  "hardware": {"gpu": "A100-PCIe-80GB", "num_gpus": 16, "gpus_per_node": 8},
                  "plan": {"micro_batch": 64, "global_batch": 1024, "precision": "bf16"}})


def test_instance_network_filled_from_sources_and_inter_overrides_it(catalog):
    ultra = catalog.cluster(instance="gcp/a3-ultragpu-8g", nodes=2)
    azure = catalog.cluster(instance="azure/Standard_ND96isr_H200_v5", nodes=2)
    for cluster in (ultra, azure):
        assert cluster.inter_bandwidth_per_node == pytest.approx(3200e9 / 8)
        assert cluster.assumed == []
    override = catalog.cluster(instance="gcp/a2-ultragpu-8g", nodes=2, inter="1 x eth-80")
    assert (override.nics_per_node, override.nic.name) == (1, "eth-80")


def test_bad_reference_fabric_in_a_user_file_names_file_and_field(tmp_path):
    shipped = load_catalog(include_env=False).gpu("H100").model_dump(mode="json")
    shipped.update(name="X100", aliases=[], reference_fabric={"inter": "8 x ib-qdr", "gpus_per_node": 8,
                                                                "system": "x", "source": "y"})
    path = tmp_path / "extra.yaml"
    path.write_text(yaml.safe_dump({"gpus": [shipped]}))
    with pytest.raises(CatalogError, match=r"extra.yaml: gpus \(X100\): field 'reference_fabric.inter' = "
                                           r"'8 x ib-qdr': link 'ib-qdr' is not in the catalog"):
        load_catalog(path, include_env=False)
    shipped["reference_fabric"]["inter"] = "eight ib-ndr"
    path.write_text(yaml.safe_dump({"gpus": [shipped]}))
    with pytest.raises(CatalogError, match=r"extra.yaml: gpus\[0\] \(X100\): field 'reference_fabric'"):
        load_catalog(path, include_env=False)
    shipped["reference_fabric"].update(inter="8 x ib-ndr", gpus_per_node=0)
    path.write_text(yaml.safe_dump({"gpus": [shipped]}))
    with pytest.raises(CatalogError, match=r"extra.yaml: gpus\[0\] \(X100\): field "
                                           r"'reference_fabric.gpus_per_node' = 0"):
        load_catalog(path, include_env=False)


SCENARIO_64 = {"workload": {"model": "llama2-7b"}, "framework": "megatron",  # a stated framework: not assumed
               "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 64},
               "plan": {"tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 512, "precision": "bf16",
                        "recompute": "selective", "zero": 1, "flash_attention": True}}  # stated: not assumed


def test_estimate_of_64_gpus_without_inter_says_what_it_assumed():
    result = estimate(SCENARIO_64)
    assert result.feasible and result.hardware["inter"] == "8 x ib-ndr"
    assert result.assumptions["assumed"][0].startswith("inter = 8 x ib-ndr (reference fabric for H100-SXM5-80GB")
    stated = estimate({**SCENARIO_64, "hardware": {**SCENARIO_64["hardware"], "inter": "8 x ib-ndr"}})
    assert "assumed" not in stated.assumptions
    assert stated.step_time_s == pytest.approx(result.step_time_s)


def test_cli_estimate_prints_the_assumption(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(perfmodel.cli, "COMMANDS", ("estimate",))
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCENARIO_64))
    assert main(["estimate", str(path)]) == 0
    assert "assumed: inter = 8 x ib-ndr (reference fabric for H100-SXM5-80GB" in capsys.readouterr().out


def test_validate_rows_list_the_assumed_fabric():
    rows = pd.DataFrame([
        {"id": "a", "kind": "train", "gpu": "A100-SXM4-80GB", "num_gpus": 32, "gpus_per_node": 8, "inter": None,
         "model": "bert-large", "seq_len": 128, "precision": "fp16", "micro_batch": 64, "global_batch": 2048,
         "metric": "samples_per_s", "value": 10000.0, "framework": "dle-pytorch"},
        {"id": "b", "kind": "train", "gpu": "A100-SXM4-80GB", "num_gpus": 32, "gpus_per_node": 8,
         "inter": "8 x ib-hdr", "model": "bert-large", "seq_len": 128, "precision": "fp16", "micro_batch": 64,
         "global_batch": 2048, "metric": "samples_per_s", "value": 10000.0, "framework": "dle-pytorch"}])
    result = validate(rows).set_index("id")
    assert result.loc["a", "assumed"].startswith("inter = 8 x ib-hdr (reference fabric for A100-SXM4-80GB")
    assert result.loc["b", "assumed"] is None
    assert result.loc["a", "predicted"] == pytest.approx(result.loc["b", "predicted"])


def test_omni_path_is_a_catalog_link(catalog):
    cluster = catalog.cluster(gpu="A100-SXM4-80GB", num_gpus=288, inter="4 x omni-path-100")
    assert (cluster.nics_per_node, cluster.nic.name, cluster.nic.kind) == (4, "opa-100", "omnipath")
    assert cluster.inter_bandwidth_per_node == pytest.approx(4 * 100e9 / 8)
    assert cluster.assumed == []


@pytest.mark.parametrize("num_gpus, domains, share", [(8, 1, 8), (64, 1, 64), (72, 1, 72), (128, 2, 64),
                                                      (144, 2, 72), (256, 4, 64), (1000, 20, 50)])
def test_nvl72_jobs_are_placed_in_nvlink_domains(catalog, num_gpus, domains, share):
    """A GB200 job without gpus_per_node: one NVLink domain up to the NVL72 rack's 72 GPUs (no network),
    else the fewest equal shares of racks, each with the tray's one NIC per GPU; the placement is an
    assumption the cluster lists."""
    cluster = catalog.cluster(gpu="GB200", num_gpus=num_gpus)
    assert (cluster.nodes, cluster.gpus_per_node, cluster.intra.kind) == (domains, share, "nvlink")
    assert cluster.nics_per_node == (0 if domains == 1 else share)
    assert cluster.assumed[0].startswith(f"gpus_per_node = {share}: the job's {num_gpus} GPUs in {domains} NVLink")


def test_a_job_of_one_tray_or_a_stated_node_assumes_no_placement(catalog):
    assert catalog.cluster(gpu="GB200", num_gpus=4).assumed == []
    stated = catalog.cluster(gpu="GB200", num_gpus=16, gpus_per_node=4)
    assert (stated.nodes, stated.nics_per_node) == (4, 4)
    assert not any(note.startswith("gpus_per_node") for note in stated.assumed)


@given(num_gpus=st.integers(1, 4096), domain=st.integers(1, 256))
def test_nvlink_domain_share_is_the_largest_divisor_that_fits(num_gpus, domain):
    try:
        share = nvlink_domain_share(num_gpus, domain)
    except CatalogError as error:
        assert num_gpus > domain and "give hardware.gpus_per_node" in str(error)
        assert all(num_gpus % d for d in range(-(-domain // 2), domain + 1))
        return
    assert num_gpus % share == 0 and share <= domain
    assert share == num_gpus or 2 * share >= domain
    assert all(num_gpus % d for d in range(share + 1, min(domain, num_gpus) + 1))


def test_a_gb200_job_in_one_rack_is_not_slower_than_on_trays_over_infiniband():
    scenario = {**SCENARIO_64, "hardware": {"gpu": "GB200", "num_gpus": 64}}
    placed = estimate(scenario)
    stated = estimate({**scenario, "hardware": {**scenario["hardware"], "gpus_per_node": 64}})
    trays = estimate({**scenario, "hardware": {**scenario["hardware"], "gpus_per_node": 4}})
    assert placed.step_time_s == pytest.approx(stated.step_time_s)
    assert placed.step_time_s < trays.step_time_s
    assert any(note.startswith("gpus_per_node = 64: the job's 64 GPUs in 1 NVLink domain")
               for note in placed.assumptions["assumed"])


def test_an_nvlink_domain_must_hold_whole_nodes(tmp_path):
    shipped = load_catalog(include_env=False).gpu("GB200").model_dump(mode="json")
    shipped.update(name="X200", aliases=[])
    shipped["reference_fabric"]["nvlink_domain"] = 70
    path = tmp_path / "extra.yaml"
    path.write_text(yaml.safe_dump({"gpus": [shipped]}))
    with pytest.raises(CatalogError, match=r"extra.yaml: gpus\[0\] \(X200\): field 'reference_fabric'.*"
                                           r"nvlink_domain 70 is not a whole number of nodes of gpus_per_node 4"):
        load_catalog(path, include_env=False)


def test_nodes_of_an_nvl72_part_count_compute_trays_and_the_assumption_says_so(catalog):
    """hardware.nodes without num_gpus counts the reference system's 4-GPU trays; the cluster's nodes
    are NVLink domains, so the placement line says how the given count was read."""
    cluster = catalog.cluster(gpu="GB200", nodes=20)
    assert (cluster.num_gpus, cluster.nodes, cluster.gpus_per_node) == (80, 2, 40)
    assert "hardware.nodes = 20 read as 4-GPU nodes of the reference system" in cluster.assumed[0]
    assert "read as" not in catalog.cluster(gpu="GB200", num_gpus=80).assumed[0]
