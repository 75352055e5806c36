"""Parallel-plan search: every valid plan the scenario leaves open, evaluated in one pass.

``search(scenario)`` enumerates tensor, pipeline, context and data parallel degrees, virtual
pipeline stages, micro-batch sizes, recomputation strategies and ZeRO stages (every field the
scenario's plan fixes stays fixed), drops the plans that break a rule of
:mod:`perfmodel.plans` (counted by reason), and evaluates the rest with one call of
:func:`perfmodel.evaluate.evaluate` — the same formulas as :func:`perfmodel.estimate.estimate`.
"""

from __future__ import annotations

import numpy as np

from perfmodel.estimate import hardware_summary, resolve
from perfmodel.evaluate import evaluate
from perfmodel.plans import (INVALID_REASONS, PLAN_FIELDS, RECOMPUTE_CODES, check_plans,
                             default_precision)
from perfmodel.profile import default_profile

__all__ = ["search", "enumerate_plans", "select", "best_estimate"]

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _choices(fixed, default: list[int]) -> list[int]:
    return [fixed] if fixed is not None else default


def enumerate_plans(plan, workload, num_gpus: int, gpus_per_node: int,
                    flash_attention: bool = True) -> dict[str, np.ndarray]:
    """Candidate plans (before validity checks) as a grid of :data:`PLAN_FIELDS`.

    Open fields range over: tp and cp powers of two up to a node, pp the divisors of the layer
    count up to the GPU count, vp 1/2/4, micro-batch powers of two up to the per-GPU batch,
    recompute none/selective/full (CNNs: none/full/sqrt; selective only without flash attention,
    whose kernel already recomputes the attention core), ZeRO 0-3.  ``dp`` follows from the
    others.  Without a global batch the search keeps one micro-batch of 1 (transformers) or 32
    (CNNs) per data-parallel rank at the smallest data-parallel degree, so every plan trains on
    the same number of samples per step.

    Each field is an integer array shaped to broadcast over the grid (one axis per open field),
    so rules can be checked without materialising the grid; :func:`select` gathers plans from it.
    """
    transformer = workload.family == "transformer"
    node_powers = [p for p in POWERS_OF_TWO if p <= gpus_per_node]
    tp = _choices(plan.tp, node_powers if transformer else [1])
    cp = _choices(plan.cp, [p for p in node_powers if p <= 8] if transformer else [1])
    pp = _choices(plan.pp, _divisors(workload.layers, num_gpus) if transformer else [1])
    vp = _choices(plan.vp, [1, 2, 4] if transformer else [1])
    strategies = (("none", "full") if flash_attention else ("none", "selective", "full")) if transformer \
        else ("none", "full", "sqrt")
    recompute = [RECOMPUTE_CODES[plan.recompute]] if plan.recompute else [RECOMPUTE_CODES[s] for s in strategies]
    zero = _choices(plan.zero, [0, 1, 2, 3])
    per_rank_default = 1 if transformer else 32
    global_batch = plan.global_batch or num_gpus * per_rank_default
    micro = _choices(plan.micro_batch, [p for p in POWERS_OF_TWO if p <= max(1, global_batch)])
    axes = (tp, pp, cp, vp, micro, recompute, zero)
    plans = {name: np.asarray(values, dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(axes))])
             for axis, (name, values) in enumerate(zip(("tp", "pp", "cp", "vp", "micro_batch", "recompute", "zero"),
                                                       axes))}
    plans["dp"] = np.maximum(1, num_gpus // (plans["tp"] * plans["pp"] * plans["cp"]))
    if plan.dp is not None:
        plans["dp"] = np.full_like(plans["dp"], plan.dp)
    plans["global_batch"] = np.array(global_batch, dtype=np.int64)
    plans["recompute_every"] = np.array(plan.recompute_every or 1, dtype=np.int64)
    sequence_parallel = plan.sequence_parallel if plan.sequence_parallel is not None else True
    plans["sequence_parallel"] = ((plans["tp"] > 1) & sequence_parallel).astype(np.int64)
    return {name: plans[name] for name in PLAN_FIELDS}


def select(plans: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    """The plans of a broadcast grid where ``keep`` (grid-shaped, boolean) is true, as 1-D arrays."""
    index = np.nonzero(keep)
    return {name: np.broadcast_to(values, keep.shape)[index] for name, values in plans.items()}


def search(scenario, catalog=None, profile=None, *, top: int | None = None):
    """All feasible plans, fastest first, as a pandas DataFrame.

    Columns: the plan fields, ``step_time_s`` and every breakdown component (``<name>_s``),
    ``samples_per_s``, ``tokens_per_s``, ``tflops_per_gpu``, ``mfu``, ``hfu``, memory per GPU and
    ``fits``.  ``frame.attrs["infeasible"]`` counts the plans dropped, by reason (plans that do not
    fit in memory under "does not fit in GPU memory"); ``frame.attrs["evaluated"]`` is the number of
    plans evaluated.
    """
    import pandas as pd

    scenario, workload, cluster = resolve(scenario, catalog)
    profile = profile or default_profile()
    plan = scenario.plan
    precision = plan.precision or default_precision(cluster.gpu)
    cluster.gpu.peak(precision)
    flash = plan.flash_attention if plan.flash_attention is not None else cluster.gpu.architecture not in ("Volta", "Turing")
    plans = enumerate_plans(plan, workload, cluster.num_gpus, cluster.gpus_per_node, flash)
    mask = check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node)
    counts: dict[str, int] = {}
    for bit, reason in enumerate(INVALID_REASONS):
        hits = int(np.count_nonzero(mask >> bit & 1))
        if hits:
            counts[reason] = hits
    valid = select(plans, mask == 0)
    columns = dict(valid)
    if len(valid["tp"]):
        columns.update(evaluate(workload, cluster, valid, precision=precision, flash_attention=flash,
                                optimizer=plan.optimizer or "adam", profile=profile, data=scenario.data))
        fits = columns["memory_fits"].astype(bool)
        if not fits.all():
            counts["does not fit in GPU memory"] = int(np.count_nonzero(~fits))
        order = np.flatnonzero(fits)[np.argsort(columns["step_time_s"][fits], kind="stable")]
        columns = {name: values[order] for name, values in columns.items()}
        columns["fits"] = np.ones(len(order), dtype=bool)
    columns["recompute"] = np.array(list(RECOMPUTE_CODES))[columns["recompute"]]
    frame = pd.DataFrame(columns)
    frame["precision"] = precision
    frame.attrs["infeasible"] = counts
    frame.attrs["evaluated"] = int(len(valid["tp"]))
    frame.attrs["candidates"] = int(mask.size)
    frame.attrs["hardware"] = hardware_summary(cluster)
    frame.attrs["workload"] = workload.name
    return frame.head(top) if top else frame


def best_estimate(scenario, catalog=None, profile=None):
    """The :class:`~perfmodel.estimate.Estimate` of the fastest feasible plan (None if none fits)."""
    from perfmodel.estimate import estimate

    scenario, workload, cluster = resolve(scenario, catalog)
    frame = search(scenario, catalog, profile, top=1)
    if not len(frame):
        return None
    row = frame.iloc[0]
    fixed = {name: (row[name] if name == "recompute" else int(row[name]))
             for name in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero")}
    fixed["sequence_parallel"] = bool(row["sequence_parallel"])
    fixed["precision"] = row["precision"]
    chosen = scenario.model_copy(update={"plan": scenario.plan.model_copy(update=fixed)})
    return estimate(chosen, catalog, profile)
