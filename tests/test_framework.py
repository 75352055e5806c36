"""The software stack as a stated input: ``framework`` in scenarios and measurement rows selects
per-framework traits (``per="framework"`` parameters) fitted by calibrate; an unstated or unfitted
framework gets the pooled value and says so."""

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import estimate
from perfmodel.calibration.fit import _sparsity, calibrate, parameter_keys, pool_groups, row_groups
from perfmodel.calibration.measurements import MeasurementError, check_measurements, load_measurements
from perfmodel.calibration.validate import predict, validate
from perfmodel.hardware.catalog import load_catalog
from perfmodel.parameters import PARAMETERS
from perfmodel.profile import CalibrationProfile, load_profile
from perfmodel.scenario import ScenarioError, load_scenario
from perfmodel.vocabulary import FRAMEWORKS

# the framework traits that pool (every per-framework parameter; host_dispatch_time: tests/test_host_dispatch.py)
TRAITS = [name for name, parameter in PARAMETERS.items() if parameter.per == "framework" and parameter.pools]
SCENARIO = {"workload": {"model": "resnet50"},
            "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8},
            "plan": {"precision": "fp16", "micro_batch": 128, "global_batch": 1024, "channels_last": True}}
# a profile with values of its own for two frameworks and the pooled (median; with two, geometric-mean) value
FITTED = {"framework_compute_efficiency[megatron]": 1.25, "framework_compute_efficiency[composer]": 0.8,
          "step_overhead[megatron]": 0.02, "step_overhead[composer]": 0.005}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_env=False)


def fitted_profile() -> CalibrationProfile:
    values, uncertainty = dict(FITTED), {}
    pool_groups(values, uncertainty)
    return CalibrationProfile(values=values, uncertainty=uncertainty)


def test_a_few_traits_each_grouped_by_framework():
    assert 1 <= len(TRAITS) <= 4
    for name in TRAITS:
        assert PARAMETERS[name].low < PARAMETERS[name].default < PARAMETERS[name].high


def test_unknown_framework_in_a_scenario_names_field_value_and_allowed(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "framework": "torch-lightning"}))
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    message = str(error.value)
    assert str(path) in message and "'framework'" in message and "torch-lightning" in message
    assert all(f"'{name}'" in message for name in FRAMEWORKS)
    assert "\n" not in message


@pytest.mark.parametrize("text, source, named", [
    ("PyTorch (NGC 22.11)", "NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets", "dle-pytorch"),
    ("TensorFlow 2 (NGC 21.02)", "NVIDIA/DeepLearningExamples TensorFlow2/LanguageModeling/BERT", "dle-tensorflow"),
    ("Megatron-LM (PTD-P)", "Narayanan et al. 2021", "megatron"),
    ("Megatron-LM + DeepSpeed ZeRO-3", "Narayanan et al. 2021", "deepspeed"),
    ("NeMo 24.07 (Megatron-Core)", "NVIDIA/NeMo", "nemo"),
    ("Composer/llm-foundry (PyTorch FSDP)", "mosaicml/llm-foundry", "composer"),
    ("nanotron (Ultra-Scale Playbook, PyTorch)", "nanotron/ultrascale-playbook", "nanotron"),
    ("PyTorch DDP", "a blog", "pytorch"),
    ("megatron", "", "megatron"),
    ("my own C++ trainer", "a paper", None),
    ("PyTorch", "a benchmark that handled middleware", "pytorch"),  # 'dle' inside words is not DLE
])
def test_free_text_framework_in_a_measurement_row_is_named_by_the_documented_rule(tmp_path, text, source, named):
    """The spec has ``framework`` as free text: it is read into the vocabulary, the text kept in
    ``software``; text naming no framework leaves it empty (predicted with the pooled traits)."""
    path = tmp_path / "runs.csv"
    pd.DataFrame([{"id": "r1", "kind": "train", "gpu": "A100-SXM4-80GB", "num_gpus": 8, "model": "resnet50",
                   "precision": "fp16", "framework": text, "metric": "samples_per_s", "value": 2000,
                   "source": source}]).to_csv(path, index=False)
    row = load_measurements(path).iloc[0]
    assert (row["framework"] if isinstance(row["framework"], str) else None) == named
    if text in FRAMEWORKS:
        assert not isinstance(row["software"], str)  # a vocabulary name needs no free-text copy
    else:
        assert row["software"] == text


