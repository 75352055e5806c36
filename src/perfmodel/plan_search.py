"""Parallel-plan search: every plan the scenario leaves open, streamed through the chain in chunks.

``search(scenario)`` walks the grid of :func:`perfmodel.plans.search_grid` (tensor, pipeline,
context and data parallel degrees, virtual pipeline stages, every micro-batch dividing the batch,
sequence parallelism, recomputation strategies, ZeRO stages, offload; every field the scenario's
plan fixes stays fixed) in chunks of ``chunk`` candidates: drops the plans that break a rule of
:mod:`perfmodel.plans` or repeat another candidate (counted by reason), evaluates the rest with
:func:`perfmodel.chain.evaluate` — the same formulas as :func:`perfmodel.estimator.estimate` —
and keeps only the ``top`` fastest plans that fit with the memory headroom
(:func:`perfmodel.plans.within_headroom`; plans that fit only without it are counted as dropped).
Memory is bounded by the chunk and ``top``, whatever the size of the space.  Plans are ordered by
step time, ties by candidate index, so any chunking and any number of worker processes (``jobs``)
give the same rows.  The frame says how far apart the kept plans are relative to what the model can
resolve (``vs_best``, ``tied``, :func:`perfmodel.choice.tie_band`) and which of the tied ones the
rule of :func:`perfmodel.choice.pick` would run (``conventional``).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from perfmodel.chain import evaluate
from perfmodel.choice import pick, tie_band
from perfmodel.job import hardware_summary, resolve
from perfmodel.plans import (DUPLICATE_REASONS, INVALID_REASONS, OFFLOAD_CODES, PLAN_FIELDS, RECOMPUTE_CODES,
                             as_records, check_plans, conventional_order, memory_headroom, search_grid, settings,
                             within_framework, within_headroom)
from perfmodel.profile import default_profile

__all__ = ["search", "best_estimate", "default_jobs", "CHUNK"]

CHUNK = 1 << 17  # candidates enumerated and checked at once (a few MB per plan field)
NOT_FIT = "does not fit in GPU memory"
NOT_FIT_HOST = "does not fit in host memory (offload)"
NOT_HEADROOM = "fits only without the memory headroom (plan.memory_headroom, --memory-headroom)"
# below this many candidates a search stays in one process (a pool costs ~0.1-0.3 s to start)
POOL_MIN_CANDIDATES = 2_000_000


def default_jobs() -> int:
    """Worker processes by default: every core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass
class _Partial:
    """What one stretch of the grid leaves behind: the kept plans (columns, with their candidate
    ``index``), the plans that may still be the conventional choice (``front``, :func:`_tie_front`),
    counts by reason, and how many plans were evaluated and fit."""

    columns: dict[str, np.ndarray] = field(default_factory=dict)
    front: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    evaluated: int = 0
    fit: int = 0

    def add_counts(self, counts: dict[str, int]) -> None:
        for reason, count in counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + count

    def keep(self, columns: dict[str, np.ndarray], top: int | None) -> None:
        """Merge ``columns`` into the kept plans and keep the ``top`` fastest (all when None)."""
        if self.columns:
            columns = {name: np.concatenate([self.columns[name], columns[name]]) for name in self.columns}
        if top is not None and len(columns["index"]) > top:
            order = _order(columns)[:top]
            columns = {name: values[order] for name, values in columns.items()}
        self.columns = columns

    def keep_front(self, columns: dict[str, np.ndarray], context: dict) -> None:
        """Merge ``columns`` into the :func:`_tie_front`."""
        columns = {name: columns[name] for name in FRONT_FIELDS}
        if self.front:
            columns = {name: np.concatenate([self.front[name], columns[name]]) for name in FRONT_FIELDS}
        self.front = _tie_front(columns, context)


# what the tie front keeps of a plan: enough to name it and to rank it
FRONT_FIELDS = PLAN_FIELDS + ("step_time_s", "index")


