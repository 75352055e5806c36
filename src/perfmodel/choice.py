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
from perfmodel.job import resolve
from perfmodel.plans import (PLAN_FIELDS, as_arrays, as_records, check_plans, enumerate_plans,
                             reasons_from_mask, resolve_plan, select, settings)
from perfmodel.profile import default_profile
from perfmodel.scenario import Plan

__all__ = ["Choice", "choose_plan", "choose_plans", "candidate_plan"]

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


def choose_plan(scenario, catalog=None, profile=None) -> Choice:
    """The :class:`Choice` for one scenario (a Scenario, a file path or a dict)."""
    scenario, workload, cluster = resolve(scenario, catalog)
    return choose_plans(workload, cluster, [scenario.plan], profile=profile or default_profile(),
                        data=scenario.data, framework=scenario.framework)[0]


def choose_plans(workload, cluster, plans: list[Plan], *, profile, data=None, framework=None) -> list[Choice]:
    """One :class:`Choice` per scenario plan, all on the same workload, cluster and ``framework``
    (:data:`perfmodel.vocabulary.FRAMEWORKS`, None = pooled); plans that share precision, flash
    attention and optimizer are evaluated in one vectorized call."""
    groups: dict[tuple, list[int]] = {}
    for i, plan in enumerate(plans):
        fixed = settings(plan, cluster.gpu)
        cluster.gpu.peak(fixed["precision"])  # a precision the GPU lacks is a malformed scenario
        groups.setdefault(tuple(fixed.items()), []).append(i)
    out: dict[int, Choice] = {}
    for fixed, indices in groups.items():
        chosen = _choose_group(workload, cluster, [plans[i] for i in indices], dict(fixed), profile, data,
                               framework)
        out.update(zip(indices, chosen))
    return [out[i] for i in range(len(plans))]


def _choose_group(workload, cluster, plans: list[Plan], fixed: dict, profile, data, framework) -> list[Choice]:
    """The choices of plans that share the settings ``fixed``: all their candidates in one pass."""
    candidates = []
    for plan in plans:
        grid = enumerate_plans(candidate_plan(plan), workload, cluster.num_gpus, cluster.gpus_per_node,
                               fixed["flash_attention"])
        candidates.append(select(grid, check_plans(grid, workload, cluster.num_gpus, cluster.gpus_per_node) == 0))
    owner = np.concatenate([np.full(len(c["tp"]), i) for i, c in enumerate(candidates)])
    arrays = {name: np.concatenate([c[name] for c in candidates]) for name in PLAN_FIELDS}
    result = (evaluate(workload, cluster, arrays, **fixed, profile=profile, data=data, framework=framework)
              if len(owner) else {})
    choices = []
    for i, plan in enumerate(plans):
        mine = np.flatnonzero(owner == i)
        fitting = mine[result["memory_fits"][mine].astype(bool)] if len(mine) else mine
        if len(fitting):
            best = int(fitting[np.argmin(result["step_time_s"][fitting])])
            record = as_records({name: values[best:best + 1] for name, values in arrays.items()})[0]
            choices.append(_chosen(plan, {**fixed, **record}, _values(result, best)))
        else:
            choices.append(_fallback(plan, workload, cluster))
    _explain_misfits([c for c in choices if c.valid and not c.fits], workload, cluster, fixed, profile, data,
                     framework)
    return choices


def _explain_misfits(choices: list[Choice], workload, cluster, fixed: dict, profile, data, framework) -> None:
    """Valid default plans that do not fit: their values and by how much they miss (in place)."""
    if not choices:
        return
    arrays = {name: np.concatenate([choice.arrays[name] for choice in choices]) for name in PLAN_FIELDS}
    result = evaluate(workload, cluster, arrays, **fixed, profile=profile, data=data, framework=framework)
    for position, choice in enumerate(choices):
        choice.result = _values(result, position)
        choice.reasons = [f"does not fit in GPU memory ({choice.result['memory_total'] / 1e9:.1f} GB needed "
                          f"of {choice.result['memory_capacity'] / 1e9:.1f} GB)"]


def _values(result: dict[str, np.ndarray], index: int) -> dict[str, float]:
    """The numbers of plan ``index`` of an evaluate result."""
    return {key: float(values[index]) for key, values in result.items() if key != "memory_stage"}


def _chosen(plan: Plan, chosen_plan: dict, result: dict[str, float]) -> Choice:
    open_fields = {name: chosen_plan[name] for name in PLAN_FIELDS if getattr(plan, name) is None}
    return Choice(plan=chosen_plan, chosen=open_fields, valid=True, fits=True, arrays=as_arrays(chosen_plan),
                  result=result)


def _fallback(plan: Plan, workload, cluster) -> Choice:
    """The documented defaults, with why they fail (rules broken; else: does not fit)."""
    default = resolve_plan(plan, cluster.num_gpus, cluster.gpu, workload.family)
    mask = int(check_plans(as_arrays(default), workload, cluster.num_gpus, cluster.gpus_per_node)[0])
    reasons = reasons_from_mask(mask)
    return Choice(plan=default, chosen={}, valid=mask == 0, fits=False, reasons=reasons,
                  arrays=as_arrays(default))