def test_unknown_framework_group_in_a_profile_lists_the_frameworks(tmp_path):
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump({"values": {"framework_compute_efficiency[keras]": 1.1}}))
    with pytest.raises(ValueError, match="unknown framework 'keras'; known: megatron, megatron-2019, nemo"):
        load_profile(path)


def test_scenario_round_trip_keeps_the_framework(tmp_path):
    scenario = load_scenario({**SCENARIO, "framework": "dle-pytorch"})
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump(scenario.model_dump(mode="json", exclude_none=True)))
    again = load_scenario(path)
    assert again == scenario and again.framework == "dle-pytorch"
    assert load_scenario(SCENARIO).framework is None


def test_pooled_value_is_the_geometric_mean_of_the_fitted_frameworks():
    profile = fitted_profile()
    assert set(TRAITS) == {"framework_compute_efficiency", "step_overhead", "host_dispatch_time"}
    for name in ("framework_compute_efficiency", "step_overhead"):  # host_dispatch_time: test_host_dispatch.py
        groups = [value for key, value in FITTED.items() if key.startswith(f"{name}[")]
        assert profile.get(name) == pytest.approx(math.exp(np.mean(np.log(groups))))
        assert profile.get(name, "jax") == profile.get(name)  # a framework without rows: pooled


def test_absent_framework_uses_the_pooled_value_and_says_so():
    profile = fitted_profile()
    unstated = estimate(SCENARIO, profile=profile)
    megatron = estimate({**SCENARIO, "framework": "megatron"}, profile=profile)
    unfitted = estimate({**SCENARIO, "framework": "jax"}, profile=profile)
    pooled = profile.get("framework_compute_efficiency")
    # compute time is inversely proportional to the framework's kernel speed
    assert unstated.breakdown_s["forward"] * pooled == pytest.approx(megatron.breakdown_s["forward"] * 1.25, rel=1e-9)
    assert unfitted.breakdown_s == pytest.approx(unstated.breakdown_s, rel=1e-12)
    assert any(line.startswith("framework not stated: its traits") for line in unstated.assumptions["assumed"])
    assert any(line.startswith("framework 'jax' has no values of its own") for line in unfitted.assumptions["assumed"])
    assert not any("traits" in line for line in megatron.assumptions.get("assumed", []))
    assert megatron.assumptions["framework"] == "megatron"


def test_a_profile_without_framework_values_assumes_nothing():
    plain = estimate(SCENARIO, profile=CalibrationProfile())
    named = estimate({**SCENARIO, "framework": "nemo"}, profile=CalibrationProfile())
    assert "assumed" not in plain.assumptions and plain.breakdown_s == named.breakdown_s


@settings(max_examples=8, deadline=None)
@given(efficiency=st.floats(0.4, 2.0))
def test_kernel_speed_scales_exactly_the_compute_step(efficiency):
    """Compute times divide by the framework's kernel speed; the rest of a single-GPU step
    (optimizer, overhead) does not move."""
    base = estimate({**SCENARIO, "framework": "nemo"}, profile=CalibrationProfile())
    profile = CalibrationProfile(values={"framework_compute_efficiency[nemo]": efficiency})
    changed = estimate({**SCENARIO, "framework": "nemo"}, profile=profile)
    for part in ("forward", "backward", "recompute"):
        assert changed.breakdown_s[part] * efficiency == pytest.approx(base.breakdown_s[part], rel=1e-9, abs=1e-15)
    for part in ("optimizer", "overhead"):
        assert changed.breakdown_s[part] == pytest.approx(base.breakdown_s[part], rel=1e-12)


