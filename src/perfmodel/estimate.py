"""Scenario -> Estimate: one training job explained.

``estimate(scenario)`` resolves the workload and hardware, fills the plan's open fields with the
documented defaults (:func:`perfmodel.plans.resolve_plan`), checks the plan, and runs the one
formula path :func:`perfmodel.evaluate.evaluate` on it.  An infeasible scenario (does not fit,
degrees that do not divide the model, GPU count mismatch) is an answer with ``feasible: false``
and its reasons, not an exception; a malformed one raises a ``ValueError`` naming the field.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from perfmodel.evaluate import BOTTLENECK_OF, BREAKDOWN, evaluate
from perfmodel.hardware.catalog import Catalog, load_catalog
from perfmodel.plans import (as_arrays, check_plans, completions, pick_fastest_fitting, reasons_from_mask,
                             resolve_plan)
from perfmodel.profile import CalibrationProfile, default_profile, scale_by_ratio
from perfmodel.scenario import Scenario, load_scenario
from perfmodel.workloads import workload_from_spec

__all__ = ["Estimate", "estimate", "resolve", "run_samples", "bottleneck_of"]


class Estimate(BaseModel):
    """The answer for one scenario.

    Times in seconds, memory in bytes, ``tflops_per_gpu`` in TFLOP/s (model FLOPs, PaLM appendix
    B).  When the scenario is infeasible, ``feasible`` is false, ``reasons`` says why, and the time
    fields are null.  ``breakdown_s`` holds exposed times that add up to ``step_time_s``.
    """

    feasible: bool
    reasons: list[str] = Field(default_factory=list)
    workload: str
    hardware: dict[str, Any]
    plan: dict[str, Any]
    step_time_s: float | None = None
    breakdown_s: dict[str, float] = Field(default_factory=dict)
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    gpu_utilization: float | None = None
    bottleneck: str | None = None
    memory: dict[str, Any] = Field(default_factory=dict)
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    interval_80: dict[str, float] | None = Field(
        None, description="80 % prediction interval from the profile's cross-validated residuals: "
                          "step_time_low_s, step_time_high_s, samples_per_s_low, samples_per_s_high")
    assumptions: dict[str, Any] = Field(default_factory=dict)


def bottleneck_of(breakdown: dict[str, float], memory_bound_share: float = 0.0) -> str:
    """The category (compute, memory bandwidth, TP communication, pipeline bubble, ...) with the
    largest share of the step; GPU work counts as "memory bandwidth" when most of it is spent in
    ops that are memory-bound on the roofline (``memory_bound_share`` > 1/2)."""
    totals: dict[str, float] = {}
    for name, seconds in breakdown.items():
        category = BOTTLENECK_OF[name]
        if category == "compute" and memory_bound_share > 0.5:
            category = "memory bandwidth"
        totals[category] = totals.get(category, 0.0) + seconds
    return max(totals, key=totals.get)


def run_samples(run, workload) -> float | None:
    """Samples in the whole run: train_samples, train_tokens / tokens per sample, or epochs."""
    if run is None:
        return None
    if run.train_samples is not None:
        return run.train_samples
    if run.train_tokens is not None:
        if not workload.tokens_per_sample:
            raise ValueError(f"run.train_tokens is given but {workload.name} has no tokens per sample; "
                             "use run.train_samples or run.epochs + run.dataset_samples")
        return run.train_tokens / workload.tokens_per_sample
    if run.epochs is not None:
        return run.epochs * run.dataset_samples
    return None


def resolve(scenario: Scenario | str | dict, catalog: Catalog | None = None):
    """(scenario, workload, cluster) with names looked up in the zoo and the catalog."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    catalog = catalog or load_catalog()
    workload = workload_from_spec(scenario.workload)
    cluster = catalog.cluster(**scenario.hardware.model_dump())
    return scenario, workload, cluster


def hardware_summary(cluster) -> dict[str, Any]:
    return {
        "gpu": cluster.gpu.name, "num_gpus": cluster.num_gpus, "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node, "intra": cluster.intra.name, "fabric": cluster.fabric,
        "inter": f"{cluster.nics_per_node} x {cluster.nic.name}" if cluster.nic else None,
        "instance": f"{cluster.instance.provider}/{cluster.instance.name}" if cluster.instance else None,
    }


