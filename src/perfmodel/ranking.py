"""Which instance, how many, on-demand or spot: rank cloud instances for one training job.

``rank(scenario)`` takes the scenario's workload, plan and run, and for every candidate instance
type and node count takes the plan :func:`perfmodel.choice.choose_plans` picks (as ``estimate``), then
prices it (:mod:`perfmodel.cost`) and powers it (:mod:`perfmodel.models.power`).  The scenario's own
``hardware`` section is ignored: each candidate is ``instance: provider/name, nodes: N``.

Columns (one row per instance x nodes x pricing):

* ``instance``, ``provider``, ``gpu``, ``nodes``, ``num_gpus``, ``pricing``, ``plan`` (e.g.
  ``"TP8 PP2 DP4, full recompute, ZeRO-1"``) and its fields ``tp``, ``pp``, ``dp``, ``cp``, ``vp``,
  ``micro_batch``, ``recompute``, ``zero``; ``feasible``, ``reasons`` ("; "-joined, empty when
  feasible; a missed deadline or budget comes first);
* ``step_time_s``, ``samples_per_s``, ``tokens_per_s``, ``tflops_per_gpu``, ``mfu``,
  ``gpu_utilization`` of the best plan;
* ``basis``: ``"run"`` when the scenario has a ``run`` section (times and costs are for the whole
  run), ``"step"`` without one (``time_to_train_s`` and ``cost_usd`` are then per step);
* ``ideal_time_s`` (no preemptions), ``time_to_train_s`` (expected wall time: spot adds
  checkpoints, lost work and restarts), ``checkpoint_time_s``, ``interruptions_per_hour`` (per
  instance), ``hold_probability`` (assumed chance of holding all spot nodes at once,
  :func:`perfmodel.cost.spot_hold_probability`), ``spot_discount`` (1 - spot / on-demand),
  ``cost_usd_at_2x_rate`` / ``cost_usd_at_5x_rate`` (spot cost at 2x and 5x the interruption
  rate), ``flags`` (warnings such as an implausible spot discount);
* ``time_to_train_low_s`` / ``time_to_train_high_s``: the 80 % interval of the time to train
  (:func:`perfmodel.calibration.intervals.time_bounds`: the model's error where the estimate
  stands); ``deadline_at_risk``: a row within the deadline whose interval reaches past it;
* ``deadline_ratio`` / ``budget_ratio``: time / deadline and cost / budget (above 1 misses it);
* ``price_usd_per_hour`` (whole cluster), ``price_as_of`` (the catalog snapshot), ``cost_usd``, ``gpu_hours``;
* ``perf_per_dollar`` (achieved model TFLOP/s per $/hour), ``peak_tflops_per_dollar_hour`` (dense
  peak of all GPUs per $/hour, the datasheet figure), ``samples_per_dollar``, ``tokens_per_dollar``;
* ``power_w`` (cluster IT power), ``flops_per_watt`` (achieved model FLOP/s per W of cluster IT
  power, host included, PUE excluded), ``energy_kwh`` (facility energy, PUE included),
  ``co2_kg`` (when a grid intensity is given);
* ``pareto``: non-dominated in (``time_to_train_s``, ``cost_usd``) among feasible rows.

Energy integrates power over the step: each GPU draws its TDP while it computes (forward,
backward, recompute) and its idle power otherwise, which is the mean power
``idle + u (TDP - idle)`` with ``u = gpu_utilization``; the host share is drawn all the time.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from perfmodel import cost as costs
from perfmodel.calibration.intervals import ATTENTION_COLUMN, SHARE_COLUMNS, time_bounds
from perfmodel.choice import choose_plan
from perfmodel.job import run_samples, scenario_workload
from perfmodel.plan_search import default_jobs
from perfmodel.hardware.catalog import Catalog, load_catalog
from perfmodel.hardware.specs import PRICINGS, Instance
from perfmodel.models import power, preemption
from perfmodel.profile import CalibrationProfile, default_profile
from perfmodel.scenario import HardwareSpec, Scenario, load_scenario
from perfmodel.units import format_duration, format_money, parse_duration, parse_money

__all__ = ["rank", "pareto_front", "OBJECTIVES", "plan_label", "answers", "closest", "available_pricings"]

# objective -> (column, ascending)
OBJECTIVES = {
    "time": ("time_to_train_s", True),
    "cost": ("cost_usd", True),
    "perf_per_dollar": ("perf_per_dollar", False),
    "flops_per_watt": ("flops_per_watt", False),
    "energy": ("energy_kwh", True),
}


def pareto_front(time, cost):
    """Boolean mask of the points not dominated in (time, cost), both to be minimised.

    Point i is dominated when some j has time_j <= time_i and cost_j <= cost_i, one of them
    strictly smaller.  NaN points are never on the front and dominate nothing.
    """
    time = np.asarray(time, dtype=float)
    cost = np.asarray(cost, dtype=float)
    if time.shape != cost.shape or time.ndim != 1:
        raise ValueError(f"time and cost must be 1-D arrays of one length; got shapes {time.shape} and {cost.shape}")
    valid = ~(np.isnan(time) | np.isnan(cost))
    t, c = np.where(valid, time, np.inf), np.where(valid, cost, np.inf)
    no_worse = (t[None, :] <= t[:, None]) & (c[None, :] <= c[:, None])
    better = (t[None, :] < t[:, None]) | (c[None, :] < c[:, None])
    dominated = np.any(no_worse & better & valid[None, :], axis=1)
    return valid & ~dominated


def plan_label(row) -> str:
    """The plan as a practitioner writes it: 'TP8 PP16 DP8, selective recompute, ZeRO-1' (CP / VP
    only when above 1, the micro-batch when above 1, no recompute and ZeRO-0 left out)."""
    parts = [f"TP{int(row['tp'])} PP{int(row['pp'])} DP{int(row['dp'])}"]
    parts[0] += "".join(f" {name.upper()}{int(row[name])}" for name in ("cp", "vp") if int(row[name]) > 1)
    if int(row["micro_batch"]) > 1:
        parts[0] += f" mb{int(row['micro_batch'])}"
    if str(row["recompute"]) == "every_k":
        parts.append(f"recompute every {int(row['recompute_every'])} layers")
    elif str(row["recompute"]) != "none":
        parts.append(f"{row['recompute']} recompute")
    if int(row["zero"]) > 0:
        parts.append(f"ZeRO-{int(row['zero'])}")
    if str(row.get("offload", "none")) != "none":
        parts.append(f"{row['offload']} offloaded to host")
    return ", ".join(parts)


PLAN_COLUMNS = ("tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "zero")


def available_pricings(catalog: Catalog) -> list[str]:
    """The pricings at least one catalog instance has a price for (reserved prices are null in the
    shipped catalog, so it offers on_demand and spot only)."""
    return [p for p in PRICINGS if any(inst.price_usd_per_hour(p) is not None for inst in catalog.instances.values())]


def _pricings(pricing, scenario: Scenario, catalog: Catalog) -> list[str]:
    if pricing is None:
        pricing = scenario.run.pricing if scenario.run is not None else "on_demand"
    chosen = [pricing] if isinstance(pricing, str) else list(pricing)
    offered = available_pricings(catalog)
    for name in chosen:
        if name not in PRICINGS:
            raise ValueError(f"pricing {name!r} is unknown; allowed: {', '.join(PRICINGS)}")
        if name not in offered:
            raise ValueError(f"pricing {name!r}: no instance in the catalog has a {name} price (no source "
                             f"gave one); allowed: {', '.join(offered)}")
    if not chosen:
        raise ValueError(f"pricing: give at least one of {', '.join(offered)}")
    return chosen


def _candidates(catalog: Catalog, instances) -> list[tuple[str, Instance]]:
    if instances is None:
        return [(key, inst) for key, inst in catalog.instances.items()
                if inst.gpus_per_node > 0 and any(inst.price_usd_per_hour(p) is not None for p in PRICINGS)]
    if isinstance(instances, str):
        instances = [name.strip() for name in instances.split(",") if name.strip()]
    chosen = []
    for name in instances:
        inst = catalog.instance(name)
        chosen.append((f"{inst.provider}/{inst.name}", inst))
    if not chosen:
        raise ValueError("instances: give at least one instance name (provider/name)")
    return chosen


def _node_counts(nodes, max_nodes) -> list[int]:
    if not isinstance(max_nodes, (int, np.integer)) or max_nodes < 1:
        raise ValueError(f"max_nodes = {max_nodes!r}; allowed: a positive integer")
    if nodes is None:
        return [2 ** k for k in range(int(np.log2(max_nodes)) + 1)]
    counts = [nodes] if isinstance(nodes, (int, np.integer)) else list(nodes)
    bad = [n for n in counts if not isinstance(n, (int, np.integer)) or n < 1]
    if bad or not counts:
        raise ValueError(f"nodes = {nodes!r}; allowed: positive integers")
    return sorted(set(int(n) for n in counts))


def _limit(value, parse, name: str) -> float | None:
    """A deadline (s) or budget (USD): a string must carry its unit ('14d', '$50k'); a number is SI."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse(value, name)
    number = float(value)
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"{name} = {value!r}; allowed: a positive, finite number")
    return number