def synthetic_rows(frameworks=("megatron", "composer")) -> pd.DataFrame:
    """ResNet-50 (channels-last), BERT-base and BERT-large rows on one and eight A100s at several
    batch sizes, per framework (30 rows each)."""
    rows = []
    for framework in frameworks:
        for model, extra in (("resnet50", {}), ("bert-base", {"seq_len": 128}), ("bert-large", {"seq_len": 128})):
            for gpus in (1, 8):
                for micro_batch in (16, 32, 64, 128, 256):
                    rows.append({"id": f"{framework}-{model}-{gpus}-{micro_batch}", "kind": "train",
                                 "gpu": "A100-SXM4-80GB", "num_gpus": gpus, "gpus_per_node": 8 if gpus > 1 else 1,
                                 "model": model, "precision": "fp16", "micro_batch": micro_batch,
                                 "global_batch": micro_batch * gpus, "framework": framework,
                                 "metric": "samples_per_s", "value": 1.0, "source": "synthetic",
                                 "channels_last": 1 if model == "resnet50" else None, **extra})
    return check_measurements(pd.DataFrame(rows))


def test_framework_groups_come_from_the_rows(catalog):
    rows = synthetic_rows()
    assert row_groups(rows, catalog)["framework"] == {"megatron", "composer"}
    keys = parameter_keys(["framework_compute_efficiency", "step_overhead"], rows, catalog)
    assert keys == ["framework_compute_efficiency[composer]", "framework_compute_efficiency[megatron]",
                    "step_overhead[composer]", "step_overhead[megatron]"]
    pattern = _sparsity(rows, keys, catalog)
    is_megatron = (rows["framework"] == "megatron").to_numpy()
    for composer_column, megatron_column in ((0, 1), (2, 3)):
        assert (pattern[:len(rows), megatron_column] == is_megatron).all()
        assert (pattern[:len(rows), composer_column] == ~is_megatron).all()


def test_calibrate_recovers_per_framework_traits_from_rows_made_by_the_model(catalog):
    """Round trip: rows made by the model with known kernel speeds per framework, calibrated from
    the prior (1.0), give those speeds back, and the two frameworks' values differ.  The fit is a
    maximum a posteriori one, so the prior (log sigma 0.3) pulls each value a few per cent
    towards 1 on 30 rows: the tolerance is 4 %."""
    truth = {"framework_compute_efficiency[megatron]": 1.3, "framework_compute_efficiency[composer]": 0.75}
    rows = synthetic_rows()
    rows["value"] = predict(rows, catalog, CalibrationProfile(values=truth))["predicted"].to_numpy()
    assert rows["value"].notna().all()
    profile = calibrate(rows, params=["framework_compute_efficiency"], catalog=catalog)
    for key, value in truth.items():
        assert profile.values[key] == pytest.approx(value, rel=0.04)
    assert profile.provenance["not_determined"] == []
    assert profile.get("framework_compute_efficiency") == pytest.approx(math.sqrt(1.3 * 0.75), rel=0.04)
    scored = validate(rows, catalog, profile)
    assert scored["ape"].max() < 0.05


