"""What a training job costs: dollars by pricing model, spot preemptions, mixed fleets, perf per dollar.

Prices are per instance-hour (one node); a cluster of ``nodes`` instances pays ``nodes`` times that.
On-demand (and reserved) cost is the ideal time times the price.  Spot capacity can be taken back:
the job checkpoints at the Young-Daly interval and, on each interruption, loses the work since the
last checkpoint and waits for a restart (:mod:`perfmodel.models.preemption`).  A synchronous job
stops when *any* of its spot nodes is interrupted, so the cluster's interruption rate is the
per-instance rate times the number of spot nodes.

Pure functions over floats or numpy arrays that broadcast.  Default interruption rates per
provider are parameters (:data:`SPOT_RATE_PARAMETERS`, declared in :mod:`perfmodel.parameters`);
the caller reads them from a profile and passes numbers in.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import preemption

__all__ = ["cost_usd", "gpu_hours", "cost_per_million_tokens", "cost_per_epoch", "spot_expected",
           "mixed_fleet", "per_dollar", "tflops_per_dollar_hour", "spot_rate_parameter", "spot_rate_note",
           "spot_hold_probability", "spot_discount", "checkpoint_time", "spot_run", "price_run", "price_estimate",
           "SPOT_RATE_PARAMETERS", "SECONDS_PER_HOUR", "IMPLAUSIBLE_SPOT_DISCOUNT", "MIN_HOLD_PROBABILITY"]

SECONDS_PER_HOUR = 3600.0

SPOT_RATE_PARAMETERS = {
    "aws": "spot_interruptions_per_hour_aws",
    "gcp": "spot_interruptions_per_hour_gcp",
    "azure": "spot_interruptions_per_hour_azure",
}
_OTHER_SPOT_RATE = "spot_interruptions_per_hour_other"

# short provenance of each spot rate, shown next to spot answers: (parameter, architecture or None)
SPOT_RATE_NOTES = {
    ("spot_interruptions_per_hour_aws", "Ampere"): "AWS Spot Instance Advisor, A100 band 5-10 %/month (2025-05-01)",
    ("spot_interruptions_per_hour_aws", "Hopper"): "AWS Spot Instance Advisor, H100 band 10-20 %/month (2025-05-01)",
    ("spot_interruptions_per_hour_aws", "Ada"): "AWS Spot Instance Advisor, L4 band <5 %/month (2025-05-01)",
    ("spot_interruptions_per_hour_aws", None): "ASSUMPTION: AWS Spot Instance Advisor top band (>20 %/month)",
    ("spot_interruptions_per_hour_gcp", None): "ASSUMPTION: 5-15 %/day formerly quoted for GCP preemptible VMs",
    ("spot_interruptions_per_hour_azure", None): "ASSUMPTION: Azure eviction-rate top band (20 %/month), as AWS",
    (_OTHER_SPOT_RATE, None): "ASSUMPTION: the most pessimistic provider default (5-15 %/day)",
}

# A spot price this far below on-demand is flagged: GPU spot discounts published by the providers
# reach "up to 90 %" only in marketing copy; sustained list snapshots of 82-89 % off for the newest
# GPUs are more likely stale or zone outliers than prices a 64-node job will get.
IMPLAUSIBLE_SPOT_DISCOUNT = 0.80
# below this assumed probability of holding the nodes at once (N > 37 nodes with the default
# spot_capacity_nodes), a spot cluster is not offered as an answer
MIN_HOLD_PROBABILITY = 0.10



def spot_rate_parameter(provider: str) -> str:
    """Name of the default spot interruption rate for ``provider`` (read it with the GPU's
    architecture as the group: ``profile.get(name, gpu.architecture)``)."""
    return SPOT_RATE_PARAMETERS.get(str(provider).lower(), _OTHER_SPOT_RATE)


def spot_rate_note(provider: str, architecture: str | None) -> str:
    """Short provenance of the default spot rate for ``provider`` and GPU ``architecture``."""
    name = spot_rate_parameter(provider)
    return SPOT_RATE_NOTES.get((name, architecture)) or SPOT_RATE_NOTES[(name, None)]


def spot_hold_probability(nodes, capacity_nodes):
    """Assumed probability of holding ``nodes`` spot instances of one type at once,
    ``exp(-(nodes - 1) / capacity_nodes)``: 1 for one node, falling with every node added
    (parameter ``spot_capacity_nodes``; an assumption, see its source)."""
    nodes = _non_negative("nodes", nodes)
    scale = np.asarray(capacity_nodes, dtype=float)
    if np.any(np.isnan(scale) | (scale <= 0)):
        raise ValueError(f"capacity_nodes = {capacity_nodes!r} must be a positive number")
    return np.exp(-np.maximum(nodes - 1.0, 0.0) / scale)


def spot_discount(price_on_demand, price_spot):
    """Share of the on-demand price a spot price saves: ``1 - spot / on_demand``."""
    return 1.0 - _non_negative("price_spot", price_spot) / _non_negative("price_on_demand", price_on_demand)


def _non_negative(name: str, value) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if np.any(np.isnan(array) | (array < 0)):
        raise ValueError(f"{name} = {value!r} must be a non-negative number")
    return array


def cost_usd(time_s, price_usd_per_hour_per_node, nodes):
    """Dollars for ``nodes`` instances rented for ``time_s``: time x price x nodes.

    Per step: pass the step time; per run: the time to train.
    """
    time_s = _non_negative("time_s", time_s)
    price = _non_negative("price_usd_per_hour_per_node", price_usd_per_hour_per_node)
    nodes = _non_negative("nodes", nodes)
    return time_s / SECONDS_PER_HOUR * price * nodes


def gpu_hours(time_s, num_gpus):
    """GPU-hours of ``num_gpus`` GPUs held for ``time_s``."""
    return _non_negative("time_s", time_s) * _non_negative("num_gpus", num_gpus) / SECONDS_PER_HOUR


def cost_per_million_tokens(tokens_per_s, price_usd_per_hour_per_node, nodes):
    """Dollars per 10^6 training tokens at a throughput of ``tokens_per_s``."""
    tokens_per_s = _non_negative("tokens_per_s", tokens_per_s)
    return cost_usd(1e6 / tokens_per_s, price_usd_per_hour_per_node, nodes)


def cost_per_epoch(samples_per_s, dataset_samples, price_usd_per_hour_per_node, nodes):
    """Dollars for one pass over ``dataset_samples`` at ``samples_per_s``."""
    samples_per_s = _non_negative("samples_per_s", samples_per_s)
    return cost_usd(_non_negative("dataset_samples", dataset_samples) / samples_per_s,
                    price_usd_per_hour_per_node, nodes)


def spot_expected(time_s, nodes, interruptions_per_hour_per_instance, checkpoint_time, restart_time,
                  hold_probability=1.0):
    """Expected wall time in s of ``time_s`` of work on ``nodes`` spot instances.

    Interruptions of the cluster arrive at ``nodes x rate`` per hour (mean time between them
    M = 3600 / (nodes x rate) s); the job checkpoints every tau = sqrt(2 delta M) of work (Young
    1974, "A first order approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006,
    FGCS 22(3)), and each interruption costs half an interval of lost work plus ``restart_time``:

        wall = time_s x (1 + delta / tau) / (1 - (tau / 2 + restart) / M)

    (:func:`perfmodel.models.preemption.expected_run_time`).  With no spot node or a zero rate the
    wall time is ``time_s``; ``inf`` when interruptions come faster than the job recovers.  Getting
    all nodes back succeeds with ``hold_probability`` per try (:func:`spot_hold_probability`), so a
    restart takes ``restart / hold_probability`` on average (geometric number of tries).
    """
    time_s = _non_negative("time_s", time_s)
    rate = _non_negative("interruptions_per_hour_per_instance", interruptions_per_hour_per_instance)
    nodes = _non_negative("nodes", nodes)
    delta = _non_negative("checkpoint_time", checkpoint_time)
    hold = np.asarray(hold_probability, dtype=float)
    if np.any(np.isnan(hold) | (hold <= 0) | (hold > 1)):
        raise ValueError(f"hold_probability = {hold_probability!r} must be in (0, 1]")
    restart = _non_negative("restart_time", restart_time) / hold
    interrupted = rate * nodes > 1e-12  # under one interruption in 10^8 years counts as none
    mtbi = preemption.mtbi_from_rate(np.where(interrupted, rate, 1.0), np.where(interrupted, nodes, 1.0))
    interval = np.maximum(preemption.young_daly_interval(delta, mtbi), 1e-12)  # delta = 0: free checkpoints
    wall = preemption.expected_run_time(time_s, interval, delta, mtbi, restart)
    return np.where(interrupted, wall, time_s)


def mixed_fleet(time_s, nodes, spot_nodes, price_on_demand, price_spot,
                interruptions_per_hour_per_instance, checkpoint_time, restart_time):
    """Expected (wall time s, cost USD) of ``nodes`` instances of which ``spot_nodes`` are spot.

    Only the spot nodes are interrupted (rate ``spot_nodes x rate``), but a synchronous job stops
    as a whole, so every node is paid for the whole expected wall time:
    cost = wall x (on-demand nodes x on-demand price + spot nodes x spot price).
    """
    nodes = _non_negative("nodes", nodes)
    spot_nodes = _non_negative("spot_nodes", spot_nodes)
    if np.any(spot_nodes > nodes):
        raise ValueError(f"spot_nodes = {spot_nodes!r} exceeds nodes = {nodes!r}; allowed: 0..nodes")
    wall = spot_expected(time_s, spot_nodes, interruptions_per_hour_per_instance, checkpoint_time, restart_time)
    cost = cost_usd(wall, price_on_demand, nodes - spot_nodes) + cost_usd(wall, price_spot, spot_nodes)
    return wall, cost


def per_dollar(rate_per_s, price_usd_per_hour):
    """Units (samples, tokens) per dollar at ``rate_per_s`` on a cluster costing ``price_usd_per_hour``."""
    price = _non_negative("price_usd_per_hour", price_usd_per_hour)
    return _non_negative("rate_per_s", rate_per_s) * SECONDS_PER_HOUR / price


def tflops_per_dollar_hour(flops_per_s, price_usd_per_hour):
    """TFLOP/s per $/hour: pass achieved model FLOP/s for the real figure, or the dense peak FLOP/s
    of all GPUs for the datasheet figure the article uses (claim 9)."""
    price = _non_negative("price_usd_per_hour", price_usd_per_hour)
    return _non_negative("flops_per_s", flops_per_s) / 1e12 / price


def checkpoint_time(params, optimizer, precision, nodes, profile, checkpoint_write=None) -> float:
    """Seconds to write one checkpoint: the scenario's ``run.checkpoint_write`` when given, else
    weights + optimizer state (:func:`perfmodel.models.preemption.checkpoint_bytes`) split over the
    nodes, each writing at ``checkpoint_write_bandwidth_per_node``."""
    if checkpoint_write is not None:
        return float(checkpoint_write)
    size = preemption.checkpoint_bytes(params, optimizer or "adam", precision)
    return float(preemption.checkpoint_write_time(size / nodes, profile.get("checkpoint_write_bandwidth_per_node")))


def spot_run(ideal_s: float, nodes: int, provider: str, architecture: str | None, checkpoint_s: float,
             profile, rate: float | None = None) -> dict:
    """Expected spot run of ``ideal_s`` seconds of work on ``nodes`` instances, with the terms that
    explain it: ``interruptions_per_hour`` (per instance; ``rate`` else the provider/architecture
    default), ``rate_note`` (its provenance), ``hold_probability``, ``checkpoint_time_s``,
    ``time_s`` (expected wall time, ``inf`` when the job cannot keep up) and ``time_s_at_2x_rate``,
    ``time_s_at_5x_rate`` (the same at twice and five times the rate: the sensitivity)."""
    default = rate is None
    if default:
        rate = profile.get(spot_rate_parameter(provider), architecture)
    hold = float(spot_hold_probability(nodes, profile.get("spot_capacity_nodes")))
    restart = profile.get("spot_restart_time")
    walls = spot_expected(ideal_s, nodes, np.array([1.0, 2.0, 5.0]) * rate, checkpoint_s, restart, hold)
    return {"interruptions_per_hour": float(rate),
            "rate_note": spot_rate_note(provider, architecture) if default else "given by the user",
            "hold_probability": hold, "checkpoint_time_s": float(checkpoint_s), "time_s": float(walls[0]),
            "time_s_at_2x_rate": float(walls[1]), "time_s_at_5x_rate": float(walls[2])}


def price_run(time_s: float | None, instance, architecture: str | None, nodes: int, checkpoint_s: float,
              profile, rate: float | None = None) -> dict:
    """What a run of ``time_s`` seconds (ideal, no interruptions; None: price per hour only) costs on
    ``nodes`` x ``instance`` (a catalog :class:`~perfmodel.hardware.specs.Instance`), for every
    pricing the catalog has a price for.  ``{pricing: {price_usd_per_hour (whole cluster),
    cost_usd, time_s, ...}}`` plus ``price_as_of``; spot adds the :func:`spot_run` terms, the
    discount, ``discount_implausible`` and ``cost_usd_at_2x_rate`` / ``cost_usd_at_5x_rate``."""
    priced: dict = {"instance": f"{instance.provider}/{instance.name}", "nodes": int(nodes),
                    "price_as_of": str(instance.price_as_of) if instance.price_as_of else None}
    on_demand = instance.price_usd_per_hour("on_demand")
    for pricing in ("on_demand", "spot", "reserved_1y", "reserved_3y"):
        per_node = instance.price_usd_per_hour(pricing)
        if per_node is None:
            continue
        entry = {"price_usd_per_hour": per_node * nodes, "time_s": time_s,
                 "cost_usd": None if time_s is None else float(cost_usd(time_s, per_node, nodes))}
        if pricing == "spot":
            if on_demand is not None:
                entry["discount"] = float(spot_discount(on_demand, per_node))
                entry["discount_implausible"] = entry["discount"] > IMPLAUSIBLE_SPOT_DISCOUNT
            if time_s is not None:
                terms = spot_run(time_s, nodes, instance.provider, architecture, checkpoint_s, profile, rate)
                entry.update(terms, ideal_time_s=time_s)
                for key, wall in (("cost_usd", "time_s"), ("cost_usd_at_2x_rate", "time_s_at_2x_rate"),
                                  ("cost_usd_at_5x_rate", "time_s_at_5x_rate")):
                    entry[key] = float(cost_usd(terms[wall], per_node, nodes)) if np.isfinite(terms[wall]) else None
        priced[pricing] = entry
    return priced


def price_estimate(estimate, workload, cluster, run, profile) -> dict | None:
    """:func:`price_run` for an :class:`~perfmodel.estimate.Estimate` whose cluster is a catalog
    instance (None otherwise): the whole run when the scenario has a run section and the plan fits,
    else the price per hour only.  The spot rate is ``run.interruptions_per_hour`` when given."""
    if cluster.instance is None:
        return None
    time_s = estimate.time_to_train_s if estimate.feasible else None
    plan = estimate.plan
    checkpoint_s = checkpoint_time(workload.params, plan.get("optimizer"), plan["precision"], cluster.nodes, profile,
                                   run.checkpoint_write if run is not None else None)
    rate = run.interruptions_per_hour if run is not None else None
    return price_run(time_s, cluster.instance, cluster.gpu.architecture, cluster.nodes, checkpoint_s, profile, rate)
