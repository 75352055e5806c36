"""Which attention kernel a plan runs when it does not say: the framework's default, else the
GPU's, listed as an assumption whose cost (the unfused step) widens the interval."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.calibration.predictors  # noqa: F401  (registers the efficiency parameters)
from perfmodel import estimate
from perfmodel.calibration import intervals as iv
from perfmodel.calibration.measurements import shipped_measurements
from perfmodel.calibration.validate import validate
from perfmodel.chain import evaluate
from perfmodel.hardware.catalog import load_catalog
from perfmodel.plans import as_arrays, default_flash_attention, flash_attention_assumed
from perfmodel.scenario import Plan
from perfmodel.vocabulary import FRAMEWORK_FLASH_ATTENTION, FRAMEWORK_FLASH_ATTENTION_ASSUMED, FRAMEWORKS
from perfmodel.profile import default_profile
from perfmodel.workloads.transformer import transformer
from scenario_helpers import tp8_gpt

CATALOG = load_catalog()
A100 = CATALOG.gpu("A100-SXM4-80GB")
V100 = CATALOG.gpu("V100-SXM2-16GB")


def gpt(framework=None, flash=None, hidden=1024, tp=8):
    return tp8_gpt(framework, hidden, tp, **({} if flash is None else {"flash_attention": flash}))


def test_framework_defaults_name_only_known_frameworks():
    assert set(FRAMEWORK_FLASH_ATTENTION) <= set(FRAMEWORKS)
    # an assumed kernel is for a version-dependent framework, never one with a default of its own
    assert set(FRAMEWORK_FLASH_ATTENTION_ASSUMED) <= set(FRAMEWORKS) - set(FRAMEWORK_FLASH_ATTENTION)
    assert FRAMEWORK_FLASH_ATTENTION_ASSUMED == {"megatron": False}


@pytest.mark.parametrize("framework", FRAMEWORKS + (None,))
def test_default_follows_the_framework_and_pre_ampere_gpus_never_fuse(framework):
    on_a100 = default_flash_attention(A100, framework)
    assert on_a100 is FRAMEWORK_FLASH_ATTENTION.get(framework, FRAMEWORK_FLASH_ATTENTION_ASSUMED.get(framework, True))
    assert default_flash_attention(V100, framework) is False
    # assumed only where the framework has no default of its own and the GPU could fuse
    assert flash_attention_assumed(Plan(), A100, framework) is (framework not in FRAMEWORK_FLASH_ATTENTION)
    assert flash_attention_assumed(Plan(), V100, framework) is False
    assert flash_attention_assumed(Plan(flash_attention=True), A100, framework) is False


@settings(max_examples=25, deadline=None)
@given(hidden=st.sampled_from([1024, 1536, 2048, 4096]), tp=st.sampled_from([1, 2, 4, 8]),
       micro_batch=st.sampled_from([1, 2, 4]), seq_len=st.sampled_from([512, 2048, 4096]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_unfused_attention_is_never_faster(hidden, tp, micro_batch, seq_len, recompute):
    workload = transformer(layers=4, hidden=hidden, heads=hidden // 64, vocab=32000, seq_len=seq_len)
    cluster = CATALOG.cluster(gpu="A100-SXM4-80GB", num_gpus=8, gpus_per_node=8, intra="nvlink3")
    plan = as_arrays({"tp": tp, "pp": 1, "dp": 8 // tp, "cp": 1, "vp": 1, "micro_batch": micro_batch,
                      "global_batch": micro_batch * (8 // tp) * 2, "recompute": recompute, "zero": 0,
                      "recompute_every": 1, "sequence_parallel": tp > 1, "offload": "none"})
    times = {flash: evaluate(workload, cluster, plan, precision="bf16", flash_attention=flash, optimizer="adam",
                             profile=default_profile(), framework="megatron")["step_time_s"][0] for flash in (True, False)}
    assert times[False] >= times[True] * (1 - 1e-9)


@pytest.mark.parametrize("framework, fused", [("deepspeed", True), (None, True), ("megatron", False)])
def test_an_assumed_attention_kernel_is_said_and_widens_the_interval(framework, fused):
    assumed = estimate(gpt(framework))
    stated = estimate(gpt(framework, flash=fused))
    other = estimate(gpt(framework, flash=not fused))
    assert assumed.plan["flash_attention"] is fused
    assert assumed.step_time_s == pytest.approx(stated.step_time_s)
    kernel = "fused" if fused else "unfused"
    lines = [line for line in assumed.assumptions["assumed"] if f"attention assumed {kernel}" in line]
    assert len(lines) == 1 and "plan.flash_attention" in lines[0]
    assert not any("attention assumed" in line for line in stated.assumptions.get("assumed", []))
    # the line states the other kernel's change of the step, which is the stated-other estimate's
    change = other.step_time_s / stated.step_time_s - 1.0
    assert f"{change:+.0%}" in lines[0] and (change > 0) is fused
    width = {name: e.interval_80["step_time_high_s"] / e.interval_80["step_time_low_s"]
             for name, e in (("assumed", assumed), ("stated", stated))}
    assert width["assumed"] > width["stated"]
    # centred between the two kernels (a 50/50 unknown), the 80 % interval spans both steps
    low, high = assumed.interval_80["step_time_low_s"], assumed.interval_80["step_time_high_s"]
    assert low < min(stated.step_time_s, other.step_time_s) and max(stated.step_time_s, other.step_time_s) < high
    assert f"attention assumed {kernel}" in assumed.confidence["text"]


def test_a_framework_with_its_own_default_assumes_nothing():
    dle = estimate(gpt("dle-pytorch"))
    unfused = estimate(gpt("dle-pytorch", flash=False))
    assert dle.plan["flash_attention"] is False
    assert dle.step_time_s == pytest.approx(unfused.step_time_s)
    assert not any("attention" in line for line in dle.assumptions.get("assumed", []))
    assert estimate(gpt("composer")).plan["flash_attention"] is True


def test_attention_term_is_the_two_point_mean_and_variance():
    d = np.array([0.0, 0.2, np.nan, 1.0, -0.2])  # < 0: unfused assumed, the other (fused) step shorter
    q = iv.OTHER_KERNEL_PROBABILITY
    np.testing.assert_allclose(iv.attention_variance(d), [0.0, q * (1 - q) * 0.04, 0.0, q * (1 - q), q * (1 - q) * 0.04])
    np.testing.assert_allclose(iv.attention_shift(d), [0.0, -q * 0.2, 0.0, -q, q * 0.2])


def test_validate_reports_the_attention_term_only_where_it_was_assumed():
    rows = shipped_measurements()
    row = rows[rows["id"] == "narayanan2021-001"]
    assert float(row["flash_attention"].iloc[0]) == 0.0
    unstated = row.assign(id="unstated", flash_attention=np.nan)
    fused = row.assign(id="fused", flash_attention=1.0)
    scored = validate(pd.concat([row, unstated, fused], ignore_index=True)).set_index("id")
    column = iv.ATTENTION_COLUMN
    assert scored.loc["narayanan2021-001", column] == 0.0
    assert scored.loc["fused", column] == 0.0
    # unstated on Megatron-LM: assumed unfused (the stated row's prediction), with the fused row's log gap
    assert scored.loc["unstated", "predicted"] == pytest.approx(scored.loc["narayanan2021-001", "predicted"])
    gap = math.log(scored.loc["narayanan2021-001", "predicted"] / scored.loc["fused", "predicted"])
    assert scored.loc["unstated", column] == pytest.approx(gap, rel=1e-6)
    assert gap < 0


def test_no_shipped_training_row_relies_on_an_assumed_attention_kernel():
    rows = shipped_measurements()
    train = rows[rows["kind"] == "train"]
    open_framework = ~train["framework"].isin(list(FRAMEWORK_FLASH_ATTENTION))
    stated = pd.to_numeric(train.get("flash_attention"), errors="coerce").notna()
    ampere_or_newer = train["gpu"].map(lambda name: CATALOG.gpu(name).architecture
                                       not in ("Pascal", "Volta", "Turing"))
    transformer = train["layers"].notna() | train["model"].astype(str).str.contains("bert|gpt|llama|transformer")
    assert not (open_framework & ~stated & ampere_or_newer & transformer).any()


@pytest.mark.parametrize("value", ["yes", 2, 0.5, -1])
def test_a_flash_attention_cell_that_is_not_0_or_1_is_refused_naming_the_column(value):
    rows = shipped_measurements()
    row = rows[rows["id"] == "narayanan2021-001"].assign(flash_attention=value)
    scored = validate(row)
    assert np.isnan(scored["predicted"].iloc[0])
    assert scored["reason"].iloc[0].startswith(f"column flash_attention = {value!r}; allowed: 0 or 1")