def test_a_framework_its_rows_do_not_determine_is_pooled_towards_the_typical_one_not_the_prior(catalog, monkeypatch):
    """One deepspeed row beside thirty each of megatron and composer: with the identifiability bar set
    between them, deepspeed's kernel speed is not determined by its own row.  It is partially
    pooled: refitted with its prior centred on the determined frameworks' median (not the bare
    prior of 1), so it lands between that median and what its row says (1.3), is listed as pooled,
    and does not move the pooled value a framework without rows gets."""
    from perfmodel.calibration import fit

    truth = {"framework_compute_efficiency[megatron]": 1.3, "framework_compute_efficiency[composer]": 0.75,
             "framework_compute_efficiency[deepspeed]": 1.3}
    rows = pd.concat([synthetic_rows(), synthetic_rows(("deepspeed",)).iloc[:1]], ignore_index=True)
    rows["value"] = predict(rows, catalog, CalibrationProfile(values=truth))["predicted"].to_numpy()
    monkeypatch.setattr(fit, "DETERMINED_RATIO", 0.03)
    profile = calibrate(rows, params=["framework_compute_efficiency"], catalog=catalog)
    ratio = profile.provenance["identifiability"]
    assert ratio["framework_compute_efficiency[deepspeed]"] > 0.03 > ratio["framework_compute_efficiency[megatron]"]
    assert profile.provenance["not_determined"] == []
    assert profile.provenance["pooled"] == ["framework_compute_efficiency[deepspeed]"]
    pooled = profile.get("framework_compute_efficiency")
    assert pooled == pytest.approx(math.sqrt(1.3 * 0.75), rel=0.04)
    deepspeed = profile.get("framework_compute_efficiency", "deepspeed")
    # its one exact row outweighs the prior, so it lands just below 1.3 -- up to the fit's numerical
    # resolution (finite-difference step 1e-3, xtol 1e-4: fit.calibrate), which a model change can
    # tip to either side
    assert pooled * 1.02 < deepspeed < 1.3 * (1 + 2e-3)


def test_validate_rows_carry_the_framework_and_the_pooled_assumption(catalog):
    rows = synthetic_rows(("megatron",))
    rows.loc[0, "framework"] = np.nan
    scored = validate(rows, catalog, fitted_profile())
    assert scored["framework"].iloc[1] == "megatron" and pd.isna(scored["framework"].iloc[0])
    assert scored["assumed"].iloc[0].startswith("framework not stated")
    assert scored["assumed"].iloc[1] is None


def test_shipped_training_rows_state_their_framework_and_the_software_it_came_from():
    from perfmodel.calibration.measurements import shipped_measurements

    train = shipped_measurements().query("kind == 'train'")
    assert train["framework"].isin(FRAMEWORKS).all() and train["software"].notna().all()
    dle = train[train["framework"].str.startswith("dle-")]
    assert dle["source"].str.startswith(("NVIDIA/DeepLearningExamples", "lambdal/deeplearning-benchmark")).all()
    language = {"dle-pytorch": "PyTorch", "dle-tensorflow": "TensorFlow", "dle-mxnet": "MXNet",
                "dle-paddle": "PaddlePaddle", "megatron": "Megatron-LM", "megatron-2019": "Megatron-LM (2019)",
                "nemo": "NeMo", "torchtitan": "torchtitan",
                "composer": "Composer", "fsdp": "FSDP", "deepspeed": "DeepSpeed", "nanotron": "nanotron"}
    for framework, rows in train.groupby("framework"):
        assert rows["software"].str.contains(language[framework], regex=False).all(), framework


def test_calibrate_table_says_where_each_value_comes_from():
    from perfmodel.cli.calibrate import _value_source

    provenance = {"not_determined": ["dp_overlap"], "pooled": ["framework_compute_efficiency[deepspeed]"],
                  "identifiability": {"dp_overlap": 0.9, "framework_compute_efficiency[deepspeed]": 0.7,
                                      "framework_compute_efficiency[megatron]": 0.1}}
    assert _value_source("dp_overlap", provenance).startswith("prior")
    assert "partially pooled" in _value_source("framework_compute_efficiency[deepspeed]", provenance)
    assert _value_source("framework_compute_efficiency[megatron]", provenance) == "rows"
    assert _value_source("framework_compute_efficiency", provenance) == "median of its groups"


