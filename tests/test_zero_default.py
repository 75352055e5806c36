"""The ZeRO stage when a plan does not say: the framework's default where it has one (no sharding
for Megatron-LM and the DeepLearningExamples stacks, FULL_SHARD for PyTorch FSDP and torchtitan),
listed as an assumption; chosen with the rest of the plan otherwise."""

import pytest

from perfmodel import estimate
from perfmodel.calibration.measurements import shipped_measurements
from perfmodel.calibration.predictors.train import scenario_of
from perfmodel.plans import default_zero, resolve_plan, zero_assumed
from perfmodel.scenario import Plan, ScenarioError
from perfmodel.vocabulary import FRAMEWORK_LACKS, FRAMEWORK_ZERO, FRAMEWORKS
from scenario_helpers import make_scenario


def bert(framework=None, num_gpus=8, **plan):
    scenario = make_scenario("bert-large", "A100-SXM4-80GB", num_gpus, micro_batch=32, **plan)
    if framework is not None:
        scenario["framework"] = framework
    return scenario


def assumed_lines(result):
    return [line for line in result.assumptions.get("assumed", []) if "ZeRO" in line]


def test_only_known_frameworks_have_a_default():
    assert set(FRAMEWORK_ZERO) <= set(FRAMEWORKS)
    assert set(FRAMEWORK_ZERO.values()) <= {0, 3}


@pytest.mark.parametrize("framework", FRAMEWORKS + (None,))
def test_a_stated_stage_wins_and_an_open_one_takes_the_framework_default(framework):
    for stage in (0, 1, 2, 3):
        assert default_zero(Plan(zero=stage), framework) == stage
        assert not zero_assumed(Plan(zero=stage), framework, dp=8)
    assert default_zero(Plan(), framework) == FRAMEWORK_ZERO.get(framework)
    assert zero_assumed(Plan(), framework, dp=8) is (framework in FRAMEWORK_ZERO)
    assert not zero_assumed(Plan(), framework, dp=1)  # nothing to shard without data parallelism
    assert resolve_plan(Plan(), 8, None, "transformer", framework)["zero"] == FRAMEWORK_ZERO.get(framework, 0)


@pytest.mark.parametrize("framework", [name for name in FRAMEWORK_ZERO if "zero" not in FRAMEWORK_LACKS.get(name, {})])
def test_an_estimate_runs_the_framework_default_and_says_so(framework):
    result = estimate(bert(framework))
    assert result.plan["zero"] == FRAMEWORK_ZERO[framework]
    (line,) = assumed_lines(result)
    assert f"'{framework}'" in line and f"ZeRO stage {FRAMEWORK_ZERO[framework]} assumed" in line
    assert "plan.zero" in line
    stated = estimate(bert(framework, zero=1))
    assert stated.plan["zero"] == 1 and not assumed_lines(stated)
    assert not assumed_lines(estimate(bert(framework, num_gpus=1)))


def test_without_a_default_the_stage_is_chosen_and_nothing_is_assumed():
    result = estimate(bert("deepspeed"))
    assert "zero" in result.assumptions["chosen_by_search"] and not assumed_lines(result)


def test_data_parallel_adam_without_sharding_keeps_the_whole_optimizer_state():
    """Mixed-precision Adam keeps 12 bytes per parameter of optimizer state (Rajbhandari et al.
    2020, Sec. 3.1); ZeRO-1 splits it over the data-parallel ranks."""
    whole = estimate(bert("dle-pytorch"))
    sharded = estimate(bert("dle-pytorch", zero=1))
    assert whole.memory["optimizer"] == pytest.approx(8 * sharded.memory["optimizer"])


def test_shipped_megatron_rows_state_no_sharding():
    rows = shipped_measurements()
    rows = rows[rows["id"].str.startswith("narayanan2021") & (rows["framework"] == "megatron")]
    assert len(rows) == 9
    assert all(scenario_of(row).plan.zero == 0 for _, row in rows.iterrows())


def test_a_framework_without_zero_runs_its_default_and_refuses_a_stated_stage():
    """Megatron-LM of 2019 had no sharded optimizer (vocabulary.FRAMEWORK_LACKS): its default,
    ZeRO 0, runs and is said; a stated ZeRO-1 is refused with the field and the allowed value."""
    result = estimate(bert("megatron-2019"))
    assert result.plan["zero"] == 0
    (line,) = assumed_lines(result)
    assert "'megatron-2019'" in line and "ZeRO stage 0 assumed" in line
    with pytest.raises(ScenarioError, match=r"plan.zero = 1: framework 'megatron-2019' has no sharded optimizer"):
        estimate(bert("megatron-2019", zero=1))


@pytest.mark.parametrize("lacking", [name for name in FRAMEWORKS if name in FRAMEWORK_LACKS])
def test_choice_and_search_never_propose_what_the_framework_lacks(lacking):
    """A plan left open is chosen and searched within the framework's code: Megatron-LM of 2019
    on 16 V100s gets no pipeline, interleaving, context or sequence parallelism, FlashAttention or
    ZeRO, though the same job under today's Megatron-LM is searched over them."""
    from perfmodel.choice import choose_plan
    from perfmodel.plan_search import search

    def scenario(framework):
        return {"workload": {"model": "gpt3-1.3b"}, "framework": framework,
                "hardware": {"gpu": "V100-SXM3-32GB", "gpus_per_node": 8, "nodes": 2, "inter": "4 x ib-edr"},
                "plan": {"precision": "fp16", "global_batch": 64}}

    lacks = FRAMEWORK_LACKS[lacking]
    plans = search(scenario(lacking), top=None)
    chosen = choose_plan(scenario(lacking)).plan
    assert len(plans) > 0 and chosen is not None
    for field, (allowed, _) in lacks.items():
        if field == "flash_attention":
            continue  # one setting of the whole search, not a plan column
        assert set(plans[field].astype(type(allowed))) == {allowed}, field
        assert type(allowed)(chosen[field]) == allowed, field
    today = search(scenario("megatron"), top=None)
    assert today["pp"].max() > 1 and today["zero"].max() > 0
