"""What the named software runs where a scenario or measurement row leaves it open: the sample
length of a framework's binned BERT data loader (``FRAMEWORK_BINNED_TOKENS``) and the model a
benchmark harness's scripts build and the link its collectives take (``HARNESSES``).  Each is
applied the same way wherever it applies (estimates and measurement rows, or rows), and listed
among the assumed inputs."""

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.calibration.measurements import load_measurements
from perfmodel.calibration.validate import validate
from perfmodel.hardware.catalog import load_catalog
from perfmodel.job import framework_tokens
from perfmodel.scenario import WorkloadSpec
from perfmodel.vocabulary import FRAMEWORK_BINNED_TOKENS, FRAMEWORKS, harness_model
from perfmodel.workloads import workload_from_spec

LAMBDA_TEXTS = ("PyTorch (NGC container; DLE-based Lambda scripts)",
                "PyTorch (newer NGC container, Lambda 'v2' suite, e.g. pytorch:24.10)")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_env=False)


def bert_scenario(framework, **workload):
    return {"workload": {"model": "bert-large", **workload},
            "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8},
            "plan": {"precision": "fp16", "micro_batch": 32, "global_batch": 256}, "framework": framework}


@pytest.mark.parametrize("text", LAMBDA_TEXTS)
def test_lambdas_scripts_build_transformer_xl_with_one_softmax_over_the_vocabulary(text):
    assert harness_model("transformer-xl-base", text)[0] == "transformer-xl-base-full-softmax"
    assert harness_model("transformer-xl-large", text)[0] == "transformer-xl-large-full-softmax"
    assert "--adaptive" in harness_model("transformer-xl-base", text)[1]
    assert harness_model("resnet50", text) is None  # the harness runs the other recipes as the zoo has them


@pytest.mark.parametrize("text", ["PyTorch (NGC 20.06)", "dle-pytorch", None, "a collapsible lambdas table"])
def test_other_software_keeps_the_named_model(text):
    assert harness_model("transformer-xl-base", text) is None


def lambda_bert_rows(tmp_path, rows):
    common = {"kind": "train", "model": "bert-large", "seq_len": 384, "precision": "fp16", "micro_batch": 32,
              "metric": "samples_per_s", "value": 1000, "source": "lambdal/deeplearning-benchmark"}
    path = tmp_path / "bert.csv"
    pd.DataFrame([{**common, **row} for row in rows]).to_csv(path, index=False)
    return load_measurements(path)


def test_lambdas_multi_gpu_rows_run_their_collectives_over_pcie_and_say_so(tmp_path, catalog):
    node = {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "global_batch": 256}
    scored = validate(lambda_bert_rows(tmp_path, [
        {"id": "nvlink", "intra": "nvlink3", "framework": LAMBDA_TEXTS[0], **node},
        {"id": "pcie", "intra": "pcie4", "framework": LAMBDA_TEXTS[0], **node},
        {"id": "dle", "intra": "nvlink3", "framework": "PyTorch (NGC 21.11)", **node},
        {"id": "one", "gpu": "A100-SXM4-80GB", "num_gpus": 1, "global_batch": 32, "framework": LAMBDA_TEXTS[1]},
    ]), catalog).set_index("id")
    assert scored.at["nvlink", "predicted"] == pytest.approx(scored.at["pcie", "predicted"], rel=1e-12)
    assert "NCCL_P2P_DISABLE" in scored.at["nvlink", "assumed"] and "pcie4" in scored.at["nvlink", "assumed"]
    # a row that already says pcie4 assumes nothing; another stack's NVLink node keeps NVLink, which is faster
    for quiet in ("pcie", "dle", "one"):
        assert "NCCL_P2P_DISABLE" not in (scored.at[quiet, "assumed"] or "")
    assert scored.at["dle", "predicted"] > scored.at["pcie", "predicted"]


def test_a_gpu_without_a_known_pcie_generation_keeps_the_stated_link(tmp_path, catalog):
    unknown = [name for name, gpu in catalog.gpus.items() if gpu.pcie_generation is None and gpu.nvlink_generation]
    if not unknown:
        pytest.skip("every catalog GPU with NVLink states its PCIe generation")
    gpu = catalog.gpu(unknown[0])
    node = {"gpu": unknown[0], "num_gpus": 8, "gpus_per_node": 8, "intra": f"nvlink{gpu.nvlink_generation}",
            "global_batch": 256}
    scored = validate(lambda_bert_rows(tmp_path, [{"id": "b200", "framework": LAMBDA_TEXTS[1], **node}]), catalog)
    assert "NCCL_P2P_DISABLE" not in (scored["assumed"].iloc[0] or "")