def _plan_row(candidate: Scenario, catalog, profile):
    """(the chosen plan's fields and chain outputs as a Series, or None; the reason when None)."""
    import pandas as pd

    choice = choose_plan(candidate, catalog, profile)
    if not choice.fits:
        return None, "no feasible plan: " + ("; ".join(choice.reasons) or "no candidate plan")
    return pd.Series({**choice.plan, **choice.result}), ""


def _signature(inst: Instance, nodes: int) -> tuple:
    """The hardware a plan choice depends on (instances that share it share the choice)."""
    return (inst.gpu, inst.gpus_per_node, inst.intra, inst.fabric, inst.nics, inst.nic, nodes)


def _no_network(key: str, inst: Instance, nodes: int) -> str:
    return (f"{key} has no inter-node network in the catalog; only 1 node is possible"
            if nodes > 1 and (inst.nic is None or inst.nics == 0) else "")


def _choose(scenario, key, nodes, catalog, profile):
    """(best plan row or None, reason) for one instance type and node count."""
    candidate = scenario.model_copy(update={"hardware": HardwareSpec(instance=key, nodes=nodes)})
    try:
        return _plan_row(candidate, catalog, profile)
    except ValueError as error:  # e.g. a precision this GPU lacks
        return None, str(error).splitlines()[0]


