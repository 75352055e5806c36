"""Checkpoint/restart across a run: checkpoint size and write time, mean time between
interruptions, the Young-Daly checkpoint interval, and the expected overhead.

First-order model (Young 1974, "A first order approximation to the optimum checkpoint interval",
CACM 17(9); Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart
dumps", FGCS 22(3), Sec. 3): a run checkpoints every ``tau`` seconds of work, each write takes
``delta``; interruptions arrive at random with mean time ``M`` between them; each costs the
restart time ``R`` plus on average half an interval of lost work.  Overhead per unit of time
``delta/tau + (tau/2 + R)/M``, minimised at ``tau = sqrt(2 delta M)``.

Pure functions over floats or numpy arrays that broadcast; seconds, bytes, bytes/s.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import checks
from perfmodel.models.memory import state_bytes_per_param

__all__ = ["checkpoint_bytes", "checkpoint_write_time", "mtbi_from_rate", "young_daly_interval",
           "daly_interval", "expected_overhead_fraction", "expected_run_time"]


def checkpoint_bytes(params, optimizer="adam", precision="bf16"):
    """Bytes of one training checkpoint: weights plus optimizer state (fp32 master weights
    included in mixed precision; no gradients).  Mixed-precision Adam: 2 + 12 = 14 bytes per
    parameter (the 16 of Rajbhandari et al. 2020 Sec. 3.1 less the gradients)."""
    weights, _, optimizer_state = state_bytes_per_param(precision, optimizer)
    return checks.nonnegative("params", params) * (weights + optimizer_state)


def checkpoint_write_time(checkpoint_bytes, storage_bandwidth):
    """Seconds to write ``checkpoint_bytes`` at ``storage_bandwidth`` bytes/s (synchronous write)."""
    return (checks.nonnegative("checkpoint_bytes", checkpoint_bytes)
            / checks.positive("storage_bandwidth", storage_bandwidth))


def mtbi_from_rate(rate_per_hour, units):
    """Mean time between interruptions of the whole job, in seconds, when each of ``units``
    (GPUs, or instances) is interrupted ``rate_per_hour`` times per hour independently and any
    interruption stops the job: ``3600 / (rate x units)``; ``inf`` for a zero rate."""
    rate = checks.nonnegative("rate_per_hour", rate_per_hour) * checks.positive("units", units)
    with np.errstate(divide="ignore"):
        return np.where(rate > 0, 3600.0 / np.where(rate > 0, rate, 1.0), np.inf)


def young_daly_interval(checkpoint_time, mtbi):
    """Optimal work time between checkpoints, ``sqrt(2 delta M)`` (Young 1974, first-order optimum)."""
    delta = checks.nonnegative("checkpoint_time", checkpoint_time)
    return np.sqrt(2.0 * delta * checks.positive("mtbi", mtbi, allow_inf=True))


def daly_interval(checkpoint_time, mtbi):
    """Daly 2006 higher-order optimum: ``sqrt(2 delta M) [1 + (1/3) sqrt(delta/(2M))
    + delta/(18 M)] - delta`` for ``delta < 2M``, else ``M``."""
    delta = checks.nonnegative("checkpoint_time", checkpoint_time)
    mtbi = checks.positive("mtbi", mtbi, allow_inf=True)
    x = delta / (2.0 * mtbi)
    higher = np.sqrt(2.0 * delta * mtbi) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - delta
    return np.where(delta < 2.0 * mtbi, higher, mtbi)


def expected_overhead_fraction(interval, checkpoint_time, mtbi, restart_time=0.0):
    """Expected time lost per unit of run time, first order (Young 1974; Daly 2006 Sec. 3):
    checkpoint writes ``delta/tau`` plus, per interruption (rate ``1/M``), half an interval of
    lost work and a restart: ``(tau/2 + R)/M``.  Minimised over ``tau`` at :func:`young_daly_interval`."""
    interval = checks.positive("interval", interval, allow_inf=True)
    delta = checks.nonnegative("checkpoint_time", checkpoint_time)
    mtbi = checks.positive("mtbi", mtbi, allow_inf=True)
    return delta / interval + (interval / 2.0 + checks.nonnegative("restart_time", restart_time)) / mtbi


def expected_run_time(work_time, interval, checkpoint_time, mtbi, restart_time=0.0):
    """Expected wall-clock seconds to finish ``work_time`` seconds of training.

    Wall time ``T`` covers the work and its checkpoints, ``W (1 + delta/tau)``, plus ``T/M``
    interruptions each losing ``tau/2 + R``: ``T = W (1 + delta/tau) / (1 - (tau/2 + R)/M)``
    (the first-order model of :func:`expected_overhead_fraction`, solved for ``T``); ``inf``
    when interruptions come faster than the run can recover from them.
    """
    work = checks.nonnegative("work_time", work_time)
    interval = checks.positive("interval", interval, allow_inf=True)
    delta = checks.nonnegative("checkpoint_time", checkpoint_time)
    mtbi = checks.positive("mtbi", mtbi, allow_inf=True)
    losing = 1.0 - (interval / 2.0 + checks.nonnegative("restart_time", restart_time)) / mtbi
    with np.errstate(divide="ignore"):
        return np.where(losing > 0, work * (1.0 + delta / interval) / np.where(losing > 0, losing, 1.0), np.inf)
