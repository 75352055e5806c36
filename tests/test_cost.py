"""Cost, spot preemption, perf-per-dollar and power/energy formulas (perfmodel.cost, models.power)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel import cost
from perfmodel.models import power
from perfmodel.profile import PARAMETERS

times = st.floats(0.0, 1e8)
prices = st.floats(0.01, 500.0)
counts = st.integers(1, 512)
rates = st.floats(0.0, 0.05)
seconds = st.floats(0.0, 3600.0)


# --- cost ----------------------------------------------------------------------------------------

@given(times, prices, counts)
def test_on_demand_cost_is_time_times_price_times_nodes(time_s, price, nodes):
    assert cost.cost_usd(time_s, price, nodes) == pytest.approx(time_s / 3600 * price * nodes)


def test_cost_broadcasts_over_arrays():
    result = cost.cost_usd(np.array([3600.0, 7200.0]), 10.0, np.array([[1], [4]]))
    np.testing.assert_allclose(result, [[10.0, 20.0], [40.0, 80.0]])


def test_gpu_hours_and_per_unit_costs():
    assert cost.gpu_hours(7200.0, 16) == pytest.approx(32.0)
    # 1e6 tokens at 1e4 tokens/s = 100 s on 2 nodes at 36 $/h = 2 $
    assert cost.cost_per_million_tokens(1e4, 36.0, 2) == pytest.approx(2.0)
    # 1.28e6 samples at 3200 samples/s = 400 s on 1 node at 9 $/h = 1 $
    assert cost.cost_per_epoch(3200.0, 1.28e6, 9.0, 1) == pytest.approx(1.0)


@given(times, counts, rates, seconds, seconds)
def test_spot_never_faster_than_the_ideal_run(time_s, nodes, rate, checkpoint, restart):
    wall = float(cost.spot_expected(time_s, nodes, rate, checkpoint, restart))
    assert wall >= time_s * (1 - 1e-12)


@given(st.floats(1.0, 1e7), counts, rates, seconds, seconds, prices)
def test_spot_expected_cost_at_least_naive_spot_cost(time_s, nodes, rate, checkpoint, restart, price):
    wall = float(cost.spot_expected(time_s, nodes, rate, checkpoint, restart))
    if math.isfinite(wall):
        assert cost.cost_usd(wall, price, nodes) >= cost.cost_usd(time_s, price, nodes) * (1 - 1e-12)


@given(st.floats(1.0, 1e7), st.integers(1, 64), st.floats(1e-4, 0.01), st.floats(1.0, 600.0))
def test_more_spot_nodes_never_finish_sooner(time_s, nodes, rate, checkpoint):
    fewer = float(cost.spot_expected(time_s, nodes, rate, checkpoint, 300.0))
    more = float(cost.spot_expected(time_s, nodes + 1, rate, checkpoint, 300.0))
    assert more >= fewer * (1 - 1e-12)


def test_spot_expected_hand_computed():
    # one node, 1 interruption/h: M = 3600 s; delta = 200 s -> tau = sqrt(2*200*3600) = 1200 s;
    # wall = W (1 + 200/1200) / (1 - (600 + 0)/3600) = W * (7/6) / (5/6) = 1.4 W
    assert float(cost.spot_expected(1000.0, 1, 1.0, 200.0, 0.0)) == pytest.approx(1400.0)
    # the restart adds to the loss per interruption: (600 + 600)/3600 = 1/3 -> (7/6)/(2/3) = 1.75
    assert float(cost.spot_expected(1000.0, 1, 1.0, 200.0, 600.0)) == pytest.approx(1750.0)


def test_spot_without_interruptions_is_the_ideal_time():
    np.testing.assert_allclose(cost.spot_expected([10.0, 5.0], [4, 0], [0.0, 1.0], 60.0, 600.0), [10.0, 5.0])


def test_spot_that_cannot_keep_up_is_infinite():
    # 100 nodes x 1/h: M = 36 s, shorter than the 600 s restart
    assert math.isinf(float(cost.spot_expected(1000.0, 100, 1.0, 60.0, 600.0)))


def test_mixed_fleet_endpoints():
    work, nodes, on_demand, spot = 86400.0, 8, 30.0, 10.0
    wall, dollars = cost.mixed_fleet(work, nodes, 0, on_demand, spot, 0.01, 120.0, 600.0)
    assert float(wall) == pytest.approx(work)
    assert float(dollars) == pytest.approx(cost.cost_usd(work, on_demand, nodes))
    wall, dollars = cost.mixed_fleet(work, nodes, nodes, on_demand, spot, 0.01, 120.0, 600.0)
    expected = float(cost.spot_expected(work, nodes, 0.01, 120.0, 600.0))
    assert float(wall) == pytest.approx(expected)
    assert float(dollars) == pytest.approx(cost.cost_usd(expected, spot, nodes))


def test_mixed_fleet_pays_every_node_for_the_whole_wall_time():
    wall, dollars = cost.mixed_fleet(36000.0, 4, 2, 30.0, 10.0, 0.02, 120.0, 600.0)
    assert float(dollars) == pytest.approx(float(wall) / 3600 * (2 * 30.0 + 2 * 10.0))


def test_mixed_fleet_rejects_more_spot_nodes_than_nodes():
    with pytest.raises(ValueError, match="spot_nodes"):
        cost.mixed_fleet(100.0, 4, 5, 30.0, 10.0, 0.01, 1.0, 1.0)


def test_peak_perf_per_dollar_of_claim_9():
    # article: p4d.24xlarge, 8 x A100 (312 TFLOP/s dense FP16 each = 2.5 PFLOP/s) at $32.77/h
    assert cost.tflops_per_dollar_hour(8 * 312e12, 32.77) == pytest.approx(76.17, rel=1e-3)


def test_per_dollar_counts_units_per_dollar():
    # 1000 tokens/s for one hour = 3.6e6 tokens for $36 -> 1e5 tokens per dollar
    assert cost.per_dollar(1000.0, 36.0) == pytest.approx(1e5)


@pytest.mark.parametrize("call, field", [
    (lambda: cost.cost_usd(-1.0, 1.0, 1), "time_s"),
    (lambda: cost.cost_usd(1.0, float("nan"), 1), "price_usd_per_hour_per_node"),
    (lambda: cost.spot_expected(1.0, 1, -0.1, 1.0, 1.0), "interruptions_per_hour_per_instance"),
    (lambda: cost.spot_expected(1.0, 1, 0.1, -5.0, 1.0), "checkpoint_time"),
])
def test_cost_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_spot_rate_defaults_per_provider():
    for provider in ("aws", "gcp", "azure"):
        assert cost.spot_rate_parameter(provider) == f"spot_interruptions_per_hour_{provider}"
    assert cost.spot_rate_parameter("lambda") == "spot_interruptions_per_hour_other"
    # AWS: the Spot Instance Advisor's top bucket, 20 % per month
    assert PARAMETERS["spot_interruptions_per_hour_aws"].default == pytest.approx(0.2 / 730)


# --- power and energy ----------------------------------------------------------------------------

@given(st.floats(0.0, 1.0), st.floats(50.0, 1500.0), st.floats(0.0, 1.0))
def test_gpu_power_between_idle_and_tdp(utilization, tdp, idle_share):
    idle = idle_share * tdp
    value = float(power.gpu_power(utilization, tdp, idle))
    assert idle - 1e-9 <= value <= tdp + 1e-9


def test_gpu_power_endpoints_and_linearity():
    assert float(power.gpu_power(0.0, 700.0, 100.0)) == pytest.approx(100.0)
    assert float(power.gpu_power(1.0, 700.0, 100.0)) == pytest.approx(700.0)
    assert float(power.gpu_power(0.5, 700.0, 100.0)) == pytest.approx(400.0)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_gpu_power_monotone_in_utilization(a, b):
    low, high = sorted((a, b))
    assert float(power.gpu_power(low, 400.0, 60.0)) <= float(power.gpu_power(high, 400.0, 60.0))


def test_mean_power_equals_integral_over_busy_and_idle_phases():
    # 0.3 s computing at TDP, 0.2 s waiting at idle: energy = 0.3*700 + 0.2*100 = 230 J = 0.5 s x mean power
    mean = float(power.gpu_power(0.3 / 0.5, 700.0, 100.0))
    assert mean * 0.5 == pytest.approx(0.3 * 700.0 + 0.2 * 100.0)


def test_node_power_energy_and_co2():
    node = float(power.node_power(8, 500.0, 2000.0))
    assert node == pytest.approx(6000.0)
    # 6 kW for one hour in a PUE 1.5 building = 9 kWh
    energy = float(power.energy_joules(node, 3600.0, 1.5))
    assert energy / power.JOULES_PER_KWH == pytest.approx(9.0)
    assert float(power.co2_grams(energy, 400.0)) == pytest.approx(3600.0)


def test_flops_per_watt_uses_achieved_flops():
    # 8 x A100 at 45 % MFU (140 TFLOP/s achieved each) drawing 4 kW: 0.28 TFLOP/s per W, not the 0.62 of peak
    achieved = 8 * 0.45 * 312e12
    assert float(power.flops_per_watt(achieved, 4000.0)) == pytest.approx(achieved / 4000.0)
    assert float(power.flops_per_watt(achieved, 4000.0)) < 8 * 312e12 / 4000.0


def test_idle_power_from_fraction():
    assert float(power.idle_power(700.0, 0.15)) == pytest.approx(105.0)


@pytest.mark.parametrize("call, field", [
    (lambda: power.gpu_power(1.5, 400.0, 50.0), "utilization"),
    (lambda: power.gpu_power(0.5, 400.0, 500.0), "idle_power"),
    (lambda: power.energy_joules(100.0, 10.0, 0.9), "pue"),
    (lambda: power.energy_joules(100.0, -1.0, 1.1), "time"),
    (lambda: power.flops_per_watt(1e12, 0.0), "power"),
    (lambda: power.co2_grams(1e6, -3.0), "grid_g_per_kwh"),
])
def test_power_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_power_and_cost_parameters_say_where_they_come_from():
    names = ["gpu_idle_fraction", "host_power_per_node", "pue", "spot_restart_time",
             "checkpoint_write_bandwidth_per_node", *cost.SPOT_RATE_PARAMETERS.values(),
             "spot_interruptions_per_hour_other"]
    for name in names:
        parameter = PARAMETERS[name]
        assert len(parameter.source) > 30, name
        assert parameter.low <= parameter.default <= parameter.high
    assert PARAMETERS["pue"].default == pytest.approx(1.1)


# --- spot you can defend: hold probability, per-GPU rates, discounts, pricing a run -----------------

def test_hold_probability_is_one_for_one_node_and_falls_with_every_node():
    nodes = np.arange(1, 257)
    hold = cost.spot_hold_probability(nodes, 16.0)
    assert hold[0] == 1.0
    assert np.all(np.diff(hold) < 0) and np.all(hold > 0)
    assert hold[15] == pytest.approx(math.exp(-15 / 16))


@given(times.filter(lambda t: t > 1.0), counts, st.floats(1e-6, 0.01), seconds, seconds,
       st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_a_lower_hold_probability_never_finishes_sooner(time_s, nodes, rate, checkpoint, restart, p, q):
    low, high = min(p, q), max(p, q)
    slow = cost.spot_expected(time_s, nodes, rate, checkpoint, restart, low)
    fast = cost.spot_expected(time_s, nodes, rate, checkpoint, restart, high)
    assert slow >= fast * (1 - 1e-12)


def test_hold_probability_must_be_a_probability():
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="hold_probability"):
            cost.spot_expected(100.0, 2, 0.01, 10.0, 60.0, bad)


def test_aws_spot_rate_depends_on_the_gpu_architecture():
    from perfmodel.profile import CalibrationProfile

    profile = CalibrationProfile()
    name = cost.spot_rate_parameter("aws")
    # Spot Instance Advisor bands (2025-05-01): A100 5-10 %, H100 10-20 %, L4 <5 % per month; top of each band
    assert profile.get(name, "Ampere") == pytest.approx(0.10 / 730)
    assert profile.get(name, "Hopper") == pytest.approx(0.20 / 730)
    assert profile.get(name, "Ada") == pytest.approx(0.05 / 730)
    assert "2025-05-01" in cost.spot_rate_note("aws", "Hopper")
    assert cost.spot_rate_note("aws", "Blackwell").startswith("ASSUMPTION")
    assert cost.spot_rate_note("lambda", None).startswith("ASSUMPTION")


def test_spot_discount_and_the_implausible_flag():
    from perfmodel import load_catalog
    from perfmodel.profile import CalibrationProfile

    assert cost.spot_discount(10.0, 2.5) == pytest.approx(0.75)
    run = cost.price_run(86400.0, load_catalog().instance("aws/p6-b200.48xlarge"), "Blackwell", 4, 60.0,
                         CalibrationProfile())
    assert run["spot"]["discount"] > cost.IMPLAUSIBLE_SPOT_DISCOUNT and run["spot"]["discount_implausible"]


def test_price_run_prices_each_pricing_the_catalog_has():
    from perfmodel import load_catalog
    from perfmodel.profile import CalibrationProfile

    instance = load_catalog().instance("aws/p5.48xlarge")
    run = cost.price_run(10 * 86400.0, instance, "Hopper", 4, 120.0, CalibrationProfile())
    assert "reserved_1y" not in run  # the catalog has no reserved prices
    on_demand, spot = run["on_demand"], run["spot"]
    assert on_demand["cost_usd"] == pytest.approx(10 * 24 * instance.price_on_demand_usd_per_hour * 4)
    assert on_demand["price_usd_per_hour"] == pytest.approx(4 * instance.price_on_demand_usd_per_hour)
    assert spot["ideal_time_s"] <= spot["time_s"] <= spot["time_s_at_2x_rate"] <= spot["time_s_at_5x_rate"]
    assert spot["cost_usd"] == pytest.approx(spot["time_s"] / 3600 * instance.price_usd_per_hour("spot") * 4)
    assert spot["hold_probability"] == pytest.approx(math.exp(-3 / 16))
    per_hour_only = cost.price_run(None, instance, "Hopper", 4, 120.0, CalibrationProfile())
    assert per_hour_only["on_demand"]["cost_usd"] is None and "time_s_at_2x_rate" not in per_hour_only["spot"]


def test_spot_assumption_parameters_say_they_are_assumptions():
    assert PARAMETERS["spot_capacity_nodes"].source.startswith("ASSUMPTION")
    assert "2025-05-01" in PARAMETERS["spot_interruptions_per_hour_aws"].source