def _best_plan(scenario, key, inst, nodes, catalog, profile, cache):
    """(best plan row or None, reason) for one instance type and node count; cached by hardware."""
    reason = _no_network(key, inst, nodes)
    if reason:
        return None, reason
    signature = _signature(inst, nodes)
    if signature not in cache:
        cache[signature] = _choose(scenario, key, nodes, catalog, profile)
    return cache[signature]


_WORKER: dict = {}


def _worker_init(scenario, catalog, profile) -> None:
    _WORKER.update(scenario=scenario, catalog=catalog, profile=profile)


def _worker_choose(key: str, nodes: int):
    return _choose(_WORKER["scenario"], key, nodes, _WORKER["catalog"], _WORKER["profile"])


def _fill_cache(scenario, grid, catalog, profile, cache, jobs: int, progress) -> None:
    """Choose the plan of every distinct hardware of ``grid`` over ``jobs`` worker processes
    (each choice is a pure function of its inputs, so the table is the one a single process makes)."""
    pending = {}
    for key, inst, count in grid:
        if not _no_network(key, inst, count):
            pending.setdefault(_signature(inst, count), (key, count))
    signatures = [signature for signature in pending if signature not in cache]
    if jobs <= 1 or len(signatures) <= 1:
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(min(jobs, len(signatures)), initializer=_worker_init,
                             initargs=(scenario, catalog, profile)) as pool:
        futures = [pool.submit(_worker_choose, *pending[signature]) for signature in signatures]
        for signature, future in zip(progress(signatures) if progress is not None else signatures, futures):
            cache[signature] = future.result()


