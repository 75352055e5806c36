"""Sequence parallelism when a plan does not say: the framework's default where it has one
(Megatron-LM: off, its --sequence-parallel is opt-in), listed as an assumption; on whenever tp > 1
otherwise."""

import pandas as pd
import pytest

from perfmodel import estimate
from perfmodel.calibration.measurements import shipped_measurements
from perfmodel.calibration.predictors.train import scenario_of
from perfmodel.plans import default_sequence_parallel, resolve_plan, sequence_parallel_assumed
from perfmodel.scenario import Plan
from perfmodel.vocabulary import FRAMEWORK_SEQUENCE_PARALLEL, FRAMEWORKS
from scenario_helpers import tp8_gpt


def gpt(framework=None, tp=8, sequence_parallel=None):
    stated = {} if sequence_parallel is None else {"sequence_parallel": sequence_parallel}
    return tp8_gpt(framework, 2048, tp, **stated)


def assumed_lines(result):
    return [line for line in result.assumptions.get("assumed", []) if "sequence parallelism" in line]


def test_only_known_frameworks_have_a_default():
    assert set(FRAMEWORK_SEQUENCE_PARALLEL) <= set(FRAMEWORKS)
    assert FRAMEWORK_SEQUENCE_PARALLEL == {"megatron": False, "megatron-2019": False}


@pytest.mark.parametrize("framework", FRAMEWORKS + (None,))
def test_a_stated_value_wins_and_an_open_one_takes_the_framework_default(framework):
    for stated in (True, False):
        assert default_sequence_parallel(Plan(sequence_parallel=stated), framework) is stated
        assert not sequence_parallel_assumed(Plan(sequence_parallel=stated), framework, tp=8)
    assert default_sequence_parallel(Plan(), framework) is FRAMEWORK_SEQUENCE_PARALLEL.get(framework)
    assert sequence_parallel_assumed(Plan(), framework, tp=8) is (framework in FRAMEWORK_SEQUENCE_PARALLEL)
    assert not sequence_parallel_assumed(Plan(), framework, tp=1)  # nothing to shard without tensor parallelism
    resolved = resolve_plan(Plan(tp=4), 8, None, "transformer", framework)
    assert resolved["sequence_parallel"] is FRAMEWORK_SEQUENCE_PARALLEL.get(framework, True)


def test_megatron_runs_without_sequence_parallelism_unless_told_and_says_so():
    open_plan = estimate(gpt("megatron"))
    assert open_plan.plan["sequence_parallel"] == 0
    (line,) = assumed_lines(open_plan)
    assert "'megatron'" in line and "assumed off" in line and "plan.sequence_parallel" in line
    stated = estimate(gpt("megatron", sequence_parallel=True))
    assert stated.plan["sequence_parallel"] == 1 and not assumed_lines(stated)
    # without it every tensor-parallel rank keeps the norm inputs, dropout masks and residuals of all
    # tokens (Korthikanti et al. 2022, Sec. 4.2.2): more activation memory for the same plan
    assert open_plan.memory["activations"] > stated.memory["activations"]
    assert estimate(gpt("megatron", sequence_parallel=False)).memory["activations"] == open_plan.memory["activations"]


@pytest.mark.parametrize("framework", [None, "nemo", "torchtitan"])
def test_other_frameworks_keep_it_on_with_tensor_parallelism_and_assume_nothing(framework):
    result = estimate(gpt(framework))
    assert result.plan["sequence_parallel"] == 1 and not assumed_lines(result)
    assert not assumed_lines(estimate(gpt("megatron", tp=1)))


def test_shipped_megatron_rows_state_what_their_sources_ran():
    rows = shipped_measurements()
    rows = rows[rows["id"].str.startswith(("narayanan2021", "korthikanti2022"))]
    for _, row in rows.iterrows():
        plan = scenario_of(row).plan
        if "SP + selective" in row["notes"]:
            assert plan.sequence_parallel is True, row["id"]
        elif int(row["tp"]) > 1 and not pd.isna(row.get("sequence_parallel")):
            assert plan.sequence_parallel is False, row["id"]
    assert rows["sequence_parallel"].notna().sum() == 14
