"""Predictor of ``train`` rows: what :func:`perfmodel.estimate` says of the row's scenario.

Each row is read as a :class:`~perfmodel.scenario.Scenario` (:func:`scenario_of`: its model,
hardware, plan and run size); the plan fields it leaves empty are chosen by
:func:`perfmodel.choice.choose_plans`, the rule ``estimate`` uses, so ``validate`` scores the
function users call, among every plan that fits in memory at all: the run happened, so its plan
fitted (:data:`perfmodel.plans.MEASURED_RUN_HEADROOM`).  Rows that share a model and hardware are chosen in one vectorized call,
which is what makes calibration over hundreds of training rows affordable.  A row's
``framework`` (:data:`perfmodel.vocabulary.FRAMEWORKS`) selects its framework traits; a row without
one, or with one the profile has no fitted value for, gets the pooled value and says so in
``assumed``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from perfmodel.calibration.intervals import TERM_COLUMNS
from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.calibration.row_workload import (present, row_channels_last, row_intra, row_model, workload_of_spec,
                                                workload_spec)
from perfmodel.choice import choose_plans
from perfmodel.estimator import framework_assumption
from perfmodel.job import framework_spec, run_totals
from perfmodel.plans import MEASURED_RUN_HEADROOM, channels_last_assumed, check_layout, settings
from perfmodel.scenario import HardwareSpec, Plan, RunSpec, Scenario

PLAN_COLUMNS = ("precision", "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero")
# plan fields beyond the measurement format's that a row may carry as extra columns
CHOSEN_COLUMNS = ("recompute_every", "sequence_parallel", "offload", "flash_attention", "channels_last")
METRICS = MEASUREMENT_METRICS["train"]


def _int_or_none(value):
    return int(float(value)) if present(value) else None


FLAG_VALUES = {"0": False, "1": True, "false": False, "true": True}  # what a 0/1 plan column may hold


def _flag(column: str, value) -> bool:
    """A 0/1 plan column (``sequence_parallel``, ``flash_attention``, ``channels_last``); anything else
    is refused."""
    text = str(value).strip().lower()
    text = text[:-2] if text.endswith(".0") else text
    if text not in FLAG_VALUES:
        raise ValueError(f"column {column} = {value!r}; allowed: 0 or 1 (false or true), or empty for the default")
    return FLAG_VALUES[text]


def _whole(column: str, value) -> int:
    """A whole-number plan column; a fraction or text is refused rather than truncated."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number.is_integer():
        raise ValueError(f"column {column} = {value!r}; allowed: a whole number")
    return int(number)


def _plan(row) -> Plan:
    fields = {}
    for column in PLAN_COLUMNS + CHOSEN_COLUMNS:
        if column in row and present(row[column]):
            value = row[column]
            if column in ("precision", "recompute", "offload"):
                fields[column] = str(value).strip()
            elif column in ("sequence_parallel", "flash_attention", "channels_last"):
                fields[column] = _flag(column, value)
            else:
                fields[column] = _whole(column, value)
    return Plan(**fields, memory_headroom=MEASURED_RUN_HEADROOM)


def _hardware(row) -> dict:
    hardware = {"gpu": row["gpu"], "num_gpus": _int_or_none(row.get("num_gpus"))}
    for column in ("gpus_per_node",):
        hardware[column] = _int_or_none(row.get(column))
    for column in ("intra", "inter"):
        hardware[column] = str(row[column]).strip() if present(row.get(column)) else None
    return hardware


def scenario_of(row) -> Scenario:
    """The scenario a ``train`` measurement row describes (its model, hardware, plan and run size),
    its CNN layout as its harness ran it where the row does not say (:func:`row_channels_last`)."""
    run = {column: row.get(column) for column in ("train_samples", "train_tokens") if present(row.get(column))}
    framework = str(row["framework"]).strip() if present(row.get("framework")) else None
    plan = _plan(row)
    layout = row_channels_last(row)[0]
    if layout is not None:
        plan = plan.model_copy(update={"channels_last": layout})
    return Scenario(workload=workload_spec(row), hardware=HardwareSpec(**_hardware(row)), plan=plan,
                    framework=framework, run=RunSpec(**run) if run else None)


def harness_link(row, scenario: Scenario, catalog) -> tuple[Scenario, str | None]:
    """The scenario with its intra-node link as the row's harness ran it (:func:`row_intra`), and
    the assumed-input line (None when unchanged)."""
    intra, why = row_intra(row, catalog)
    if why is None:
        return scenario, None
    return scenario.model_copy(update={"hardware": scenario.hardware.model_copy(update={"intra": intra})}), why