def _priced_row(base, best, inst, gpu, nodes, pricing, samples, workload, scenario, profile,
                rate_override, grid_g_per_kwh) -> dict:
    """Cost, energy and perf-per-dollar of one feasible plan under one pricing."""
    row = dict(base)
    price_node = inst.price_usd_per_hour(pricing)
    if price_node is None:
        row["reasons"] = f"no {pricing} price in the catalog for {base['instance']}"
        return row
    num_gpus = base["num_gpus"]
    step = float(best["step_time_s"])
    ideal = samples / float(best["samples_per_s"]) if samples is not None else step
    wall, rate, checkpoint = ideal, 0.0, np.nan
    if pricing == "spot":
        run_rate = scenario.run.interruptions_per_hour if scenario.run is not None else None
        checkpoint = costs.checkpoint_time(
            workload.params, scenario.plan.optimizer, best["precision"], nodes, profile,
            scenario.run.checkpoint_write if scenario.run is not None else None)
        terms = costs.spot_run(ideal, nodes, inst.provider, gpu.architecture, checkpoint, profile,
                               rate_override if rate_override is not None else run_rate)
        rate, wall = terms["interruptions_per_hour"], terms["time_s"]
        on_demand = inst.price_usd_per_hour("on_demand")
        discount = float(costs.spot_discount(on_demand, price_node)) if on_demand else np.nan
        row.update(hold_probability=terms["hold_probability"], spot_discount=discount,
                   interruptions_source=terms["rate_note"],
                   cost_usd_at_2x_rate=float(costs.cost_usd(terms["time_s_at_2x_rate"], price_node, nodes)),
                   cost_usd_at_5x_rate=float(costs.cost_usd(terms["time_s_at_5x_rate"], price_node, nodes)))
        if discount > costs.IMPLAUSIBLE_SPOT_DISCOUNT:
            row["flags"] = (f"spot price {discount:.0%} below on-demand (over "
                            f"{costs.IMPLAUSIBLE_SPOT_DISCOUNT:.0%}): check it before relying on it")
        if terms["hold_probability"] < costs.MIN_HOLD_PROBABILITY:
            row["reasons"] = (f"spot: holding {nodes} {base['instance']} spot nodes at once is unlikely "
                              f"(assumed probability {terms['hold_probability']:.1e} < "
                              f"{costs.MIN_HOLD_PROBABILITY:.0%}, parameter spot_capacity_nodes)")
            return row
        if not np.isfinite(wall):
            row["reasons"] = (f"spot: {nodes} nodes at {rate:.3g} interruptions/h each are interrupted "
                              f"faster than the job can checkpoint ({checkpoint:.3g} s) and restart")
            return row
    price = price_node * nodes
    achieved = float(best["tflops_per_gpu"]) * 1e12 * num_gpus
    slowdown = ideal / wall
    low, high = (float(v) for v in time_bounds(
        profile, wall, gpu.architecture, num_gpus=num_gpus, model_params=workload.params,
        seq_len=workload.tokens_per_sample or np.nan, gpu=gpu.name, host=float(best["host_log_sensitivity"]),
        shares={column: float(best[column]) for column in SHARE_COLUMNS}, attention=float(best[ATTENTION_COLUMN]),
        assumed={"framework": True} if profile.framework_pooled(scenario.framework) else None,
        family=workload.family))
    row.update(
        feasible=True, reasons="", ideal_time_s=ideal, time_to_train_s=wall, checkpoint_time_s=checkpoint,
        time_to_train_low_s=low, time_to_train_high_s=high,
        interruptions_per_hour=rate, price_usd_per_hour=price,
        cost_usd=float(costs.cost_usd(wall, price_node, nodes)),
        gpu_hours=float(costs.gpu_hours(wall, num_gpus)),
        perf_per_dollar=float(costs.tflops_per_dollar_hour(achieved * slowdown, price)),
        peak_tflops_per_dollar_hour=float(costs.tflops_per_dollar_hour(gpu.peak(best["precision"]) * num_gpus, price)),
        samples_per_dollar=float(costs.per_dollar(float(best["samples_per_s"]) * slowdown, price)),
        tokens_per_dollar=(float(costs.per_dollar(float(best["tokens_per_s"]) * slowdown, price))
                           if np.isfinite(best["tokens_per_s"]) else np.nan),
    )
    if gpu.tdp is not None:
        idle = gpu.idle_power if gpu.idle_power is not None else float(
            power.idle_power(gpu.tdp, profile.get("gpu_idle_fraction")))
        per_gpu = power.gpu_power(float(best["gpu_utilization"]), gpu.tdp, idle)
        cluster = float(power.node_power(inst.gpus_per_node, per_gpu, profile.get("host_power_per_node"))) * nodes
        energy = float(power.energy_joules(cluster, wall, profile.get("pue")))
        row.update(power_w=cluster, flops_per_watt=float(power.flops_per_watt(achieved, cluster)),
                   energy_kwh=energy / power.JOULES_PER_KWH)
        if grid_g_per_kwh is not None:
            row["co2_kg"] = float(power.co2_grams(energy, grid_g_per_kwh)) / 1e3
    return row