def estimate(scenario: Scenario | str | dict, catalog: Catalog | None = None,
             profile: CalibrationProfile | None = None) -> Estimate:
    """Estimate one scenario (a :class:`Scenario`, a file path, or a dict)."""
    scenario, workload, cluster = resolve(scenario, catalog)
    profile = profile or default_profile()
    searched = {}
    if any(getattr(scenario.plan, field) is None for field in SEARCHED_FIELDS):
        scenario, searched = _fill_by_search(scenario, catalog, profile)
    plan = resolve_plan(scenario.plan, cluster.num_gpus, cluster.gpu, workload.family)
    cluster.gpu.peak(plan["precision"])  # a precision the GPU lacks is a malformed scenario
    base = {"workload": workload.name, "hardware": hardware_summary(cluster), "plan": plan,
            "assumptions": {"profile": profile.provenance.get("name", "defaults"),
                            "flash_attention": plan["flash_attention"]}}
    if cluster.assumed:  # hardware fields filled from a reference (issue 15: reference fabrics)
        base["assumptions"]["assumed"] = list(cluster.assumed)
    choices = completions(scenario.plan, workload.family)
    candidates = [{**plan, **choice} for choice in choices]
    arrays = [as_arrays(candidate) for candidate in candidates]
    plans = {field: np.concatenate([a[field] for a in arrays]) for field in arrays[0]}
    mask = check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node)
    valid = mask == 0
    if not valid.any():
        return Estimate(feasible=False, reasons=reasons_from_mask(int(mask[0])), **base)
    result = evaluate(workload, cluster, {k: v[valid] for k, v in plans.items()},
                      precision=plan["precision"], flash_attention=plan["flash_attention"],
                      optimizer=plan["optimizer"], profile=profile, data=scenario.data, memory_reasons=True)
    index = pick_fastest_fitting(result["step_time_s"], result["memory_fits"].astype(bool),
                                 np.ones(int(valid.sum()), dtype=bool))
    chosen = candidates[int(np.flatnonzero(valid)[index])]
    base["plan"] = chosen
    if searched:
        base["assumptions"]["chosen_by_search"] = searched
    elif len(choices) > 1:
        base["assumptions"]["chosen_by_estimator"] = {
            key: chosen[key] for key in ("recompute", "zero") if getattr(scenario.plan, key) is None}
    return from_arrays(result, index, workload, cluster, scenario.run, profile, base)


# plan fields that estimate() lets the search choose when a scenario leaves them out
SEARCHED_FIELDS = ("tp", "pp", "micro_batch")


def _fill_by_search(scenario: Scenario, catalog, profile) -> tuple[Scenario, dict]:
    """The scenario with its open tp / pp / micro-batch (and recompute / ZeRO) set to the fastest
    plan that fits, context parallelism and interleaving off unless given; unchanged (and {}) when
    no plan fits, so the defaults then explain why."""
    from perfmodel.search import search

    plan = scenario.plan.model_copy(update={"cp": scenario.plan.cp or 1, "vp": scenario.plan.vp or 1})
    frame = search(scenario.model_copy(update={"plan": plan}), catalog, profile, top=1)
    if not len(frame):
        return scenario, {}
    best = frame.iloc[0]
    fields = [f for f in SEARCHED_FIELDS + ("recompute", "zero") if getattr(plan, f) is None]
    chosen = {f: (str(best[f]) if f == "recompute" else int(best[f])) for f in fields}
    chosen["dp"] = int(best["dp"])
    return scenario.model_copy(update={"plan": plan.model_copy(update=chosen)}), chosen


def from_arrays(result: dict[str, np.ndarray], index: int, workload, cluster, run, profile,
                base: dict[str, Any]) -> Estimate:
    """The Estimate of plan ``index`` of an :func:`evaluate` result."""
    value = {key: float(array[index]) for key, array in result.items()
             if key not in ("memory_stage", "memory_reasons_text")}
    memory = {key[len("memory_"):]: value[key] for key in value if key.startswith("memory_")}
    memory["fits"] = bool(memory["fits"])
    memory["stage"] = str(result["memory_stage"][index])
    memory["reasons"] = list(result["memory_reasons_text"][index]) if "memory_reasons_text" in result else []
    breakdown = {name: value[f"{name}_s"] for name in BREAKDOWN}
    step = value["step_time_s"]
    estimate = Estimate(
        feasible=memory["fits"],
        reasons=memory["reasons"],
        step_time_s=step,
        breakdown_s=breakdown,
        samples_per_s=value["samples_per_s"],
        tokens_per_s=value["tokens_per_s"] if workload.tokens_per_sample else None,
        tflops_per_gpu=value["tflops_per_gpu"],
        mfu=value["mfu"],
        hfu=value["hfu"],
        gpu_utilization=value["gpu_utilization"],
        bottleneck=bottleneck_of(breakdown, value["memory_bound_share"]),
        memory=memory,
        **base,
    )
    bounds = profile.interval_ratio("train", cluster.gpu.architecture)
    if bounds is not None:
        low, high = scale_by_ratio("step_time_s", step, bounds)
        estimate.interval_80 = {"step_time_low_s": low, "step_time_high_s": high,
                                "samples_per_s_low": value["samples_per_s"] * bounds[0],
                                "samples_per_s_high": value["samples_per_s"] * bounds[1]}
    samples = run_samples(run, workload)
    if samples is not None:
        estimate.time_to_train_s = samples / value["samples_per_s"]
        estimate.gpu_hours = estimate.time_to_train_s * cluster.num_gpus / 3600.0
    return estimate
