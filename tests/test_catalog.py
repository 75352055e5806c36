"""The shipped hardware catalog against its sources, user catalogs, and bad catalog input (issue 2)."""

import json
import re

import pytest
import yaml

import perfmodel
from perfmodel.cli import main
from perfmodel.hardware.catalog import CatalogError, load_catalog
from perfmodel.hardware.specs import PRECISIONS


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_env=False)


# ---- headline facts, each checked against the datasheet figure it was copied from ----------------

def test_a100_datasheet_figures(catalog):
    a40, a80 = catalog.gpu("A100-SXM4-40GB"), catalog.gpu("A100-SXM4-80GB")
    for gpu in (a40, a80):
        assert gpu.peak("bf16") == pytest.approx(312e12)          # dense BF16 tensor, NVIDIA A100 datasheet
        assert gpu.peak("fp16") == pytest.approx(312e12)
        assert gpu.peak("tf32") == pytest.approx(156e12)
        assert gpu.tdp == pytest.approx(400)
        assert gpu.nvlink_bandwidth_per_direction == pytest.approx(300e9)   # 600 GB/s bidirectional
    assert a40.memory_bandwidth == pytest.approx(1.555e12)
    assert a80.memory_bandwidth == pytest.approx(2.039e12)
    assert (a40.memory, a80.memory) == (40 * 2**30, 80 * 2**30)


def test_gpu_memory_is_the_binary_capacity_the_driver_reports(catalog):
    """The datasheet's "80 GB" is 80 GiB of DRAM: nvidia-smi's memory.total is 81,920 MiB on an
    A100-SXM4-80GB, 81,559 MiB on an H100 80GB HBM3 and 143,771 MiB on an H200 (the driver keeps
    up to 0.5 % of an HBM part); the catalog is within 0.5 % of each, never below."""
    for name, reported_mib in (("A100-SXM4-80GB", 81920), ("H100-SXM5-80GB", 81559), ("H200-SXM-141GB", 143771)):
        memory = catalog.gpu(name).memory
        assert reported_mib * 2**20 <= memory <= 1.005 * reported_mib * 2**20, name


def test_h100_sxm5_datasheet_figures(catalog):
    h100 = catalog.gpu("H100-SXM5-80GB")
    assert 989.4e12 <= h100.peak("bf16") <= 989.5e12   # 1,979 sparse / 2 (NVIDIA), 989.4 clock-derived
    assert h100.sparse_halved
    assert h100.peak("fp8") == pytest.approx(2 * h100.peak("bf16"), rel=1e-3)
    assert h100.memory_bandwidth == pytest.approx(3.35e12)
    assert h100.tdp == pytest.approx(700)
    assert h100.nvlink_bandwidth_per_direction == pytest.approx(450e9)


def test_gddr_parts_with_ecc_on_leave_jobs_less_than_their_datasheet_memory(catalog):
    """nvidia-smi and the AWS API report 1/16 less on ECC-enabled GDDR6 parts (L4 23,034 MiB, A10G
    22,888 MiB of 24 GiB); plans are sized against that, HBM parts against the whole figure."""
    for name in ("L4", "A10G", "T4"):
        gpu = catalog.gpu(name)
        assert gpu.memory_capacity == gpu.memory_usable
        assert 0.9 * gpu.memory < gpu.memory_capacity <= (1 - 1 / 16) * gpu.memory, name
    h100 = catalog.gpu("H100-SXM5-80GB")
    assert h100.memory_usable is None and h100.memory_capacity == h100.memory
    result = perfmodel.estimate({"workload": {"model": "gpt3-125m"}, "hardware": {"gpu": "L4", "num_gpus": 1},
                                 "plan": {"micro_batch": 1, "global_batch": 8}})
    assert result.memory["capacity"] == 23034 * 2**20


def test_memory_usable_above_memory_is_refused_by_name(tmp_path):
    h100 = load_catalog().gpu("H100-SXM5-80GB").model_dump()
    with pytest.raises(ValueError, match=r"memory_usable 90,000 MiB must be at most memory \(81,920 MiB\)"):
        type(load_catalog().gpu("H100-SXM5-80GB")).model_validate({**h100, "memory_usable": "90000 MiB"})


