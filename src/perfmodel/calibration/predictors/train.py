"""Predictor of ``train`` rows: the estimator on the row's model, hardware and plan.

Rows that share a model, hardware and precision are evaluated in one vectorized call of
:func:`perfmodel.evaluate.evaluate` (their plans as arrays), which is what makes calibration over
hundreds of training rows affordable.  Plan fields a row leaves empty take the estimator's
defaults (:func:`perfmodel.plans.resolve_plan`), except ``recompute`` and ``zero``, which are
chosen as :func:`perfmodel.estimate.estimate` chooses them (:func:`perfmodel.plans.completions`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.calibration.measurements import SHAPE_COLUMNS
from perfmodel.calibration.validate import register_predictor
from perfmodel.estimate import run_samples
from perfmodel.evaluate import evaluate
from perfmodel.plans import as_arrays, check_plans, completions, pick_fastest_fitting, reasons_from_mask, resolve_plan
from perfmodel.scenario import Plan, RunSpec, WorkloadSpec
from perfmodel.workloads import workload_from_spec

PLAN_COLUMNS = ("precision", "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero")
HARDWARE_COLUMNS = ("gpu", "num_gpus", "gpus_per_node", "intra", "inter")
METRICS = MEASUREMENT_METRICS["train"]


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != ""


def _int_or_none(value):
    return int(float(value)) if _present(value) else None


def _workload_spec(row) -> WorkloadSpec:
    fields = {"model": str(row["model"]).strip()}
    for column in SHAPE_COLUMNS:
        if column in row and _present(row[column]):
            fields[column] = row[column] if column == "ffn_act" else int(float(row[column]))
    return WorkloadSpec(**fields)


@functools.lru_cache(maxsize=512)
def _workload(spec_json: str):
    """One Workload object per distinct spec, so its op tables are built once (see Workload.ops)."""
    return workload_from_spec(WorkloadSpec.model_validate_json(spec_json))


def _plan(row) -> Plan:
    fields = {}
    for column in PLAN_COLUMNS:
        if column in row and _present(row[column]):
            value = row[column]
            fields[column] = str(value).strip() if column in ("precision", "recompute") else int(float(value))
    return Plan(**fields)


def _hardware(row) -> dict:
    hardware = {"gpu": row["gpu"], "num_gpus": _int_or_none(row.get("num_gpus"))}
    for column in ("gpus_per_node",):
        hardware[column] = _int_or_none(row.get(column))
    for column in ("intra", "inter"):
        hardware[column] = str(row[column]).strip() if _present(row.get(column)) else None
    return hardware


def _metric_value(metric: str, result: dict, workload, cluster, row) -> tuple[float, str | None]:
    """The row's metric from an evaluate() result of one plan (or a reason)."""
    if metric == "step_time_s":
        return result["step_time_s"], None
    if metric == "samples_per_s":
        return result["samples_per_s"], None
    if metric in ("tokens_per_s", "tokens_per_s_per_gpu"):
        if not workload.tokens_per_sample:
            return math.nan, f"{workload.name} has no tokens per sample"
        tokens = result["samples_per_s"] * workload.tokens_per_sample
        return (tokens if metric == "tokens_per_s" else tokens / cluster.num_gpus), None
    run = RunSpec(train_samples=row.get("train_samples") if _present(row.get("train_samples")) else None,
                  train_tokens=row.get("train_tokens") if _present(row.get("train_tokens")) else None)
    samples = run_samples(run, workload) if (run.train_samples or run.train_tokens) else None
    if samples is None:
        return math.nan, f"metric {metric} needs train_samples or train_tokens"
    seconds = samples / result["samples_per_s"]
    return (seconds if metric == "time_to_train_s" else seconds * cluster.num_gpus / 3600.0), None


@register_predictor("train")
def predict_train(rows: pd.DataFrame, catalog, profile) -> pd.DataFrame:
    out = pd.DataFrame({"predicted": np.nan, "reason": None, "assumed": None}, index=rows.index)
    out["reason"] = out["reason"].astype(object)
    out["assumed"] = out["assumed"].astype(object)
    groups: dict[tuple, list] = {}
    for index, row in rows.iterrows():
        try:
            if row["metric"] not in METRICS:
                raise ValueError(f"metric {row['metric']!r} is not a train metric; allowed: {', '.join(METRICS)}")
            workload = _workload(_workload_spec(row).model_dump_json())
            cluster = catalog.cluster(**_hardware(row))
            out.at[index, "assumed"] = "; ".join(cluster.assumed) or None  # issue 15: reference fabrics
            plan = resolve_plan(_plan(row), cluster.num_gpus, cluster.gpu, workload.family)
            cluster.gpu.peak(plan["precision"])
        except ValueError as error:
            out.at[index, "reason"] = str(error).splitlines()[0]
            continue
        key = (id(workload), cluster.model_dump_json(), plan["precision"], plan["flash_attention"],
               plan["optimizer"])
        choices = [{**plan, **choice} for choice in completions(_plan(row), workload.family)]
        groups.setdefault(key, []).append((index, row, workload, cluster, choices))
    for members in groups.values():
        _, _, workload, cluster, choices0 = members[0]
        owner = np.concatenate([np.full(len(choices), i) for i, (*_, choices) in enumerate(members)])
        arrays = [as_arrays(choice) for *_, choices in members for choice in choices]
        plans = {field: np.concatenate([a[field] for a in arrays]) for field in arrays[0]}
        mask = check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node)
        valid = mask == 0
        step = np.full(len(owner), np.inf)
        fits = np.zeros(len(owner), dtype=bool)
        result = {}
        if valid.any():
            try:
                result = evaluate(workload, cluster, {k: v[valid] for k, v in plans.items()},
                                  precision=choices0[0]["precision"],
                                  flash_attention=choices0[0]["flash_attention"],
                                  optimizer=choices0[0]["optimizer"], profile=profile)
            except ValueError as error:
                for index, *_ in members:
                    out.at[index, "reason"] = str(error).splitlines()[0]
                continue
            step[valid] = result["step_time_s"]
            fits[valid] = result["memory_fits"].astype(bool)
        position = np.cumsum(valid) - 1
        for i, (index, row, *_) in enumerate(members):
            mine = np.flatnonzero(owner == i)
            best = mine[pick_fastest_fitting(step[mine], fits[mine], valid[mine])]
            if not valid[best]:
                out.at[index, "reason"] = "infeasible plan: " + "; ".join(reasons_from_mask(int(mask[best])))
                continue
            one = {key: values[position[best]] for key, values in result.items()}
            if not fits[best]:
                out.at[index, "reason"] = "infeasible plan: does not fit in GPU memory " \
                    f"({one['memory_total'] / 1e9:.1f} GB needed of {one['memory_capacity'] / 1e9:.1f} GB)"
                continue
            value, reason = _metric_value(row["metric"], one, workload, cluster, row)
            out.at[index, "predicted"] = value
            out.at[index, "reason"] = reason
    return out