def test_a_lambda_row_is_scored_as_the_model_its_scripts_build_and_says_so(tmp_path, catalog):
    common = {"kind": "train", "gpu": "A100-SXM4-80GB", "num_gpus": 1, "precision": "fp16", "micro_batch": 104,
              "global_batch": 104, "seq_len": 192, "metric": "tokens_per_s", "value": 43078}
    rows = [{"id": "lambda", "model": "transformer-xl-base", "framework": LAMBDA_TEXTS[0],
             "source": "lambdal/deeplearning-benchmark", **common},
            {"id": "named", "model": "transformer-xl-base-full-softmax", "framework": "dle-pytorch",
             "source": "lambdal/deeplearning-benchmark", **common},
            {"id": "dle", "model": "transformer-xl-base", "framework": "PyTorch (NGC 20.06)",
             "source": "NVIDIA/DeepLearningExamples PyTorch/LanguageModeling/Transformer-XL", **common}]
    path = tmp_path / "txl.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    scored = validate(load_measurements(path), catalog).set_index("id")
    assert scored.at["lambda", "predicted"] == pytest.approx(scored.at["named", "predicted"], rel=1e-12)
    # the full softmax's logits GEMM over 267,735 words is more work than the adaptive softmax
    assert scored.at["lambda", "predicted"] < 0.8 * scored.at["dle", "predicted"]
    assert "transformer-xl-base-full-softmax" in scored.at["lambda", "assumed"]
    assert "--adaptive" not in (scored.at["dle", "assumed"] or "")


@pytest.mark.parametrize("framework", ["dle-pytorch", "dle-paddle"])
def test_a_dle_bert_phase_two_estimate_takes_the_binned_length_and_lists_it(framework):
    binned = estimate(bert_scenario(framework))
    stated = estimate(bert_scenario(framework, mean_seq_len=279))
    padded = estimate(bert_scenario(framework, mean_seq_len=512))
    assert binned.samples_per_s == pytest.approx(stated.samples_per_s, rel=1e-12)
    assert binned.samples_per_s > 1.3 * padded.samples_per_s  # 279 of 512 tokens: a shorter step
    line = [text for text in binned.assumptions["assumed"] if "mean_seq_len" in text]
    assert line and "279 tokens" in line[0] and framework in line[0]
    for other in (stated, padded):
        assert not any("mean_seq_len" in text for text in other.assumptions.get("assumed", []))


@pytest.mark.parametrize("framework, workload", [("dle-tensorflow", {}), (None, {}), ("dle-pytorch", {"seq_len": 128}),
                                                 ("dle-pytorch", {"seq_len": 384})])
def test_padded_recipes_and_other_lengths_keep_every_sample_full(framework, workload):
    result = estimate(bert_scenario(framework, **workload))
    full = estimate(bert_scenario(framework, **workload, mean_seq_len=workload.get("seq_len", 512)))
    assert result.samples_per_s == pytest.approx(full.samples_per_s, rel=1e-12)
    assert not any("mean_seq_len" in text for text in result.assumptions.get("assumed", []))


@settings(max_examples=60, deadline=None)
@given(framework=st.sampled_from((None,) + FRAMEWORKS), seq_len=st.sampled_from((64, 128, 256, 384, 512)),
       model=st.sampled_from(("bert-base", "bert-large", "gpt3-350m")))
def test_a_framework_default_is_shorter_than_the_sequence_and_only_where_documented(framework, seq_len, model):
    spec = WorkloadSpec(model=model, seq_len=seq_len)
    tokens = framework_tokens(spec, workload_from_spec(spec), framework)
    documented = FRAMEWORK_BINNED_TOKENS.get(framework, {}).get(seq_len)
    assert tokens == (documented if model.startswith("bert") else None)
    if tokens is not None:
        assert 0 < tokens < seq_len
    # a stated length always wins
    stated = WorkloadSpec(model=model, seq_len=seq_len, mean_seq_len=seq_len)
    assert framework_tokens(stated, workload_from_spec(stated), framework) is None


def test_calibration_groups_and_interval_context_see_the_link_the_predictor_times(tmp_path, catalog):
    """A Lambda 8-GPU row stated on NVLink is timed over PCIe, so calibrate's link-kind groups and the
    interval model's fabric take PCIe too: a parameter of a link the row never used is not fitted to it."""
    from perfmodel.calibration.fit import row_groups
    from perfmodel.calibration.intervals import row_context

    node = {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3", "global_batch": 256}
    lambda_rows = lambda_bert_rows(tmp_path, [{"id": "nvlink", "framework": LAMBDA_TEXTS[0], **node}])
    assert row_groups(lambda_rows, catalog)["link_kind"] == {"pcie"}
    assert row_context(lambda_rows, catalog)["fabric"].iloc[0] == "pcie4"
    dle_rows = lambda_bert_rows(tmp_path, [{"id": "dle", "framework": "PyTorch (NGC 21.11)", **node}])
    assert row_groups(dle_rows, catalog)["link_kind"] == {"nvlink"}
    assert row_context(dle_rows, catalog)["fabric"].iloc[0] == "nvlink3"