def test_t4_datasheet_figures(catalog):
    t4 = catalog.gpu("T4")
    assert t4.tdp == pytest.approx(70)
    assert t4.memory == pytest.approx(16 * 2**30)
    assert t4.peak("fp16") == pytest.approx(65e12)
    with pytest.raises(ValueError, match="no bf16 peak.*allowed for this GPU: fp64, fp32, fp16, int8"):
        t4.peak("bf16")                               # Turing has no BF16


def test_seed_claims_that_were_wrong(catalog):
    # hardware_facts section 1: g5.48xlarge is 8 x A10G (not A100) at 100 Gb/s; p4d is 8 x A100-40GB
    p4d, g5 = catalog.instance("aws/p4d.24xlarge"), catalog.instance("aws/g5.48xlarge")
    assert (p4d.gpus_per_node, p4d.gpu) == (8, "A100-SXM4-40GB")
    assert (g5.gpus_per_node, g5.gpu) == (8, "A10G")
    assert g5.network_bandwidth == pytest.approx(100e9 / 8)
    assert p4d.nics * catalog.link(p4d.nic).bandwidth_per_direction == pytest.approx(400e9 / 8)  # 4 x 100 Gb/s EFA
    assert p4d.price_on_demand_usd_per_hour == pytest.approx(21.957642)
    assert "32.7726" in p4d.notes                                                  # historical price kept


def test_nvlink_generations_per_direction(catalog):
    # NVIDIA's per-GPU bidirectional totals 300/600/900/1800 GB/s, halved
    expected = {"nvlink2": 150e9, "nvlink3": 300e9, "nvlink4": 450e9, "nvlink5": 900e9,
                "pcie3": 15.75e9, "pcie4": 31.5e9, "pcie5": 63e9,
                "ib-edr": 12.5e9, "ib-hdr": 25e9, "ib-ndr": 50e9, "ib-xdr": 100e9,
                "roce-100": 12.5e9, "roce-200": 25e9, "roce-400": 50e9, "efa": 12.5e9}
    for name, bandwidth in expected.items():
        assert catalog.link(name).bandwidth_per_direction == pytest.approx(bandwidth), name


def test_every_canonical_gpu_is_present(catalog):
    names = ["T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-SXM3-32GB", "V100-PCIe", "A10", "A10G", "L4", "L40S",
             "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIe-40GB", "A100-PCIe-80GB", "H100-SXM5-80GB",
             "H100-PCIe-80GB", "H100-NVL", "H100-HBM2e-96GB", "H200-SXM-141GB", "B200", "GB200", "B300",
             "GB300"]
    assert set(names) <= set(catalog.gpus)


def test_architecture_is_one_plain_word(catalog):
    allowed = {"Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell", "CDNA3"}
    assert {gpu.architecture for gpu in catalog.gpus.values()} <= allowed


def test_dense_peaks_are_ordered_by_precision(catalog):
    # tensor cores: tf32 < fp16 = bf16 <= fp8 on every GPU that has them; fp32 (CUDA cores) < fp16 tensor;
    # an NVIDIA GPU without tensor cores runs an FP16 GEMM accumulating in FP32 (the catalog's float rates)
    # at its fp32 rate (other vendors' matrix units have no tensor_core_generation and keep the strict order)
    for gpu in catalog.gpus.values():
        p = gpu.peak_flops
        if p.tf32 and p.bf16:
            assert p.tf32 < p.bf16, gpu.name
        if p.fp16 and p.bf16:
            assert p.fp16 == p.bf16, gpu.name
        if p.fp8 and p.bf16:
            assert p.fp8 >= p.bf16, gpu.name
        if p.fp32 and p.fp16:
            cuda_cores_only = gpu.vendor == "NVIDIA" and not gpu.tensor_core_generation
            assert p.fp32 == p.fp16 if cuda_cores_only else p.fp32 < p.fp16, gpu.name


def test_every_entry_has_a_source_and_priced_instances_a_date(catalog):
    for section in ("gpus", "links", "nodes", "instances"):
        for key, entry in getattr(catalog, section).items():
            assert len(entry.source) > 20, f"{section} {key}"
    for key, inst in catalog.instances.items():
        if inst.price_usd_per_hour("on_demand") or inst.price_spot_usd_per_hour:
            assert inst.price_as_of is not None, key
        assert inst.price_reserved_1y_usd_per_hour is None   # no source had reserved prices