def _metric_value(metric: str, result: dict, workload, cluster, run) -> tuple[float, str | None]:
    """The row's metric from the chosen plan's :func:`perfmodel.chain.evaluate` values (or a reason)."""
    if metric == "step_time_s":
        return result["step_time_s"], None
    if metric == "samples_per_s":
        return result["samples_per_s"], None
    if metric in ("tokens_per_s", "tokens_per_s_per_gpu"):
        if not workload.tokens_per_sample:
            return math.nan, f"{workload.name} has no tokens per sample"
        tokens = result["samples_per_s"] * workload.tokens_per_sample
        return (tokens if metric == "tokens_per_s" else tokens / cluster.num_gpus), None
    totals = run_totals(run, workload, result["samples_per_s"], cluster.num_gpus)
    if totals is None:
        return math.nan, f"metric {metric} needs train_samples or train_tokens"
    return totals[metric], None


def _choices(rows: pd.DataFrame, catalog, profile, out: pd.DataFrame):
    """(index, row, scenario, workload, cluster, choice) of every row that resolves; the reason of
    each row that does not goes to ``out``.  Rows sharing a model and hardware are chosen in one call."""
    groups: dict[tuple, list] = {}
    pooled: dict[str | None, bool] = {}  # framework -> whether its traits are pooled
    for index, row in rows.iterrows():
        try:
            if row["metric"] not in METRICS:
                raise ValueError(f"metric {row['metric']!r} is not a train metric; allowed: {', '.join(METRICS)}")
            scenario, linked = harness_link(row, scenario_of(row), catalog)
            workload = workload_of_spec(scenario.workload.model_dump_json())
            cluster = catalog.cluster(**scenario.hardware.model_dump())
            assumed = [*cluster.gpu.assumed, *cluster.assumed]
            assumed += [line for line in (row_model(row)[1], linked, row_channels_last(row)[1]) if line]
            spec, binned = framework_spec(scenario.workload, workload, scenario.framework)
            if binned:
                assumed.append(binned)
                workload = workload_of_spec(spec.model_dump_json())
            if scenario.framework not in pooled:
                pooled[scenario.framework] = profile.framework_pooled(scenario.framework)
            if pooled[scenario.framework]:
                assumed.append(framework_assumption(scenario.framework))
            check_layout(scenario.plan, workload)  # per row: a group's choice would fail for all its rows
            fixed = settings(scenario.plan, cluster.gpu, scenario.framework)
            if channels_last_assumed(scenario.plan, scenario.framework, workload.family, fixed["precision"]):
                assumed.append(f"channels_last = {int(fixed['channels_last'])}: the layout is not stated and "
                               f"{scenario.framework or 'no framework'} has no recipe for it")
            out.at[index, "assumed"] = "; ".join(assumed) or None
            cluster.gpu.peak(fixed["precision"])
        except ValueError as error:
            out.at[index, "reason"] = str(error).splitlines()[0]
            continue
        key = (id(workload), cluster.model_dump_json(), scenario.framework)
        groups.setdefault(key, []).append((index, row, scenario, workload, cluster))
    for (_, _, framework), members in groups.items():
        _, _, _, workload, cluster = members[0]
        try:
            choices = choose_plans(workload, cluster, [scenario.plan for _, _, scenario, *_ in members],
                                   profile=profile, framework=framework)
        except ValueError as error:
            for index, *_ in members:
                out.at[index, "reason"] = str(error).splitlines()[0]
            continue
        for member, choice in zip(members, choices):
            yield (*member, choice)


def _frame(rows: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({"predicted": np.nan, "reason": None, "assumed": None,
                        **{column: np.nan for column in TERM_COLUMNS}}, index=rows.index)
    out["reason"] = out["reason"].astype(object)
    out["assumed"] = out["assumed"].astype(object)
    return out


def predict_train(rows: pd.DataFrame, catalog, profile) -> pd.DataFrame:
    """The metric of each row's plan.  A measured run did fit in memory, so a valid plan that the
    memory model says does not fit is still timed, and the disagreement is listed in ``assumed``
    (the memory model's error is its own finding, not a reason to skip scoring the time model);
    a plan that breaks the plan rules gets a reason."""
    out = _frame(rows)
    for index, row, scenario, workload, cluster, choice in _choices(rows, catalog, profile, out):
        if not choice.valid or not choice.result:
            out.at[index, "reason"] = "infeasible plan: " + "; ".join(choice.reasons)
            continue
        if scenario.plan.micro_batch is None and scenario.plan.global_batch is None:
            noted = (f"batch not stated: micro-batch {choice.plan['micro_batch']} per GPU, the highest throughput "
                     "that fits in memory")
            out.at[index, "assumed"] = "; ".join(filter(None, [out.at[index, "assumed"], noted]))
        if not choice.fits:
            noted = f"fits in GPU memory, as measured (the memory model: {'; '.join(choice.reasons)})"
            out.at[index, "assumed"] = "; ".join(filter(None, [out.at[index, "assumed"], noted]))
        value, reason = _metric_value(row["metric"], choice.result, workload, cluster, scenario.run)
        out.at[index, "predicted"] = value
        out.at[index, "reason"] = reason
        for column in TERM_COLUMNS:
            out.at[index, column] = choice.result[column]
    return out
