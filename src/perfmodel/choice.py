"""The one rule that picks a training plan: the fastest valid candidate that fits in memory.

``estimate``, ``scaling``, ``rank`` and the calibration's training predictor all call
:func:`choose_plans` (``search`` lists every candidate of the same grid), so ``validate`` scores
exactly the function users call.  The candidates are :func:`perfmodel.plans.enumerate_plans` of
the scenario's plan with context parallelism and interleaving off unless given: every other field
the plan leaves open (tensor and pipeline degrees, micro-batch, recomputation, ZeRO stage) is
chosen.  When no candidate is valid and fits, the documented defaults
(:func:`perfmodel.plans.resolve_plan`) are the plan reported, with the reasons it fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.chain import evaluate
from perfmodel.plans import (PLAN_FIELDS, as_arrays, as_records, check_plans, enumerate_plans,
                             reasons_from_mask, resolve_plan, select, settings)
from perfmodel.scenario import Plan

__all__ = ["Choice", "choose_plans", "candidate_plan"]

# plan fields a choice fixes when the scenario leaves them out (the rest are chosen)
FIXED_WHEN_OPEN = {"cp": 1, "vp": 1}


@dataclass
class Choice:
    """The chosen plan of one scenario: ``plan`` (every field, recompute by name, plus precision,
    flash attention and optimizer), ``chosen`` (the fields the scenario left open and their
    values), ``valid`` (some candidate obeys the plan rules), ``fits`` and ``reasons`` (why not),
    ``arrays`` (the plan as length-1 arrays for :func:`perfmodel.chain.evaluate`) and ``result``
    (the plan's evaluate values as floats; empty for an invalid plan)."""

    plan: dict
    chosen: dict
    valid: bool
    fits: bool
    reasons: list[str] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    result: dict[str, float] = field(default_factory=dict)


def candidate_plan(plan: Plan) -> Plan:
    """The scenario plan whose open fields a choice ranges over (:data:`FIXED_WHEN_OPEN` set)."""
    return plan.model_copy(update={name: getattr(plan, name) or value for name, value in FIXED_WHEN_OPEN.items()})


def choose_plans(workload, cluster, plans: list[Plan], *, profile, data=None) -> list[Choice]:
    """One :class:`Choice` per scenario plan, all on the same workload and cluster; plans that
    share precision, flash attention and optimizer are evaluated in one vectorized call."""
    out: list[Choice | None] = [None] * len(plans)
    groups: dict[tuple, list[int]] = {}
    for i, plan in enumerate(plans):
        fixed = settings(plan, cluster.gpu)
        cluster.gpu.peak(fixed["precision"])  # a precision the GPU lacks is a malformed scenario
        groups.setdefault(tuple(fixed.values()), []).append(i)
    for indices in groups.values():
        fixed = settings(plans[indices[0]], cluster.gpu)
        candidates, owners = [], []
        for i in indices:
            grid = enumerate_plans(candidate_plan(plans[i]), workload, cluster.num_gpus, cluster.gpus_per_node,
                                   fixed["flash_attention"])
            valid = select(grid, check_plans(grid, workload, cluster.num_gpus, cluster.gpus_per_node) == 0)
            candidates.append(valid)
            owners.append(np.full(len(valid["tp"]), i))
        owner = np.concatenate(owners)
        step = np.full(len(owner), np.inf)
        fits = np.zeros(len(owner), dtype=bool)
        if len(owner):
            arrays = {name: np.concatenate([c[name] for c in candidates]) for name in PLAN_FIELDS}
            result = evaluate(workload, cluster, arrays, **fixed, profile=profile, data=data)
            step, fits = result["step_time_s"], result["memory_fits"].astype(bool)
        fallback = []
        for i in indices:
            mine = np.flatnonzero(owner == i)
            if fits[mine].any():
                best = mine[fits[mine]][np.argmin(step[mine][fits[mine]])]
                record = as_records({name: arrays[name][best:best + 1] for name in PLAN_FIELDS})[0]
                out[i] = _choice(plans[i], {**fixed, **record})
                out[i].result = _values(result, best)
            else:
                out[i] = _fallback(plans[i], workload, cluster)
                fallback += [i] if out[i].valid else []
        if fallback:  # the defaults are valid but do not fit: say by how much
            arrays = {name: np.concatenate([out[i].arrays[name] for i in fallback]) for name in PLAN_FIELDS}
            result = evaluate(workload, cluster, arrays, **fixed, profile=profile, data=data)
            for position, i in enumerate(fallback):
                out[i].result = _values(result, position)
                out[i].reasons = [f"does not fit in GPU memory ({out[i].result['memory_total'] / 1e9:.1f} GB "
                                  f"needed of {out[i].result['memory_capacity'] / 1e9:.1f} GB)"]
    return out


def _values(result: dict[str, np.ndarray], index: int) -> dict[str, float]:
    """The numbers of plan ``index`` of an evaluate result."""
    return {key: float(values[index]) for key, values in result.items() if key != "memory_stage"}


def _choice(plan: Plan, chosen_plan: dict) -> Choice:
    open_fields = {name: chosen_plan[name] for name in PLAN_FIELDS if getattr(plan, name) is None}
    return Choice(plan=chosen_plan, chosen=open_fields, valid=True, fits=True, arrays=as_arrays(chosen_plan))


def _fallback(plan: Plan, workload, cluster) -> Choice:
    """The documented defaults, with why they fail (rules broken; else: does not fit)."""
    default = resolve_plan(plan, cluster.num_gpus, cluster.gpu, workload.family)
    mask = int(check_plans(as_arrays(default), workload, cluster.num_gpus, cluster.gpus_per_node)[0])
    reasons = reasons_from_mask(mask)
    return Choice(plan=default, chosen={}, valid=mask == 0, fits=False, reasons=reasons,
                  arrays=as_arrays(default))