def test_instances_span_four_providers(catalog):
    assert len(catalog.instances) >= 30
    assert {i.provider for i in catalog.instances.values()} == {"aws", "gcp", "azure", "lambda"}
    for key in ["aws/p3.16xlarge", "aws/p4de.24xlarge", "aws/p5.48xlarge", "aws/p5e.48xlarge", "aws/p5en.48xlarge",
                "aws/g4dn.xlarge", "aws/g6.48xlarge", "aws/g6e.48xlarge", "gcp/a2-highgpu-8g", "gcp/a3-highgpu-8g",
                "azure/Standard_ND96amsr_A100_v4", "azure/Standard_ND96isr_H100_v5"]:
        assert key in catalog.instances
    nd = catalog.instance("azure/Standard_ND96isr_H100_v5")
    assert (nd.gpus_per_node, nd.nics, nd.nic) == (8, 8, "ib-ndr")   # Microsoft docs, not SkyPilot's 12 GPUs


def test_suspect_gcp_prices_are_marked(catalog):
    assert "SUSPECT" in catalog.instance("gcp/a3-highgpu-8g").notes


# ---- names and aliases ------------------------------------------------------------------------------

@pytest.mark.parametrize(("alias", "name"), [
    ("H100", "H100-SXM5-80GB"), ("h100-sxm", "H100-SXM5-80GB"), ("a100-80gb", "A100-SXM4-80GB"),
    ("a100-40gb", "A100-SXM4-40GB"), ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"), ("h200", "H200-SXM-141GB"),
    ("t4", "T4"),
])
def test_aliases_resolve_case_insensitively(catalog, alias, name):
    assert catalog.gpu(alias).name == name


def test_instance_resolves_by_bare_name(catalog):
    assert catalog.instance("p4d.24xlarge") is catalog.instance("aws/p4d.24xlarge")


def test_ambiguous_alias_lists_the_candidates(catalog):
    with pytest.raises(CatalogError, match="ambiguous; candidates: A100-SXM4-40GB, A100-SXM4-80GB"):
        catalog.gpu("a100")


def test_unknown_name_suggests_close_ones(catalog):
    with pytest.raises(CatalogError, match=r"'SXM5' is not in the catalog; did you mean one of: H100-SXM5-80GB"):
        catalog.gpu("SXM5")


def test_instance_cluster_uses_the_instance_network(catalog):
    cluster = catalog.cluster(instance="aws/p5.48xlarge", nodes=4)
    assert (cluster.num_gpus, cluster.nics_per_node) == (32, 32)
    assert cluster.inter_bandwidth_per_node == pytest.approx(3200e9 / 8)
    assert cluster.instance.price_usd_per_hour() == pytest.approx(55.04)


def test_node_entries_reference_real_parts(catalog):
    dgx2 = catalog.node("DGX-2")
    assert (dgx2.gpus_per_node, dgx2.gpu, dgx2.fabric, dgx2.nics, dgx2.nic) == (16, "V100-SXM3-32GB", "nvswitch", 8,
                                                                               "ib-edr")
    assert catalog.node("DGX-1").fabric == "nvlink_mesh"


# ---- user catalogs ---------------------------------------------------------------------------------

USER_GPU = {"name": "X1000", "aliases": ["x1k"], "vendor": "ACME", "architecture": "Hopper", "memory": "100 GB",
            "memory_bandwidth": "5 TB/s", "peak_flops": {"bf16": "1 PFLOP/s"}, "tdp": "600 W", "source": "test"}


def _write(path, data):
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_user_file_adds_and_overrides_entries(tmp_path):
    cheap = {"name": "p4d.24xlarge", "provider": "aws", "gpu": "a100-40gb", "gpus_per_node": 8, "intra": "nvlink3",
             "price_on_demand_usd_per_hour": 10.0, "price_as_of": "2026-01-01", "source": "my contract"}
    user = _write(tmp_path / "mine.yaml", {"gpus": [USER_GPU], "instances": [cheap]})
    merged = load_catalog(user, include_env=False)
    assert merged.gpu("x1k").peak("bf16") == pytest.approx(1e15)
    assert merged.instance("aws/p4d.24xlarge").price_on_demand_usd_per_hour == pytest.approx(10.0)
    assert "T4" in merged.gpus                                      # shipped entries stay


def test_user_file_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_CATALOG", _write(tmp_path / "env.yaml", {"gpus": [USER_GPU]}))
    assert load_catalog().gpu("X1000").tdp == pytest.approx(600)
    assert "X1000" not in load_catalog(include_env=False).gpus


