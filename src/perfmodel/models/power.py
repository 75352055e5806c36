"""Power and energy of a training job: GPU power from utilization, node power, energy, FLOPS/W.

The GPU draws its idle power plus a share of the span up to its board power (TDP) that grows with
how busy it is (the linear utilization model used for server power by Fan, Weber and Barroso,
"Power provisioning for a warehouse-sized computer", ISCA 2007, Sec. 4.1):

    P_gpu = P_idle + u x (TDP - P_idle)

A node adds a host share (CPUs, memory, NICs, NVSwitches, fans), and the data centre multiplies
the IT energy by its power usage effectiveness (PUE, The Green Grid white paper #49, 2012).
Energy efficiency is reported from *achieved* FLOP/s, never from the datasheet peak.

Every function is a pure formula over floats or numpy arrays that broadcast.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gpu_power", "idle_power", "node_power", "energy_joules", "flops_per_watt", "co2_grams",
           "JOULES_PER_KWH"]

JOULES_PER_KWH = 3.6e6


def _check_range(name: str, value, low: float, high: float | None = None) -> None:
    array = np.asarray(value, dtype=float)
    bad = (array < low) | np.isnan(array)
    if high is not None:
        bad |= array > high
    if np.any(bad):
        allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} = {np.asarray(value)[bad].ravel()[0]!r} is out of range; allowed: {allowed}")


def idle_power(tdp, idle_fraction):
    """Idle draw estimated as a fraction of TDP (use the catalog's measured idle_power when it has one)."""
    _check_range("tdp", tdp, 0.0)
    _check_range("idle_fraction", idle_fraction, 0.0, 1.0)
    return np.asarray(idle_fraction, dtype=float) * tdp


def gpu_power(utilization, tdp, idle_power):
    """Average power of one GPU in W: ``idle + utilization x (tdp - idle)``.

    ``utilization`` is the share of time the GPU computes (0..1), e.g. the estimator's
    ``gpu_utilization`` = (forward + backward + recompute) / step time.  The same value is the
    integral over the step of a GPU at ``tdp`` while computing and at ``idle`` otherwise, divided by
    the step time.  Linear model of Fan, Weber and Barroso (ISCA 2007, Sec. 4.1).
    """
    _check_range("utilization", utilization, 0.0, 1.0)
    _check_range("tdp", tdp, 0.0)
    _check_range("idle_power", idle_power, 0.0)
    if np.any(np.asarray(idle_power, dtype=float) > np.asarray(tdp, dtype=float)):
        raise ValueError(f"idle_power {idle_power!r} W exceeds tdp {tdp!r} W; allowed: idle_power <= tdp")
    return idle_power + np.asarray(utilization, dtype=float) * (np.asarray(tdp, dtype=float) - idle_power)


def node_power(gpus_per_node, gpu_power, host_power):
    """Power of one node in W: ``gpus_per_node x gpu_power + host_power``."""
    _check_range("gpus_per_node", gpus_per_node, 0.0)
    _check_range("host_power", host_power, 0.0)
    return np.asarray(gpus_per_node, dtype=float) * gpu_power + host_power


def energy_joules(power, time, pue):
    """Facility energy in J of IT ``power`` (W) drawn for ``time`` (s): ``power x time x pue``."""
    _check_range("power", power, 0.0)
    _check_range("time", time, 0.0)
    _check_range("pue", pue, 1.0)
    return np.asarray(power, dtype=float) * time * pue


def flops_per_watt(achieved_flops, power):
    """Energy efficiency in FLOP/s per W (= FLOP/J) from *achieved* FLOP/s, not the peak."""
    _check_range("achieved_flops", achieved_flops, 0.0)
    power = np.asarray(power, dtype=float)
    if np.any(power <= 0):
        raise ValueError(f"power = {power!r} W must be positive")
    return np.asarray(achieved_flops, dtype=float) / power


def co2_grams(energy_j, grid_g_per_kwh):
    """Operational CO2 in g of ``energy_j`` at a grid carbon intensity in gCO2e/kWh."""
    _check_range("energy_j", energy_j, 0.0)
    _check_range("grid_g_per_kwh", grid_g_per_kwh, 0.0)
    return np.asarray(energy_j, dtype=float) / JOULES_PER_KWH * grid_g_per_kwh
