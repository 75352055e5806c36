"""Parallel-plan search: every valid plan the scenario leaves open, evaluated in one pass.

``search(scenario)`` enumerates tensor, pipeline, context and data parallel degrees, virtual
pipeline stages, micro-batch sizes, recomputation strategies and ZeRO stages (every field the
scenario's plan fixes stays fixed), drops the plans that break a rule of
:mod:`perfmodel.plans` (counted by reason), and evaluates the rest with one call of
:func:`perfmodel.chain.evaluate` — the same formulas as :func:`perfmodel.estimator.estimate`.
"""

from __future__ import annotations

import numpy as np

from perfmodel.chain import evaluate
from perfmodel.job import hardware_summary, resolve
from perfmodel.plans import RECOMPUTE_CODES, check_plans, count_reasons, enumerate_plans, select, settings
from perfmodel.profile import default_profile

__all__ = ["search", "best_estimate"]


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
    fixed = settings(scenario.plan, cluster.gpu)
    precision = fixed["precision"]
    cluster.gpu.peak(precision)
    plans = enumerate_plans(scenario.plan, workload, cluster.num_gpus, cluster.gpus_per_node,
                            fixed["flash_attention"])
    mask = check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node)
    counts = count_reasons(mask)
    valid = select(plans, mask == 0)
    columns = dict(valid)
    if len(valid["tp"]):
        columns.update(evaluate(workload, cluster, valid, **fixed, profile=profile, data=scenario.data))
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
    """The :class:`~perfmodel.estimator.Estimate` of the fastest feasible plan over every open field,
    context parallelism and interleaving included (None if none fits)."""
    from perfmodel.estimator import estimate

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
