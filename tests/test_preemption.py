"""Checkpoint/restart: checkpoint size, Young-Daly interval, expected overhead."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.models import preemption
from perfmodel.profile import PARAMETERS


def test_checkpoint_is_weights_plus_optimizer_state():
    assert preemption.checkpoint_bytes(1.0) == 14.0  # bf16 weights + fp32 master, m, v
    assert preemption.checkpoint_bytes(1.0, "adam", "fp32") == 12.0
    assert preemption.checkpoint_bytes(1.0, "sgd", "bf16") == 10.0
    # GPT-3 175B: 2.45 TB; at 100 GB/s aggregate, 24.5 s
    size = preemption.checkpoint_bytes(175e9)
    assert size == 2.45e12
    assert math.isclose(preemption.checkpoint_write_time(size, 100e9), 24.5)


def test_llama3_failure_rate_gives_three_hours_at_16k_gpus():
    # Dubey et al. 2024 Sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs
    rate = PARAMETERS["gpu_failure_rate_per_hour"].default
    assert math.isclose(preemption.mtbi_from_rate(rate, 16384), 54 * 24 * 3600 / 419)
    assert preemption.mtbi_from_rate(0.0, 8) == np.inf


def test_young_interval_value():
    assert math.isclose(preemption.young_daly_interval(60.0, 3 * 3600.0), math.sqrt(2 * 60 * 10800))


def test_daly_refines_young_by_less_than_delta_for_small_checkpoints():
    young = preemption.young_daly_interval(60.0, 10800.0)
    daly = preemption.daly_interval(60.0, 10800.0)
    assert abs(daly - young) < 60.0
    assert preemption.daly_interval(3.0, 1.0) == 1.0  # delta >= 2M: checkpoint every M


@given(delta=st.floats(1.0, 3600.0), mtbi=st.floats(600.0, 1e7), restart=st.floats(0.0, 3600.0),
       step=st.floats(0.01, 0.5))
def test_overhead_is_minimised_at_young_daly(delta, mtbi, restart, step):
    best = preemption.young_daly_interval(delta, mtbi)
    at_best = preemption.expected_overhead_fraction(best, delta, mtbi, restart)
    for neighbour in (best * (1 - step), best * (1 + step)):
        assert at_best <= preemption.expected_overhead_fraction(neighbour, delta, mtbi, restart) + 1e-15


def test_overhead_has_the_first_order_terms():
    # delta/tau + (tau/2 + R)/M at tau = 1 h, delta = 60 s, M = 10 h, R = 600 s
    value = preemption.expected_overhead_fraction(3600.0, 60.0, 36000.0, 600.0)
    assert math.isclose(value, 60 / 3600 + (1800 + 600) / 36000)


def test_run_time_grows_with_interruptions_and_diverges():
    work = 30 * 86400.0
    rare = preemption.expected_run_time(work, 3600.0, 60.0, 1e9)
    often = preemption.expected_run_time(work, 3600.0, 60.0, 36000.0, 600.0)
    assert math.isclose(rare, work * (1 + 60 / 3600), rel_tol=1e-5)
    assert often > rare
    assert preemption.expected_run_time(work, 3600.0, 60.0, 1000.0) == np.inf  # loses more than it gains


def test_functions_broadcast():
    intervals = preemption.young_daly_interval(np.array([10.0, 60.0]), np.array([[3600.0], [36000.0]]))
    assert intervals.shape == (2, 2)


@pytest.mark.parametrize("call, message", [
    (lambda: preemption.mtbi_from_rate(-1e-5, 8), "rate_per_hour must be >= 0"),
    (lambda: preemption.mtbi_from_rate(1e-5, 0), "units must be > 0"),
    (lambda: preemption.checkpoint_write_time(1e12, 0.0), "storage_bandwidth must be > 0"),
    (lambda: preemption.young_daly_interval(-1.0, 3600.0), "checkpoint_time must be >= 0"),
    (lambda: preemption.young_daly_interval(60.0, 0.0), "mtbi must be > 0"),
    (lambda: preemption.expected_overhead_fraction(0.0, 60.0, 3600.0), "interval must be > 0"),
    (lambda: preemption.checkpoint_bytes(1e9, "lamb"), "optimizer 'lamb' is unknown"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