def _tie_front(columns: dict[str, np.ndarray], context: dict) -> dict[str, np.ndarray]:
    """The plans that can still be the conventional choice whatever plans come later: those within
    the tie band of the fastest so far that no faster plan beats on
    :func:`perfmodel.plans.conventional_order` (a later, faster plan only narrows the band, so
    the conventional choice among all ties is always in this front; it stays small)."""
    step = columns["step_time_s"]
    near = np.flatnonzero(np.log(step / step.min()) <= context["band"] + 1e-12)
    near = near[np.argsort(columns["index"][near], kind="stable")]
    columns = {name: values[near] for name, values in columns.items()}
    n = len(near)
    rank = np.empty(n, dtype=np.int64)
    rank[conventional_order(columns, context["workload"].tokens_per_sample, context["cluster"].gpus_per_node)] = \
        np.arange(n)
    by_time = np.lexsort((rank, columns["step_time_s"]))
    ranks = rank[by_time]
    best_before = np.minimum.accumulate(np.concatenate([[n], ranks[:-1]]))
    keep = np.sort(by_time[ranks < best_before])
    return {name: values[keep] for name, values in columns.items()}


def _order(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Fastest first; equal step times by candidate index."""
    return np.lexsort((columns["index"], columns["step_time_s"]))


def _count_bits(mask: np.ndarray, reasons: tuple[str, ...]) -> dict[str, int]:
    """How many entries of a bit mask have each bit set (one pass: a histogram of the mask values)."""
    histogram = np.bincount(mask.ravel())
    values = np.arange(len(histogram))
    counts = {}
    for bit, reason in enumerate(reasons):
        hits = int(histogram[(values >> bit & 1) == 1].sum())
        if hits:
            counts[reason] = hits
    return counts


def _evaluate(context: dict, partial: _Partial, plans: dict[str, np.ndarray], index: np.ndarray,
              top: int | None) -> None:
    """Evaluate valid plans, count those that do not fit (or only without the headroom), keep the
    fastest that fit with it."""
    result = evaluate(context["workload"], context["cluster"], plans, **context["fixed"],
                      profile=context["profile"], data=context["data"], framework=context["framework"])
    fits_at_all = result["memory_fits"].astype(bool)
    host_fits = result["memory_host_fits"].astype(bool)
    fits = fits_at_all & within_headroom(result["memory_total"], result["memory_capacity"], context["headroom"])
    partial.add_counts({reason: n for reason, n in (
        (NOT_FIT, int(np.count_nonzero(~fits_at_all & host_fits))), (NOT_FIT_HOST, int(np.count_nonzero(~host_fits))),
        (NOT_HEADROOM, int(np.count_nonzero(fits_at_all & ~fits)))) if n})
    partial.evaluated += len(index)
    partial.fit += int(np.count_nonzero(fits))
    if fits.any():
        where = np.flatnonzero(fits)
        columns = {name: values[where] for name, values in {**plans, **result}.items() if not isinstance(values, list)}
        columns["index"] = index[where]
        partial.keep(columns, top)
        partial.keep_front(columns, context)


def _search_range(context: dict, first: int, last: int, top: int | None, chunk: int) -> _Partial:
    """Layouts ``first`` .. ``last - 1`` of the grid x every setting, ``chunk`` candidates at a
    time; valid plans are evaluated in batches of at least ``chunk`` (the chain's cost per call
    is then spread over many plans)."""
    grid, workload, cluster = context["grid"], context["workload"], context["cluster"]
    partial, pending, pending_index = _Partial(), [], []
    step = max(1, chunk // grid.inner_size)
    for begin in range(first, last, step):
        plans = grid.block(begin, min(last, begin + step))
        invalid = check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node)
        duplicate = np.where(invalid == 0, grid.duplicates(plans), 0)
        partial.add_counts(_count_bits(invalid, INVALID_REASONS))
        partial.add_counts(_count_bits(duplicate, DUPLICATE_REASONS))
        rows, columns = np.nonzero((invalid == 0) & (duplicate == 0))
        if len(rows):
            pending.append(grid.take(plans, rows, columns))
            pending_index.append((begin + rows) * grid.inner_size + columns)
        if sum(map(len, pending_index)) >= chunk or (pending and begin + step >= last):
            _evaluate(context, partial, {name: np.concatenate([p[name] for p in pending]) for name in pending[0]},
                      np.concatenate(pending_index), top)
            pending, pending_index = [], []
    return partial


_WORKER: dict = {}


def _worker_init(context: dict) -> None:
    _WORKER.update(context)


def _worker_range(start: int, stop: int, top: int | None, chunk: int) -> _Partial:
    return _search_range(_WORKER, start, stop, top, chunk)


def _split(layouts: int, parts: int) -> list[tuple[int, int]]:
    """``range(layouts)`` in ``parts`` contiguous stretches."""
    bounds = [round(layouts * i / parts) for i in range(parts + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def search(scenario, catalog=None, profile=None, *, top: int | None = None, chunk: int = CHUNK,
           jobs: int | None = 1):
    """The fastest feasible plans, fastest first, as a pandas DataFrame.

    ``top``: how many plans to keep (None: every plan that fits; memory then grows with them).
    ``chunk``: candidates per step of the stream.  ``jobs``: worker processes (None: every core,
    :func:`default_jobs`); spaces under ``POOL_MIN_CANDIDATES`` candidates run in this process.

    Columns: the plan fields (``recompute`` and ``offload`` by name), ``step_time_s`` and every
    breakdown component (``<name>_s``), ``samples_per_s``, ``tokens_per_s``, ``tflops_per_gpu``,
    ``mfu``, ``hfu``, memory per GPU (``memory_*``), ``fits``, ``vs_best`` (step time / the
    fastest's - 1) and ``tied`` (within the tie band of the fastest: the model cannot order them).
    ``frame.attrs``: ``infeasible`` counts the candidates dropped, by reason (rules of
    :mod:`perfmodel.plans`, duplicates, "does not fit in GPU memory", "does not fit in host memory
    (offload)", :data:`NOT_HEADROOM`); ``evaluated`` the plans evaluated, ``feasible`` those that
    fit with the headroom, ``candidates`` the size of the grid; ``memory_headroom`` the share of
    memory left free; ``tie_band`` the step-time fraction below which plans tie
    (exp(:func:`perfmodel.choice.tie_band`) - 1); ``conventional`` the row label of the plan the
    rule of :func:`perfmodel.choice.pick` runs among every tied plan of the grid, shown or not
    (the plan fields, ``precision``, ``step_time_s`` and ``vs_best``; None when no plan fits);
    ``batch_note``: set when the scenario states neither micro-batch nor global batch, which
    global batch was taken for it (the one :func:`perfmodel.choice.choose_plans` picks).
    """
    import pandas as pd

    if top is not None and top < 1:
        raise ValueError(f"top = {top!r}; allowed: a positive integer or None")
    if chunk < 1:
        raise ValueError(f"chunk = {chunk!r}; allowed: a positive integer")
    scenario, workload, cluster = resolve(scenario, catalog)
    fixed = settings(scenario.plan, cluster.gpu, scenario.framework)
    cluster.gpu.peak(fixed["precision"])
    profile = profile or default_profile()
    batch_note = None
    if scenario.plan.global_batch is None and scenario.plan.micro_batch is None:
        scenario, batch_note = _with_open_batch_chosen(scenario, workload, cluster, profile)
    grid = search_grid(within_framework(scenario.plan, scenario.framework), workload, cluster.num_gpus,
                       cluster.gpus_per_node, fixed["flash_attention"])
    band = tie_band(profile, workload, cluster)
    context = {"grid": grid, "workload": workload, "cluster": cluster, "fixed": fixed, "profile": profile,
               "data": scenario.data, "headroom": memory_headroom(scenario.plan), "band": band,
               "framework": scenario.framework}
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs = {jobs!r}; allowed: a positive integer or None (every core)")
    if jobs == 1 or grid.size < POOL_MIN_CANDIDATES:
        total = _search_range(context, 0, grid.layouts, top, chunk)
    else:
        total = _Partial()
        stretches = _split(grid.layouts, jobs)
        with ProcessPoolExecutor(len(stretches), initializer=_worker_init, initargs=(context,)) as pool:
            for part in pool.map(_worker_range, *zip(*stretches), [top] * len(stretches), [chunk] * len(stretches)):
                total.add_counts(part.counts)
                total.evaluated += part.evaluated
                total.fit += part.fit
                if part.columns:
                    total.keep(part.columns, top)
                    total.keep_front(part.front, context)
    columns = total.columns
    if columns:
        order = _order(columns)
        columns = {name: values[order] for name, values in columns.items() if name != "index"}
        columns["fits"] = np.ones(len(order), dtype=bool)
        columns["recompute"] = np.array(list(RECOMPUTE_CODES))[columns["recompute"]]
        columns["offload"] = np.array(list(OFFLOAD_CODES))[columns["offload"]]
    columns["precision"] = np.full(len(columns.get("tp", ())), fixed["precision"])
    conventional = None
    if "step_time_s" in columns:
        step = columns["step_time_s"]
        columns["vs_best"] = step / step[0] - 1
        columns["tied"] = np.log(step / step[0]) <= band + 1e-12
        front = total.front
        where, _ = pick(front, front["step_time_s"], band, workload.tokens_per_sample, cluster.gpus_per_node)
        conventional = {**as_records({name: front[name][where:where + 1] for name in PLAN_FIELDS})[0],
                        "precision": fixed["precision"], "step_time_s": float(front["step_time_s"][where]),
                        "vs_best": float(front["step_time_s"][where] / step[0] - 1)}
    frame = pd.DataFrame(columns)
    frame.attrs.update(infeasible=total.counts, evaluated=total.evaluated, feasible=total.fit,
                       candidates=grid.size, hardware=hardware_summary(cluster), workload=workload.name,
                       memory_headroom=context["headroom"], tie_band=float(np.expm1(band)), conventional=conventional,
                       batch_note=batch_note)
    return frame


def _with_open_batch_chosen(scenario, workload, cluster, profile):
    """A scenario without micro-batch and global batch gets the global batch ``estimate`` chooses
    for it (the highest throughput that fits, :func:`perfmodel.plans.enumerate_plans`), so every
    plan of the search trains the same batch; returns it and a note saying so (the batch stays
    open when no plan fits: the search then reports why)."""
    from perfmodel.choice import choose_plans

    choice = choose_plans(workload, cluster, [scenario.plan], profile=profile, data=scenario.data,
                          framework=scenario.framework)[0]
    if not (choice.valid and choice.fits):
        return scenario, None
    batch = int(choice.plan["global_batch"])
    note = (f"batch not stated: global batch {batch}, the one estimate chooses (the highest throughput "
            "that fits in memory)")
    return scenario.model_copy(update={"plan": scenario.plan.model_copy(update={"global_batch": batch})}), note


def best_estimate(scenario, catalog=None, profile=None):
    """The :class:`~perfmodel.estimator.Estimate` of the fastest feasible plan of :func:`search`
    (None if none fits)."""
    from perfmodel.estimator import estimate

    scenario, workload, cluster = resolve(scenario, catalog)
    frame = search(scenario, catalog, profile, top=1)
    if not len(frame):
        return None
    row = frame.iloc[0]
    fixed = {name: (row[name] if name in ("recompute", "offload") else int(row[name]))
             for name in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute",
                          "recompute_every", "zero", "offload")}
    fixed["sequence_parallel"] = bool(row["sequence_parallel"])
    fixed["precision"] = row["precision"]
    chosen = scenario.model_copy(update={"plan": scenario.plan.model_copy(update=fixed)})
    return estimate(chosen, catalog, profile)
