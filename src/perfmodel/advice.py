"""What would make a job that does not fit in GPU memory fit.

Two questions, answered through the public API only (:func:`perfmodel.estimate.estimate` and
:func:`perfmodel.search.search`, so the numbers are the model's own):

* :func:`most_frugal` - the plan that needs the least memory per GPU on the scenario's hardware:
  every tensor x pipeline layout the scenario leaves open, with full recomputation (Chen et al.
  2016; Korthikanti et al. 2022: 2 s b h bytes per layer kept), micro-batch 1 and the deepest ZeRO
  stage the layout allows (Rajbhandari et al. 2020: stage 3 without pipeline parallelism, else 1).
* :func:`smallest_change` - the first of these changes that gives a plan that fits, in order of
  how little it changes: (1) recomputation and ZeRO, (2) the parallel layout, (3) more GPUs
  (2x, 4x, ... up to 64x the scenario's), each time the fastest plan that fits.
"""

from __future__ import annotations

from perfmodel.estimator import Estimate, estimate
from perfmodel.job import resolve
from perfmodel.scenario import Scenario, load_scenario

__all__ = ["most_frugal", "smallest_change", "Change"]

LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "vp", "micro_batch")
MEMORY_FIELDS = ("recompute", "zero")
MAX_SCALE = 64


class Change(dict):
    """One suggestion: ``text`` (what to change, for people), ``plan`` (the plan that fits, a search
    row as a dict), ``num_gpus`` and ``nodes`` (None for a change of plan only)."""


def _powers_of_two(limit: int) -> list[int]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def most_frugal(scenario: Scenario | str | dict, catalog=None, profile=None) -> Estimate | None:
    """The :class:`~perfmodel.estimate.Estimate` of the plan with the least memory per GPU (fixed
    fields of the scenario's plan stay fixed); None when no layout is valid at all."""
    scenario, workload, cluster = resolve(scenario, catalog)
    plan = scenario.plan
    transformer = workload.family == "transformer"
    tps = [plan.tp] if plan.tp else ([t for t in _powers_of_two(cluster.gpus_per_node)] if transformer else [1])
    best = None
    for tp in tps:
        pps = [plan.pp] if plan.pp else (
            [p for p in range(1, cluster.num_gpus // tp + 1)
             if workload.layers % p == 0 and (cluster.num_gpus // tp) % p == 0]
            if transformer else [1])
        for pp in pps:
            fields = {"tp": tp, "pp": pp, "cp": plan.cp or 1, "vp": plan.vp or 1,
                      "micro_batch": plan.micro_batch or (1 if transformer else 1),
                      "recompute": plan.recompute or "full",
                      "zero": plan.zero if plan.zero is not None else (3 if pp == 1 else 1)}
            candidate = scenario.model_copy(update={"plan": plan.model_copy(update=fields)})
            result = estimate(candidate, catalog, profile)
            if result.memory and (best is None or result.memory["total"] < best.memory["total"]):
                best = result
    return best


def _fastest_fit(scenario: Scenario, catalog, profile):
    from perfmodel.plan_search import search

    frame = search(scenario, catalog, profile, top=1)
    return frame.iloc[0].to_dict() if len(frame) else None


def _plan_text(row: dict) -> str:
    from perfmodel.ranking import plan_label

    return plan_label(row)


def _open(plan, fields):
    return plan.model_copy(update={field: None for field in fields})


def _scaled(hardware, factor: int):
    if hardware.instance is not None:
        return hardware.model_copy(update={"nodes": (hardware.nodes or 1) * factor})
    return hardware.model_copy(update={"num_gpus": (hardware.num_gpus or 1) * factor})


def smallest_change(scenario: Scenario | str | dict, catalog=None, profile=None) -> Change | None:
    """The least change that makes the job fit (see the module docstring), or None when not even
    64x the GPUs with any plan fits."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    plan = scenario.plan
    fixed_memory = [f for f in MEMORY_FIELDS if getattr(plan, f) is not None]
    if fixed_memory:
        row = _fastest_fit(scenario.model_copy(update={"plan": _open(plan, MEMORY_FIELDS)}), catalog, profile)
        if row is not None:
            return Change(text=f"use {row['recompute']} recompute and ZeRO-{int(row['zero'])} "
                               f"(plan {_plan_text(row)})", plan=row, num_gpus=None, nodes=None)
    fixed_layout = [f for f in LAYOUT_FIELDS if getattr(plan, f) is not None]
    relaxed = _open(plan, LAYOUT_FIELDS + MEMORY_FIELDS)
    if fixed_layout:
        row = _fastest_fit(scenario.model_copy(update={"plan": relaxed}), catalog, profile)
        if row is not None:
            return Change(text=f"change the layout to {_plan_text(row)}", plan=row, num_gpus=None, nodes=None)
    _, _, cluster = resolve(scenario, catalog)
    factor = 2
    while factor <= MAX_SCALE:
        hardware = _scaled(scenario.hardware, factor)
        bigger = scenario.model_copy(update={"plan": relaxed, "hardware": hardware})
        try:
            row = _fastest_fit(bigger, catalog, profile)
        except ValueError as error:  # e.g. more than one node and no network given
            return Change(text=f"more than {cluster.num_gpus} GPUs are needed; to size them: {error}", plan=None,
                          num_gpus=None, nodes=None)
        if row is not None:
            gpus = cluster.num_gpus * factor
            nodes = cluster.nodes * factor
            where = f"{nodes} x {hardware.instance}" if hardware.instance else f"{gpus} x {cluster.gpu.name}"
            return Change(text=f"use {gpus} GPUs ({where}) with {_plan_text(row)}", plan=row,
                          num_gpus=gpus, nodes=nodes)
        factor *= 2
    return None
