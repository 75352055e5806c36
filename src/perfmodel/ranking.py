"""Which instance, how many, on-demand or spot: rank cloud instances for one training job.

``rank(scenario)`` takes the scenario's workload, plan and run, and for every candidate instance
type and node count takes the plan :func:`perfmodel.choice.choose_plans` picks (as ``estimate``), then
prices it (:mod:`perfmodel.cost`) and powers it (:mod:`perfmodel.models.power`).  The scenario's own
``hardware`` section is ignored: each candidate is ``instance: provider/name, nodes: N``.

Columns (one row per instance x nodes x pricing):

* ``instance``, ``provider``, ``gpu``, ``nodes``, ``num_gpus``, ``pricing``, ``plan`` (e.g.
  ``"tp8 pp2 dp4 mb1 full z1"``), ``feasible``, ``reasons`` ("; "-joined, empty when feasible);
* ``step_time_s``, ``samples_per_s``, ``tokens_per_s``, ``tflops_per_gpu``, ``mfu``,
  ``gpu_utilization`` of the best plan;
* ``basis``: ``"run"`` when the scenario has a ``run`` section (times and costs are for the whole
  run), ``"step"`` without one (``time_to_train_s`` and ``cost_usd`` are then per step);
* ``ideal_time_s`` (no preemptions), ``time_to_train_s`` (expected wall time: spot adds
  checkpoints, lost work and restarts), ``checkpoint_time_s``, ``interruptions_per_hour``;
* ``price_usd_per_hour`` (whole cluster), ``cost_usd``, ``gpu_hours``;
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
from perfmodel.choice import choose_plan
from perfmodel.job import run_samples
from perfmodel.hardware.catalog import Catalog, load_catalog
from perfmodel.hardware.specs import PRICINGS, Instance
from perfmodel.models import power, preemption
from perfmodel.profile import CalibrationProfile, default_profile
from perfmodel.scenario import HardwareSpec, Scenario, load_scenario
from perfmodel.units import parse_quantity
from perfmodel.workloads import workload_from_spec

__all__ = ["rank", "pareto_front", "OBJECTIVES", "plan_label"]

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
    """Short plan string: 'tp8 pp2 dp4 mb1 full z1' (cp / vp only when above 1)."""
    parts = [f"tp{int(row['tp'])}", f"pp{int(row['pp'])}", f"dp{int(row['dp'])}"]
    parts += [f"{name}{int(row[name])}" for name in ("cp", "vp") if int(row[name]) > 1]
    parts += [f"mb{int(row['micro_batch'])}", str(row["recompute"]), f"z{int(row['zero'])}"]
    return " ".join(parts)


def _pricings(pricing, scenario: Scenario) -> list[str]:
    if pricing is None:
        pricing = scenario.run.pricing if scenario.run is not None else "on_demand"
    chosen = [pricing] if isinstance(pricing, str) else list(pricing)
    for name in chosen:
        if name not in PRICINGS:
            raise ValueError(f"pricing {name!r} is unknown; allowed: {', '.join(PRICINGS)}")
    if not chosen:
        raise ValueError(f"pricing: give at least one of {', '.join(PRICINGS)}")
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


def _limit(value, dimension: str, name: str) -> float | None:
    if value is None:
        return None
    number = parse_quantity(value, dimension) if isinstance(value, str) else float(value)
    if not number > 0:
        raise ValueError(f"{name} = {value!r}; allowed: a positive number")
    return number


def _plan_row(candidate: Scenario, catalog, profile):
    """(the chosen plan's fields and chain outputs as a Series, or None; the reason when None)."""
    import pandas as pd

    choice = choose_plan(candidate, catalog, profile)
    if not choice.fits:
        return None, "no feasible plan: " + ("; ".join(choice.reasons) or "no candidate plan")
    return pd.Series({**choice.plan, **choice.result}), ""


def _best_plan(scenario, key, inst, nodes, catalog, profile, cache):
    """(best plan row or None, reason) for one instance type and node count; cached by hardware."""
    if nodes > 1 and (inst.nic is None or inst.nics == 0):
        return None, f"{key} has no inter-node network in the catalog; only 1 node is possible"
    signature = (inst.gpu, inst.gpus_per_node, inst.intra, inst.fabric, inst.nics, inst.nic, nodes)
    if signature not in cache:
        candidate = scenario.model_copy(update={"hardware": HardwareSpec(instance=key, nodes=nodes)})
        try:
            cache[signature] = _plan_row(candidate, catalog, profile)
        except ValueError as error:  # e.g. a precision this GPU lacks
            cache[signature] = (None, str(error).splitlines()[0])
    return cache[signature]


def _checkpoint_time(scenario, workload, best, nodes, profile) -> float:
    if scenario.run is not None and scenario.run.checkpoint_write is not None:
        return scenario.run.checkpoint_write
    optimizer = scenario.plan.optimizer or "adam"
    size = preemption.checkpoint_bytes(workload.params, optimizer, best["precision"])
    return float(preemption.checkpoint_write_time(
        size / nodes, profile.get("checkpoint_write_bandwidth_per_node")))


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
        rate = rate_override if rate_override is not None else (
            run_rate if run_rate is not None else profile.get(costs.spot_rate_parameter(inst.provider)))
        checkpoint = _checkpoint_time(scenario, workload, best, nodes, profile)
        wall = float(costs.spot_expected(ideal, nodes, rate, checkpoint, profile.get("spot_restart_time")))
        if not np.isfinite(wall):
            row["reasons"] = (f"spot: {nodes} nodes at {rate:.3g} interruptions/h each are interrupted "
                              f"faster than the job can checkpoint ({checkpoint:.3g} s) and restart")
            return row
    price = price_node * nodes
    achieved = float(best["tflops_per_gpu"]) * 1e12 * num_gpus
    slowdown = ideal / wall
    row.update(
        feasible=True, reasons="", ideal_time_s=ideal, time_to_train_s=wall, checkpoint_time_s=checkpoint,
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


COLUMNS = ["instance", "provider", "gpu", "nodes", "num_gpus", "pricing", "plan", "feasible", "reasons",
           "step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu", "gpu_utilization",
           "basis", "ideal_time_s", "time_to_train_s", "checkpoint_time_s", "interruptions_per_hour",
           "price_usd_per_hour", "cost_usd", "gpu_hours", "perf_per_dollar", "peak_tflops_per_dollar_hour",
           "samples_per_dollar", "tokens_per_dollar", "power_w", "flops_per_watt", "energy_kwh", "co2_kg",
           "pareto"]


def rank(scenario: Scenario | str | dict, catalog: Catalog | None = None,
         profile: CalibrationProfile | None = None, *, instances: Iterable[str] | str | None = None,
         nodes: Iterable[int] | int | None = None, objective: str = "cost",
         pricing: str | Iterable[str] | None = None, deadline=None, budget=None, max_nodes: int = 128,
         interruptions_per_hour: float | None = None, grid_g_per_kwh: float | None = None):
    """Rank instance types x node counts (x pricings) for the scenario's job; a pandas DataFrame.

    ``instances``: names (``provider/name``, or a comma-separated string); default every catalog
    instance with a price.  ``nodes``: node counts; default 1, 2, 4, ... up to ``max_nodes``.
    ``pricing``: one of on_demand, spot, reserved_1y, reserved_3y or a list of them; default the
    scenario's ``run.pricing`` (else on_demand).  ``deadline`` (s, or "14d") and ``budget`` (USD)
    mark rows over them infeasible with the reason; they need a ``run`` section.
    ``interruptions_per_hour`` (per instance) overrides the scenario's and the provider default for
    spot; ``grid_g_per_kwh`` adds ``co2_kg``.  Rows are sorted by ``objective`` (time, cost,
    perf_per_dollar, flops_per_watt, energy), feasible rows first.  See the module docstring for
    the columns.  A job no candidate can run gives only infeasible rows, each with its reasons.
    """
    import pandas as pd

    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r} is unknown; allowed: {', '.join(OBJECTIVES)}")
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    catalog = catalog or load_catalog()
    profile = profile or default_profile()
    pricings = _pricings(pricing, scenario)
    deadline = _limit(deadline, "time", "deadline")
    budget = _limit(budget, "count", "budget")
    if interruptions_per_hour is not None and not interruptions_per_hour >= 0:
        raise ValueError(f"interruptions_per_hour = {interruptions_per_hour!r}; allowed: >= 0")
    workload = workload_from_spec(scenario.workload)  # a malformed workload raises here, once
    samples = run_samples(scenario.run, workload)
    if samples is None and (deadline is not None or budget is not None):
        raise ValueError("deadline and budget need the scenario's run section (train_tokens, "
                         "train_samples or epochs) to know the time to train")
    cache: dict = {}
    rows = []
    for key, inst in _candidates(catalog, instances):
        gpu = catalog.gpu(inst.gpu)
        for count in _node_counts(nodes, max_nodes):
            best, reason = _best_plan(scenario, key, inst, count, catalog, profile, cache)
            base = {"instance": key, "provider": inst.provider, "gpu": gpu.name, "nodes": count,
                    "num_gpus": count * inst.gpus_per_node, "feasible": False, "reasons": reason,
                    "basis": "run" if samples is not None else "step"}
            if best is not None:
                base.update(plan=plan_label(best), **{name: float(best[name]) for name in (
                    "step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu", "gpu_utilization")})
            for name in pricings:
                base["pricing"] = name
                rows.append(dict(base) if best is None else _priced_row(
                    base, best, inst, gpu, count, name, samples, workload, scenario, profile,
                    interruptions_per_hour, grid_g_per_kwh))
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    frame["feasible"] = frame["feasible"].astype(bool)
    frame["reasons"] = frame["reasons"].fillna("")
    for limit, column, label in ((deadline, "time_to_train_s", "deadline"), (budget, "cost_usd", "budget")):
        if limit is None:
            continue
        over = frame["feasible"] & ~(frame[column] <= limit)
        frame.loc[over, "reasons"] = [f"{column} {value:.4g} exceeds the {label} {limit:.4g}"
                                      for value in frame.loc[over, column]]
        frame.loc[over, "feasible"] = False
    feasible = frame["feasible"].to_numpy()
    frame["pareto"] = pareto_front(np.where(feasible, frame["time_to_train_s"], np.nan),
                                   np.where(feasible, frame["cost_usd"], np.nan))
    column, ascending = OBJECTIVES[objective]
    frame["_order"] = frame[column] if ascending else -frame[column]
    frame = frame.sort_values(["feasible", "_order", "instance", "nodes"], ascending=[False, True, True, True],
                              na_position="last", kind="stable").drop(columns="_order").reset_index(drop=True)
    frame.attrs.update(objective=objective, pricing=pricings, workload=workload.name,
                       basis="run" if samples is not None else "step", searches=len(cache))
    return frame
