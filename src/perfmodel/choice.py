"""The one rule that picks a training plan: among the valid candidates that fit in memory and
leave the memory headroom free, the most conventional of those the model cannot tell apart from
the fastest.

``estimate``, ``scaling``, ``rank`` and the calibration's training predictor all call
:func:`choose_plans` (``search`` lists every candidate of the same grid), so ``validate`` scores
exactly the function users call.  The candidates are :func:`perfmodel.plans.enumerate_plans` of
the scenario's plan with context parallelism and interleaving off unless given: every other field
the plan leaves open (tensor and pipeline degrees, micro-batch, recomputation, ZeRO stage) is
chosen.  When no candidate is valid and fits, the documented defaults
(:func:`perfmodel.plans.resolve_plan`) are the plan reported, with the reasons it fails.

The rule, in full (:func:`pick`):

1. Candidates must fit in GPU memory leaving ``plan.memory_headroom`` of it free
   (:func:`perfmodel.plans.within_headroom`, default
   :data:`perfmodel.plans.DEFAULT_MEMORY_HEADROOM`; a measured run's row none,
   :data:`perfmodel.plans.MEASURED_RUN_HEADROOM`).  When none does but some fit at all (a plan
   the user fixed completely, or a tight one), step 2 runs on those and the choice carries a
   warning: the plan is estimated, not refused.
2. Plans whose time per sample (step time / global batch; the step time itself when every
   candidate trains the same global batch) is within :func:`tie_band` of the fastest (log ratio)
   are ties: the model cannot order them.  Among the ties the first of :func:`perfmodel.plans.conventional_order`
   (no offload, fewer parallel dimensions, TP within a node, no CP at short sequences, the lowest
   ZeRO stage, the least recomputation, the largest micro-batch, no interleaving) is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfmodel.calibration.intervals import ATTENTION_COLUMN, time_bounds
from perfmodel.chain import evaluate
from perfmodel.job import resolve
from perfmodel.plans import (DEFAULT_MEMORY_HEADROOM, PLAN_FIELDS, PLAN_TIE_FRACTION, as_arrays, as_records,
                             check_plans, conventional_order, default_sequence_parallel, default_zero, enumerate_plans,
                             flash_attention_assumed, memory_headroom, reasons_from_mask, resolve_plan, select,
                             settings, within_framework, within_headroom)
from perfmodel.profile import default_profile
from perfmodel.scenario import Plan
from perfmodel.units import format_memory

__all__ = ["Choice", "choose_plan", "choose_plans", "candidate_plan", "tie_band", "pick", "plan_choice_text"]

# plan fields a choice fixes when the scenario leaves them out (the rest are chosen)
FIXED_WHEN_OPEN = {"cp": 1, "vp": 1}


@dataclass
class Choice:
    """The chosen plan of one scenario: ``plan`` (every field, recompute by name, plus precision,
    flash attention and optimizer), ``chosen`` (the fields the scenario left open and their
    values), ``valid`` (some candidate obeys the plan rules), ``fits`` and ``reasons`` (why not),
    ``arrays`` (the plan as length-1 arrays for :func:`perfmodel.chain.evaluate`) and ``result``
    (the plan's evaluate values as floats; empty for an invalid plan).  ``warnings``: what the user
    should know about a plan that is estimated anyway (it breaks the memory headroom);
    ``ties``: how many candidates were within the tie band of the fastest (1: the fastest won
    alone), ``fastest_step_time_s`` the fastest one's step time at the chosen plan's global batch
    (its time per sample times that batch, so plans of different batches compare)."""

    plan: dict
    chosen: dict
    valid: bool
    fits: bool
    reasons: list[str] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    result: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ties: int = 1
    fastest_step_time_s: float | None = None


def tie_band(profile, workload, cluster) -> float:
    """The log step-time ratio below which two plans of one job are ties: the smaller of
    log(1 + :data:`perfmodel.plans.PLAN_TIE_FRACTION`) and the half-width of the profile's 80 %
    prediction interval in log space, (log high - log low) / 2 (the interval is a ratio, the same
    for every plan of a job; without an interval model, the fraction alone)."""
    band = float(np.log1p(PLAN_TIE_FRACTION))
    low, high = time_bounds(profile, 1.0, cluster.gpu.architecture, cluster.num_gpus, workload.params,
                            workload.tokens_per_sample or np.nan,
                            assumed={"fabric": True} if cluster.assumed else None, family=workload.family)
    half = (np.log(float(high)) - np.log(float(low))) / 2
    return min(band, half) if np.isfinite(half) and half > 0 else band


def pick(plans: dict[str, np.ndarray], step_time_s: np.ndarray, band: float, seq_len, gpus_per_node: int) -> tuple[int, int]:
    """(index of the chosen plan, how many tie with the fastest): among the plans whose
    ``log(step_time_s / fastest) <= band``, the first of :func:`perfmodel.plans.conventional_order`.
    ``plans``: 1-D plan arrays of the candidates that may be chosen; ``step_time_s``: what ranks
    them (step time, or time per sample when their global batches differ)."""
    step_time_s = np.asarray(step_time_s, dtype=float)
    tied = np.flatnonzero(np.log(step_time_s / step_time_s.min()) <= band + 1e-12)
    order = conventional_order({**{name: np.asarray(values)[tied] for name, values in plans.items()},
                                "step_time_s": step_time_s[tied]}, seq_len, gpus_per_node)
    return int(tied[order[0]]), len(tied)


def plan_choice_text(choice: Choice, headroom: float = DEFAULT_MEMORY_HEADROOM) -> str:
    """One line on how the open fields were chosen: the fastest alone (within the memory
    ``headroom``, when there is one), or the conventional plan among the ties (how many, and how
    much slower than the fastest by the model)."""
    if choice.ties <= 1 or choice.fastest_step_time_s is None:
        return "the fastest plan that fits with the memory headroom" if headroom > 0 else "the fastest plan that fits"
    slower = choice.result["step_time_s"] / choice.fastest_step_time_s - 1
    return (f"{choice.ties} plans are within the model's tie band of the fastest (it cannot order them); "
            f"the most conventional of them is chosen ({slower:.1%} slower than the fastest by the model; "
            f"rule: perfmodel.plans.conventional_order)")


def candidate_plan(plan: Plan, framework: str | None = None) -> Plan:
    """The scenario plan whose open fields a choice ranges over: :data:`FIXED_WHEN_OPEN` set, and
    sequence parallelism and the ZeRO stage at ``framework``'s defaults where it has them
    (:func:`perfmodel.plans.default_sequence_parallel`, :func:`perfmodel.plans.default_zero`), and
    what the framework's code lacks off (:func:`perfmodel.plans.within_framework`)."""
    plan = within_framework(plan, framework)
    update = {name: getattr(plan, name) or value for name, value in FIXED_WHEN_OPEN.items()}
    return plan.model_copy(update={**update, "sequence_parallel": default_sequence_parallel(plan, framework),
                                   "zero": default_zero(plan, framework)})


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
        fixed = settings(plan, cluster.gpu, framework)
        cluster.gpu.peak(fixed["precision"])  # a precision the GPU lacks is a malformed scenario
        groups.setdefault(tuple(fixed.items()), []).append(i)
    out: dict[int, Choice] = {}
    for fixed, indices in groups.items():
        chosen = _choose_group(workload, cluster, [plans[i] for i in indices], dict(fixed), profile, data,
                               framework)
        out.update(zip(indices, chosen))
        _attention_sensitivity([out[i] for i in indices], [plans[i] for i in indices], workload, cluster,
                               dict(fixed), profile, data, framework)
    return [out[i] for i in range(len(plans))]


def _attention_sensitivity(choices: list[Choice], plans: list[Plan], workload, cluster, fixed: dict, profile, data,
                           framework) -> None:
    """Set each timed choice's ``result[ATTENTION_COLUMN]`` (in place): the log change of its step
    time when its assumed attention kernel (:func:`perfmodel.plans.flash_attention_assumed`) is the
    other one (fused assumed: > 0, unfused assumed: < 0), 0 where the attention kernel is known
    (stated, the framework's, or no transformer)."""
    timed = [(choice, plan) for choice, plan in zip(choices, plans) if choice.result]
    for choice, _ in timed:
        choice.result[ATTENTION_COLUMN] = 0.0
    assumed = [choice for choice, plan in timed
               if workload.family == "transformer" and flash_attention_assumed(plan, cluster.gpu, framework)]
    if not assumed:
        return
    arrays = {name: np.concatenate([choice.arrays[name] for choice in assumed]) for name in PLAN_FIELDS}
    other = evaluate(workload, cluster, arrays, **{**fixed, "flash_attention": not fixed["flash_attention"]},
                     profile=profile, data=data, framework=framework)["step_time_s"]
    for position, choice in enumerate(assumed):
        choice.result[ATTENTION_COLUMN] = float(np.log(other[position] / choice.result["step_time_s"]))


def _choose_group(workload, cluster, plans: list[Plan], fixed: dict, profile, data, framework) -> list[Choice]:
    """The choices of plans that share the settings ``fixed``: all their candidates in one pass."""
    candidates = []
    for plan in plans:
        grid = enumerate_plans(candidate_plan(plan, framework), workload, cluster.num_gpus, cluster.gpus_per_node,
                               fixed["flash_attention"])
        candidates.append(select(grid, check_plans(grid, workload, cluster.num_gpus, cluster.gpus_per_node) == 0))
    owner = np.concatenate([np.full(len(c["tp"]), i) for i, c in enumerate(candidates)])
    arrays = {name: np.concatenate([c[name] for c in candidates]) for name in PLAN_FIELDS}
    result = (evaluate(workload, cluster, arrays, **fixed, profile=profile, data=data, framework=framework)
              if len(owner) else {})
    band = tie_band(profile, workload, cluster)
    choices = []
    for i, plan in enumerate(plans):
        mine = np.flatnonzero(owner == i)
        fitting = mine[result["memory_fits"][mine].astype(bool)] if len(mine) else mine
        if not len(fitting):
            choices.append(_fallback(plan, workload, cluster, framework))
            continue
        headroom = memory_headroom(plan)
        roomy = fitting[within_headroom(result["memory_total"][fitting], result["memory_capacity"][fitting], headroom)]
        pool = roomy if len(roomy) else fitting
        # time per sample: an open batch lets candidates train different global batches
        per_sample = result["step_time_s"][pool] / arrays["global_batch"][pool]
        where, ties = pick({name: values[pool] for name, values in arrays.items()}, per_sample,
                           band, workload.tokens_per_sample, cluster.gpus_per_node)
        best = int(pool[where])
        record = as_records({name: values[best:best + 1] for name, values in arrays.items()})[0]
        choice = _chosen(plan, {**fixed, **record}, _values(result, best))
        choice.ties = ties
        choice.fastest_step_time_s = float(per_sample.min() * record["global_batch"])
        if not len(roomy):
            choice.warnings.append(_headroom_warning(choice.result, headroom))
        choices.append(choice)
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
        choice.reasons = [f"does not fit in GPU memory ({format_memory(choice.result['memory_total'])} needed "
                          f"of {format_memory(choice.result['memory_capacity'])})"]


def _headroom_warning(result: dict[str, float], headroom: float) -> str:
    total, capacity = result["memory_total"], result["memory_capacity"]
    return (f"the plan uses {format_memory(total)} of {format_memory(capacity)} per GPU ({total / capacity:.0%}), "
            f"leaving less than the {headroom:.0%} memory headroom (plan.memory_headroom) for allocator "
            f"spikes and fragmentation; it may run out of memory")


def _values(result: dict[str, np.ndarray], index: int) -> dict[str, float]:
    """The numbers of plan ``index`` of an evaluate result."""
    return {key: float(values[index]) for key, values in result.items() if key != "memory_stage"}


def _chosen(plan: Plan, chosen_plan: dict, result: dict[str, float]) -> Choice:
    open_fields = {name: chosen_plan[name] for name in PLAN_FIELDS if getattr(plan, name) is None}
    return Choice(plan=chosen_plan, chosen=open_fields, valid=True, fits=True, arrays=as_arrays(chosen_plan),
                  result=result)


def _fallback(plan: Plan, workload, cluster, framework=None) -> Choice:
    """The documented defaults, with why they fail (rules broken; else: does not fit)."""
    default = resolve_plan(plan, cluster.num_gpus, cluster.gpu, workload.family, framework)
    mask = int(check_plans(as_arrays(default), workload, cluster.num_gpus, cluster.gpus_per_node)[0])
    reasons = reasons_from_mask(mask)
    return Choice(plan=default, chosen={}, valid=mask == 0, fits=False, reasons=reasons,
                  arrays=as_arrays(default))