COLUMNS = ["instance", "provider", "gpu", "nodes", "num_gpus", "pricing", "plan", *PLAN_COLUMNS, "feasible",
           "reasons", "flags", "step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
           "gpu_utilization", "basis", "ideal_time_s", "time_to_train_s", "time_to_train_low_s",
           "time_to_train_high_s", "deadline_at_risk", "checkpoint_time_s",
           "interruptions_per_hour", "interruptions_source", "hold_probability", "spot_discount",
           "price_usd_per_hour", "price_as_of", "cost_usd", "cost_usd_at_2x_rate", "cost_usd_at_5x_rate",
           "deadline_ratio", "budget_ratio", "gpu_hours", "perf_per_dollar", "peak_tflops_per_dollar_hour",
           "samples_per_dollar", "tokens_per_dollar", "power_w", "flops_per_watt", "energy_kwh", "co2_kg", "pareto"]


def rank(scenario: Scenario | str | dict, catalog: Catalog | None = None,
         profile: CalibrationProfile | None = None, *, instances: Iterable[str] | str | None = None,
         nodes: Iterable[int] | int | None = None, objective: str = "cost",
         pricing: str | Iterable[str] | None = None, deadline=None, budget=None, max_nodes: int = 128,
         interruptions_per_hour: float | None = None, grid_g_per_kwh: float | None = None, progress=None,
         jobs: int | None = 1):
    """Rank instance types x node counts (x pricings) for the scenario's job; a pandas DataFrame.

    ``instances``: names (``provider/name``, or a comma-separated string); default every catalog
    instance with a price.  ``nodes``: node counts; default 1, 2, 4, ... up to ``max_nodes``.
    ``pricing``: one of the pricings the catalog has prices for (:func:`available_pricings`) or a
    list of them; default the scenario's ``run.pricing`` (else on_demand).  ``deadline`` (a
    duration with its unit, "14d", or seconds) and ``budget`` (dollars with the sign, "$50k", or
    USD) mark rows over them infeasible, that reason first; they need a ``run`` section.
    ``interruptions_per_hour`` (per instance) overrides the scenario's and the provider default for
    spot; ``grid_g_per_kwh`` adds ``co2_kg``.  ``progress``: an optional wrapper of the candidate
    iterable (e.g. a progress bar).  ``jobs``: worker processes that choose the plans (None: every
    core); the table is the same for any number.  Rows are sorted by ``objective`` (time, cost, perf_per_dollar,
    flops_per_watt, energy), feasible rows first.  See the module docstring for the columns.  A job
    no candidate can run gives only infeasible rows, each with its reasons.
    """
    import pandas as pd

    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r} is unknown; allowed: {', '.join(OBJECTIVES)}")
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    catalog = catalog or load_catalog()
    profile = profile or default_profile()
    pricings = _pricings(pricing, scenario, catalog)
    deadline = _limit(deadline, parse_duration, "deadline")
    budget = _limit(budget, parse_money, "budget")
    if interruptions_per_hour is not None and not (np.isfinite(interruptions_per_hour) and interruptions_per_hour >= 0):
        raise ValueError(f"interruptions_per_hour = {interruptions_per_hour!r}; allowed: a finite number >= 0")
    workload = scenario_workload(scenario)  # a malformed workload raises here, once
    samples = run_samples(scenario.run, workload)
    if samples is None and (deadline is not None or budget is not None):
        raise ValueError("deadline and budget need the scenario's run section (train_tokens, "
                         "train_samples or epochs) to know the time to train")
    if jobs is not None and (not isinstance(jobs, (int, np.integer)) or jobs < 1):
        raise ValueError(f"jobs = {jobs!r}; allowed: a positive integer or None (every core)")
    cache: dict = {}
    rows = []
    grid = [(key, inst, count) for key, inst in _candidates(catalog, instances)
            for count in _node_counts(nodes, max_nodes)]
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs > 1:
        _fill_cache(scenario, grid, catalog, profile, cache, jobs, progress)
    for key, inst, count in (progress(grid) if progress is not None and jobs <= 1 else grid):
        gpu = catalog.gpu(inst.gpu)
        best, reason = _best_plan(scenario, key, inst, count, catalog, profile, cache)
        base = {"instance": key, "provider": inst.provider, "gpu": gpu.name, "nodes": count,
                "num_gpus": count * inst.gpus_per_node, "feasible": False, "reasons": reason,
                "price_as_of": str(inst.price_as_of) if inst.price_as_of else None,
                "basis": "run" if samples is not None else "step"}
        if best is not None:
            base.update(plan=plan_label(best), **{name: best[name] for name in PLAN_COLUMNS},
                        **{name: float(best[name]) for name in (
                            "step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                            "gpu_utilization")})
        for name in pricings:
            base["pricing"] = name
            rows.append(dict(base) if best is None else _priced_row(
                base, best, inst, gpu, count, name, samples, workload, scenario, profile,
                interruptions_per_hour, grid_g_per_kwh))
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    frame["feasible"] = frame["feasible"].astype(bool)
    for text in ("reasons", "flags", "interruptions_source"):
        frame[text] = frame[text].astype(object).fillna("")
    _apply_limits(frame, deadline, budget)
    feasible = frame["feasible"].to_numpy()
    frame["pareto"] = pareto_front(np.where(feasible, frame["time_to_train_s"], np.nan),
                                   np.where(feasible, frame["cost_usd"], np.nan))
    column, ascending = OBJECTIVES[objective]
    frame["_order"] = frame[column] if ascending else -frame[column]
    frame = frame.sort_values(["feasible", "_order", "instance", "nodes"], ascending=[False, True, True, True],
                              na_position="last", kind="stable").drop(columns="_order").reset_index(drop=True)
    frame.attrs.update(objective=objective, pricing=pricings, workload=workload.name,
                       basis="run" if samples is not None else "step", searches=len(cache),
                       deadline_s=deadline, budget_usd=budget)
    return frame


def _apply_limits(frame, deadline: float | None, budget: float | None) -> None:
    """Mark priced rows over the deadline or budget infeasible, those reasons first; set the ratios."""
    priced = frame["time_to_train_s"].notna() & frame["cost_usd"].notna() & (frame["reasons"] == "")
    missed = [[] for _ in range(len(frame))]
    for limit, column, ratio, describe in (
            (deadline, "time_to_train_s", "deadline_ratio",
             lambda v, lim: f"time to train {format_duration(v)} exceeds the deadline {format_duration(lim)}"),
            (budget, "cost_usd", "budget_ratio",
             lambda v, lim: f"cost {format_money(v)} exceeds the budget {format_money(lim)}")):
        if limit is None:
            continue
        frame[ratio] = frame[column] / limit
        if column == "time_to_train_s":
            frame["deadline_at_risk"] = priced & (frame[ratio] <= 1) & (frame["time_to_train_high_s"] > limit)
        for i in np.flatnonzero((priced & (frame[ratio] > 1)).to_numpy()):
            missed[i].append(describe(frame[column].iat[i], limit))
    for i, reasons in enumerate(missed):
        if reasons:
            frame.iat[i, frame.columns.get_loc("reasons")] = "; ".join(reasons)
            frame.iat[i, frame.columns.get_loc("feasible")] = False


def answers(frame) -> list[tuple[str, int]]:
    """The decision in a few lines: (label, row index) for the cheapest feasible row, the fastest,
    and the best performance per dollar (labels name the deadline / budget when given).  Rows with
    a flag (an implausible spot price) are not chosen; when one would have won, it is added as
    "cheapest if the flagged spot price holds"."""
    feasible = frame[frame["feasible"]]
    if not len(feasible):
        return []
    deadline, budget = frame.attrs.get("deadline_s"), frame.attrs.get("budget_usd")
    limits = [text for text in (format_duration(deadline) if deadline else "",
                                format_money(budget, cents=False) if budget else "") if text]
    within = f" within {' and '.join(limits)}" if limits else ""
    trusted = feasible[feasible["flags"] == ""]
    chosen = []
    if len(trusted):
        chosen += [(f"cheapest{within}", trusted["cost_usd"].idxmin()),
                   (f"fastest{within}", trusted["time_to_train_s"].idxmin())]
        if trusted["perf_per_dollar"].notna().any():
            chosen.append(("best performance per dollar", trusted["perf_per_dollar"].idxmax()))
    cheapest = feasible["cost_usd"].idxmin()
    if not len(trusted) or feasible.loc[cheapest, "cost_usd"] < trusted["cost_usd"].min():
        chosen.append((f"cheapest{within} if its flagged spot price holds", cheapest))
    return chosen


def closest(frame, count: int = 5):
    """The infeasible rows that come closest: those that only miss the deadline or budget, by how
    far (the larger of time/deadline and cost/budget), then the rest in frame order."""
    rows = frame[~frame["feasible"]].copy()
    ratios = [c for c in ("deadline_ratio", "budget_ratio") if c in rows and rows[c].notna().any()]
    rows["_miss"] = rows[ratios].max(axis=1) if ratios else np.nan
    return rows.sort_values("_miss", na_position="last", kind="stable").drop(columns="_miss").head(count)