def test_user_file_from_cli_option(tmp_path, capsys):
    user = _write(tmp_path / "mine.yaml", {"gpus": [USER_GPU]})
    assert main(["--catalog", user, "catalog", "show", "x1k", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["name"], shown["memory"], shown["peak_flops"]["bf16"]) == ("X1000", 1e11, 1e15)


# ---- bad input: one clear message naming file, entry, field and value --------------------------------

BAD = [
    ({"gpus": [{**USER_GPU, "tdp": "a lot"}]}, ["gpus[0] (X1000)", "field 'tdp'", "'a lot'", "a power"]),
    ({"gpus": [{**USER_GPU, "sm_count": "many"}]}, ["gpus[0] (X1000)", "field 'sm_count'", "'many'", "integer"]),
    ({"gpus": [{k: v for k, v in USER_GPU.items() if k != "memory"}]}, ["gpus[0] (X1000)", "field 'memory'",
                                                                         "Field required"]),
    ({"links": [{"name": "l", "kind": "nvlink", "bandwidth_per_direction": "-3 GB/s", "source": "s"}]},
     ["links[0] (l)", "field 'bandwidth_per_direction'", "'-3 GB/s'", "greater than 0"]),
    ({"links": [{"name": "l", "kind": "nvlink", "bandwidth_per_direction": 0, "source": "s"}]},
     ["links[0] (l)", "field 'bandwidth_per_direction'", "greater than 0"]),
    ({"gpus": [{**USER_GPU, "memory": "100 GX"}]}, ["gpus[0] (X1000)", "field 'memory'", "unknown unit 'GX'",
                                                    "expected a size"]),
    ({"links": [{"name": "l", "kind": "carrier-pigeon", "bandwidth_per_direction": 1, "source": "s"}]},
     ["links[0] (l)", "field 'kind'", "'carrier-pigeon'", "nvlink"]),
    ({"gpus": [USER_GPU, USER_GPU]}, ["gpus[1] (X1000)", "field 'name'", "duplicate name 'X1000'"]),
    ({"nodes": [{"name": "n", "gpu": "Z9000", "gpus_per_node": 8, "intra": "nvlink3", "source": "s"}]},
     ["nodes (n)", "field 'gpu'", "'Z9000'", "not in the catalog"]),
    ({"gpus": [{**USER_GPU, "colour": "green"}]}, ["gpus[0] (X1000)", "field 'colour'", "not a field of this entry", "allowed here: name,"]),
    ({"instances": [{"name": "i", "provider": "aws", "gpu": "T4", "gpus_per_node": 1, "intra": "pcie3",
                     "price_on_demand_usd_per_hour": 1.0, "source": "s"}]},
     ["instances[0] (aws/i)", "price_as_of"]),
    ({"machines": []}, ["unknown top-level keys ['machines']"]),
]


@pytest.mark.parametrize(("data", "words"), BAD)
def test_bad_catalog_file_names_file_entry_field_and_value(tmp_path, data, words):
    path = _write(tmp_path / "bad.yaml", data)
    with pytest.raises(CatalogError) as info:
        load_catalog(path, include_env=False)
    message = str(info.value)
    assert path in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(("data", "words"), BAD[:3] + BAD[-4:-2])
def test_bad_catalog_file_on_the_cli_exits_2_without_traceback(tmp_path, capsys, data, words):
    path = _write(tmp_path / "bad.yaml", data)
    assert main(["--catalog", path, "catalog", "list", "gpus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfmodel: error: ") and "Traceback" not in err
    assert path in err and all(word in err for word in words)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(CatalogError, match="cannot read catalog file"):
        load_catalog(str(tmp_path / "missing.yaml"), include_env=False)
    broken = tmp_path / "broken.yaml"
    broken.write_text("gpus: [\n")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_catalog(str(broken), include_env=False)


# ---- CLI ---------------------------------------------------------------------------------------------

def test_cli_list_json_is_si(capsys):
    assert main(["catalog", "list", "gpus", "--json"]) == 0
    gpus = {g["name"]: g for g in json.loads(capsys.readouterr().out)["gpus"]}
    assert gpus["H200-SXM-141GB"]["memory"] == pytest.approx(141 * 2**30)
    assert gpus["H200-SXM-141GB"]["memory_bandwidth"] == pytest.approx(4.8e12)


def test_cli_list_all_sections_table(capsys):
    assert main(["catalog", "list"]) == 0
    out = capsys.readouterr().out
    for section in ("gpus", "links", "nodes", "instances"):
        assert re.search(rf"^{section} \(\d+\)$", out, re.M)
    assert "aws/p4d.24xlarge" in out


def test_cli_show_instance_and_prices(capsys):
    assert main(["catalog", "show", "aws/p4d.24xlarge", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["price_on_demand_usd_per_hour"] == pytest.approx(21.957642)
    assert shown["host_memory"] == pytest.approx(1152 * 2**30)
    assert main(["catalog", "show", "H100"]) == 0
    out = capsys.readouterr().out
    assert "989.5 TFLOP/s" in out and "3.35 TB/s" in out


def test_cli_show_ambiguous_name_exits_2(capsys):
    assert main(["catalog", "show", "a100"]) == 2
    assert "candidates: A100-SXM4-40GB, A100-SXM4-80GB" in capsys.readouterr().err


def test_cli_schema_describes_the_four_sections(capsys):
    assert main(["catalog", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["properties"]) == {"gpus", "links", "nodes", "instances"}
    assert schema["additionalProperties"] is False
    memory = schema["$defs"]["GPU"]["properties"]["memory"]
    assert {"type": "string"} in memory["anyOf"]                   # "80 GB" is allowed
    assert set(schema["$defs"]["PeakFlops"]["properties"]) == set(PRECISIONS)


def test_shipped_catalog_validates_against_its_own_schema_shape(catalog, capsys):
    # every section key of the shipped YAML is a schema property and every entry's keys are known fields
    assert main(["catalog", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    from perfmodel.hardware.catalog import shipped_data_path
    shipped = yaml.safe_load(shipped_data_path("hardware_catalog.yaml").read_text())
    names = {"gpus": "GPU", "links": "Link", "nodes": "Node", "instances": "Instance"}
    for section, entries in shipped.items():
        fields = set(schema["$defs"][names[section]]["properties"])
        for entry in entries:
            assert set(entry) <= fields, entry["name"]


def test_peaks_between_two_gpus_are_their_geometric_mean_and_shown_as_assumed(catalog):
    gpu, low, high = (catalog.gpu(n) for n in ("H100-HBM2e-96GB", "H100-NVL", "H100-SXM5-80GB"))
    for precision in ("fp32", "bf16", "fp8"):
        assert low.peak(precision) < gpu.peak(precision) < high.peak(precision)
        assert gpu.peak(precision) == pytest.approx((low.peak(precision) * high.peak(precision)) ** 0.5)
    assert any("peak_flops" in line and "H100-NVL" in line for line in gpu.assumed)


def test_a_null_sm_count_is_the_median_of_the_architecture_and_is_listed(catalog):
    hopper = sorted(g.sm_count for g in catalog.gpus.values()
                    if g.architecture == "Hopper" and not any("sm_count" in line for line in g.assumed))
    nvl = catalog.gpu("H100-NVL")
    assert nvl.sm_count == hopper[len(hopper) // 2] and len(hopper) % 2 == 1
    assert any(line.startswith("H100-NVL sm_count") for line in nvl.assumed)
    assert not catalog.gpu("A100-SXM4-80GB").assumed  # a fully sourced entry assumes nothing
    assert not catalog.gpu("H100-SXM5-80GB").assumed  # nor one whose base clock NVIDIA does not publish


def test_estimate_on_a_gpu_with_filled_specs_lists_the_assumptions():
    import perfmodel

    estimate = perfmodel.estimate({"workload": {"model": "gpt3-1.3b"},
                                   "hardware": {"gpu": "H100-HBM2e-96GB", "num_gpus": 8},
                                   "plan": {"global_batch": 64}})
    assert estimate.feasible
    assumed = " ".join(estimate.assumptions["assumed"])
    assert "peak_flops" in assumed and "sm_count" in assumed


def test_peaks_between_an_unknown_gpu_is_an_error_naming_it(tmp_path):
    entry = yaml.safe_load(yaml.safe_dump(load_catalog().gpu("H100-HBM2e-96GB").model_dump(
        mode="json", exclude={"assumed"})))
    entry.update(name="H100-test", aliases=[], peaks_between=["H100-NVL", "H999"])
    entry["peak_flops"] = {p: None for p in PRECISIONS}
    with pytest.raises(CatalogError, match="H999"):
        load_catalog(_write(tmp_path / "c.yaml", {"gpus": [entry]}))
