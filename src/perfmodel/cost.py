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
           "mixed_fleet", "per_dollar", "tflops_per_dollar_hour", "spot_rate_parameter",
           "SPOT_RATE_PARAMETERS", "SECONDS_PER_HOUR"]

SECONDS_PER_HOUR = 3600.0

SPOT_RATE_PARAMETERS = {
    "aws": "spot_interruptions_per_hour_aws",
    "gcp": "spot_interruptions_per_hour_gcp",
    "azure": "spot_interruptions_per_hour_azure",
}
_OTHER_SPOT_RATE = "spot_interruptions_per_hour_other"


def spot_rate_parameter(provider: str) -> str:
    """Name of the default spot interruption rate for ``provider``."""
    return SPOT_RATE_PARAMETERS.get(str(provider).lower(), _OTHER_SPOT_RATE)


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


def spot_expected(time_s, nodes, interruptions_per_hour_per_instance, checkpoint_time, restart_time):
    """Expected wall time in s of ``time_s`` of work on ``nodes`` spot instances.

    Interruptions of the cluster arrive at ``nodes x rate`` per hour (mean time between them
    M = 3600 / (nodes x rate) s); the job checkpoints every tau = sqrt(2 delta M) of work (Young
    1974, "A first order approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006,
    FGCS 22(3)), and each interruption costs half an interval of lost work plus ``restart_time``:

        wall = time_s x (1 + delta / tau) / (1 - (tau / 2 + restart) / M)

    (:func:`perfmodel.models.preemption.expected_run_time`).  With no spot node or a zero rate the
    wall time is ``time_s``; ``inf`` when interruptions come faster than the job recovers.
    """
    time_s = _non_negative("time_s", time_s)
    rate = _non_negative("interruptions_per_hour_per_instance", interruptions_per_hour_per_instance)
    nodes = _non_negative("nodes", nodes)
    delta = _non_negative("checkpoint_time", checkpoint_time)
    restart = _non_negative("restart_time", restart_time)
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