def test_megatron_reduces_gradients_after_the_backward_pass_the_others_under_it():
    """Megatron-Core's DDP does not overlap the gradient all-reduce or the distributed optimizer's
    parameter all-gather by default (DP_REDUCE_AFTER_BACKWARD): the whole collective is exposed,
    where PyTorch DDP hides it under dp_overlap of the backward pass.  ZeRO-3 is not affected."""
    from perfmodel.chain import run_chain
    from perfmodel.plans import check_plans, enumerate_plans, select
    from perfmodel.scenario import Plan
    from perfmodel.vocabulary import DP_REDUCE_AFTER_BACKWARD
    from perfmodel.workloads import get_workload

    assert DP_REDUCE_AFTER_BACKWARD == ("megatron", "megatron-2019")
    workload = get_workload("gpt3-1.3b")
    cluster = load_catalog(include_env=False).cluster(gpu="A100-SXM4-80GB", num_gpus=8, gpus_per_node=8)
    grid = enumerate_plans(Plan(tp=1, pp=1, micro_batch=1, global_batch=8, recompute="none"), workload, 8, 8)
    plans = select(grid, check_plans(grid, workload, 8, 8) == 0)
    profile = CalibrationProfile(values={"dp_overlap": 1.0, "overlap_interference": 0.0})
    settings = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=profile)
    out = {name: run_chain(workload, cluster, plans, framework=name, **settings) for name in ("megatron", "fsdp")}
    zero = plans["zero"]
    assert set(np.unique(zero)) >= {0, 1, 3}
    for name, result in out.items():
        steps, outputs = result.steps, result.outputs
        exposed_grad = outputs["dp_comm_s"][zero == 0]
        full_grad = steps["dp_comm"]["t_grad"][zero == 0]
        exposed_gather = outputs["zero_gather_s"][zero == 1]
        full_gather = steps["zero_gather"]["t_gather"][zero == 1]
        if name == "megatron":  # nothing hidden
            np.testing.assert_allclose(exposed_grad, full_grad, rtol=1e-12)
            np.testing.assert_allclose(exposed_gather, full_gather, rtol=1e-12)
        else:  # hidden under the backward (forward) pass, which is longer than the collective here
            assert np.all(exposed_grad < full_grad) and np.all(exposed_gather < full_gather)
    np.testing.assert_array_equal(out["megatron"].outputs["dp_comm_s"][zero == 3],
                                  out["fsdp"].outputs["dp_comm_s"][zero == 3])


def _tp_gpt(hidden):
    """The 24-layer GPT of ``hidden`` (heads of 128) at sequence 2,048 that the TP-8 tests run."""
    from perfmodel.workloads.transformer import transformer

    return transformer(name=f"gpt-{hidden}", layers=24, hidden=hidden, heads=hidden // 128, seq_len=2048,
                       vocab=51200)


def _tp_chains(hidden, profile, frameworks=("megatron", "torchtitan"), recompute="none", sequence_parallel=False):
    """One TP-8 plan of a 24-layer GPT of ``hidden`` on 8 A100s, run through the chain per framework."""
    from perfmodel.chain import run_chain
    from perfmodel.plans import check_plans, enumerate_plans, select
    from perfmodel.scenario import Plan

    workload = _tp_gpt(hidden)
    cluster = load_catalog(include_env=False).cluster(gpu="A100-SXM4-80GB", num_gpus=8, gpus_per_node=8)
    grid = enumerate_plans(Plan(tp=8, pp=1, micro_batch=4, global_batch=4, recompute=recompute, zero=0,
                                sequence_parallel=sequence_parallel), workload, 8, 8)
    plans = select(grid, check_plans(grid, workload, 8, 8) == 0)
    assert np.all(plans["sequence_parallel"] == int(sequence_parallel))
    settings = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=profile)
    return {name: run_chain(workload, cluster, plans, framework=name, **settings) for name in frameworks}


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_megatron_hides_backward_tp_all_reduces_under_the_weight_gradient_gemms(recompute):
    """Megatron-Core's column-parallel layers all-reduce the input gradient while the weight
    gradient is computed (TP_DGRAD_OVERLAP): with no interference and weight-gradient GEMMs longer
    than the all-reduce (hidden 8,192 at TP 8), only the forward all-reduces (two per layer, two more
    for a recomputed layer) stay exposed; a framework without it exposes all of them."""
    from perfmodel.vocabulary import TP_DGRAD_OVERLAP

    assert TP_DGRAD_OVERLAP == ("megatron", "nemo", "deepspeed")
    out = _tp_chains(8192, CalibrationProfile(values={"tp_overlap_interference": 0.0}), recompute=recompute)
    megatron, torchtitan = out["megatron"], out["torchtitan"]
    window = megatron.steps["compute"]["wgrad_window"]
    per_collective = megatron.steps["tp_comm"]["t_tp"] / megatron.steps["compute"]["stage_layers"]
    assert np.all(window > 0)
    forward = 2.0 + 2.0 * (recompute == "full")
    np.testing.assert_allclose(megatron.outputs["tp_comm_s"] / torchtitan.outputs["tp_comm_s"],
                               forward / (forward + 2.0), rtol=1e-9)
    assert np.all(per_collective > 0)


@settings(max_examples=12, deadline=None)
@given(hidden=st.sampled_from([1024, 2048, 4096, 8192]), interference=st.floats(0.0, 1.0),
       data_parallel_interference=st.floats(0.0, 1.0))
def test_the_hidden_share_is_bounded_by_the_weight_gradient_gemm(hidden, interference, data_parallel_interference):
    """Exposed backward all-reduce = max(0, t - w) + interference x min(t, w) per all-reduce (t its
    time, w the mean column-parallel weight-gradient GEMM, interference tp_overlap_interference, not
    the data-parallel overlap's): never more than without overlap, never less than the forward
    all-reduces, equal to no overlap at full interference."""
    out = _tp_chains(hidden, CalibrationProfile(values={"tp_overlap_interference": interference,
                                                        "overlap_interference": data_parallel_interference}))
    megatron, torchtitan = out["megatron"], out["torchtitan"]
    layers = megatron.steps["compute"]["stage_layers"]
    full = torchtitan.steps["tp_comm"]["t_tp"] / layers / 4.0  # one all-reduce, exposed
    window = megatron.steps["compute"]["wgrad_window"]
    hidden_part = np.minimum(full, window)
    expected = layers * (2.0 * full + 2.0 * (full - hidden_part + interference * hidden_part))
    np.testing.assert_allclose(megatron.steps["tp_comm"]["t_tp"], expected, rtol=1e-9)
    assert np.all(megatron.steps["tp_comm"]["t_tp"] <= torchtitan.steps["tp_comm"]["t_tp"] * (1 + 1e-12))
    assert np.all(megatron.steps["tp_comm"]["t_tp"] >= layers * 2.0 * full * (1 - 1e-12))


def test_megatron_reduces_fp16_gradients_in_fp16_and_bf16_ones_in_fp32():
    """Megatron-LM's gradient buffer has the parameters' dtype unless fp32 accumulation is asked
    for, which bf16 forces (HALF_PRECISION_GRADIENT_REDUCE): its fp16 data-parallel all-reduce moves
    half the bytes of the same run in bf16 or under PyTorch DDP (fp32 gradients)."""
    from perfmodel.chain import run_chain
    from perfmodel.models import comm
    from perfmodel.plans import check_plans, enumerate_plans, select
    from perfmodel.scenario import Plan
    from perfmodel.workloads import get_workload

    workload = get_workload("gpt3-1.3b")
    cluster = load_catalog(include_env=False).cluster(gpu="A100-SXM4-80GB", num_gpus=8, gpus_per_node=8)
    grid = enumerate_plans(Plan(tp=1, pp=1, micro_batch=1, global_batch=8, recompute="none", zero=0), workload, 8, 8)
    plans = select(grid, check_plans(grid, workload, 8, 8) == 0)
    profile = CalibrationProfile()
    t_grad = {}
    cases = (("megatron", "fp16"), ("megatron", "bf16"), ("fsdp", "fp16"), ("megatron-2019", "fp16"))
    for framework, precision in cases:
        result = run_chain(workload, cluster, plans, precision=precision, flash_attention=True, optimizer="adam",
                           profile=profile, framework=framework)
        t_grad[framework, precision] = result.steps["dp_comm"]["t_grad"]
        params = result.steps["compute"]["params_local"]
    links = comm.link_numbers(cluster, profile)
    for precision_bytes, key in ((2.0, ("megatron", "fp16")), (4.0, ("megatron", "bf16")), (4.0, ("fsdp", "fp16")),
                                 (2.0, ("megatron-2019", "fp16"))):
        expected = comm.collective_time("all_reduce", params * precision_bytes, 8, 8, **links)
        np.testing.assert_allclose(t_grad[key], expected, rtol=1e-9)
    assert np.all(t_grad["megatron", "fp16"] < t_grad["megatron", "bf16"])


def test_megatron_2019_exposes_every_tensor_parallel_all_reduce():
    """Megatron-LM of 2019 all-reduced a column-parallel layer's input gradient synchronously (its
    mpu's _CopyToModelParallelRegion.backward), so none of the backward all-reduces hides under a
    weight-gradient GEMM: its tensor-parallel time is that of a stack without the overlap, and
    longer than today's Megatron-LM's wherever the weight-gradient GEMMs can hide some of it."""
    from perfmodel.vocabulary import TP_DGRAD_OVERLAP

    assert "megatron-2019" not in TP_DGRAD_OVERLAP
    out = _tp_chains(8192, CalibrationProfile(values={"tp_overlap_interference": 0.0}),
                     frameworks=("megatron-2019", "megatron", "torchtitan"))
    np.testing.assert_allclose(out["megatron-2019"].outputs["tp_comm_s"], out["torchtitan"].outputs["tp_comm_s"],
                               rtol=1e-9)
    assert np.all(out["megatron"].outputs["tp_comm_s"] < out["megatron-2019"].outputs["tp_comm_s"])


def test_with_sequence_parallelism_megatron_exposes_the_output_gradient_all_gather():
    """With sequence parallelism a Megatron block's backward pass all-gathers the output gradient
    (exposed), all-gathers its input again for the weight gradient and reduce-scatters the input
    gradient (both under a GEMM): with no interference and long GEMMs, half an all-reduce per
    block stays exposed, where a framework without the overlap exposes all of it."""
    out = _tp_chains(8192, CalibrationProfile(values={"tp_overlap_interference": 0.0}), sequence_parallel=True)
    np.testing.assert_allclose(out["megatron"].outputs["tp_comm_s"] / out["torchtitan"].outputs["tp_comm_s"],
                               (2.0 + 2.0 * 0.5) / (2.0 + 2.0), rtol=1e-9)


@pytest.mark.parametrize("hidden", [1024, 8192])
def test_sequence_parallelism_shortens_the_passes_by_the_replicated_ops(hidden):
    """Sequence parallelism runs the norms and residual adds on 1/tp of the tokens (Korthikanti et al.
    2022, Table 4: 0.5 ms of a 7.7 ms forward pass of a 22B layer at TP 8): both passes get shorter,
    by less than those ops took whole, whatever the framework."""
    from perfmodel.models import compute

    profile = CalibrationProfile()
    whole = _tp_chains(hidden, profile)
    split = _tp_chains(hidden, profile, sequence_parallel=True)
    table = _tp_gpt(hidden).ops(4, tp=8, precision="bf16")
    gpu = load_catalog(include_env=False).gpu("A100-SXM4-80GB")
    forward = compute.op_times(table, gpu, "bf16", profile, sustained=profile.get("sustained_clock_fraction", "Ampere"),
                               host_floor=False)[0].ravel()
    replicated = np.array([kind == "norm" or name.endswith("residual") for kind, name in zip(table.kind, table.name)])
    replicated_forward = (forward * table.per_op("repeat") * replicated).sum()
    for framework in ("megatron", "torchtitan"):
        before, after = (out[framework].steps["compute"] for out in (whole, split))
        assert np.all(after["t_fwd"] < before["t_fwd"]) and np.all(after["t_bwd"] < before["t_bwd"])
        saved = before["t_fwd"] - after["t_fwd"]
        assert np.all(saved < replicated_forward / profile.get("framework_compute_efficiency", framework))
