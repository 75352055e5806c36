"""Units at the boundary (issue 2): human strings -> SI floats and back, with clear errors."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.units import DIMENSIONS, UnitError, format_memory, format_quantity, parse_quantity


@pytest.mark.parametrize(("text", "dimension", "expected"), [
    ("80 GB", "bytes", 80e9),
    ("141 GiB", "bytes", 141 * 2**30),
    ("512 MiB", "bytes", 512 * 2**20),
    ("3.35 TB/s", "bandwidth", 3.35e12),
    ("200 Gb/s", "bandwidth", 25e9),          # bits: 200e9 / 8 bytes per second
    ("900 GB/s", "bandwidth", 900e9),
    ("989 TFLOP/s", "flop_rate", 989e12),
    ("19.5 TFLOPS", "flop_rate", 19.5e12),
    ("624 TOP/s", "flop_rate", 624e12),
    ("3.1e23 FLOP", "flops", 3.1e23),
    ("700 W", "power", 700.0),
    ("1.2 kW", "power", 1200.0),
    ("12 kWh", "energy", 12 * 3.6e6),
    ("60 s", "time", 60.0),
    ("250 us", "time", 250e-6),
    ("36 h", "time", 36 * 3600.0),
    ("7d", "time", 7 * 86400.0),
    ("1410 MHz", "frequency", 1.41e9),
    ("300e9", "count", 300e9),
    ("1.2 G", "count", 1.2e9),
])
def test_issue_examples(text, dimension, expected):
    assert parse_quantity(text, dimension) == pytest.approx(expected, rel=1e-12)


def test_numbers_are_taken_as_si():
    assert parse_quantity(80e9, "bytes") == 80e9
    assert parse_quantity(7, "time") == 7.0


def test_decimal_and_binary_prefixes_differ():
    assert parse_quantity("1 GiB", "bytes") / parse_quantity("1 GB", "bytes") == pytest.approx(2**30 / 1e9)


def test_format_examples():
    assert format_quantity(80e9, "bytes") == "80 GB"
    assert format_quantity(3.35e12, "bandwidth") == "3.35 TB/s"
    assert format_quantity(989.5e12, "flop_rate") == "989.5 TFLOP/s"
    assert format_quantity(700, "power") == "700 W"
    assert format_quantity(90, "time") == "1.5 min"


def test_format_memory_examples():
    assert format_memory(80 * 2**30) == "80 GiB"  # as nvidia-smi and PyTorch's allocator count
    assert format_memory(80e9) == "74.5 GiB"
    assert format_memory(512 * 2**20) == "512 MiB"
    assert format_memory(0) == "0 B"


@given(st.floats(min_value=1.0, max_value=1e18))
def test_format_memory_then_parse_round_trips_to_three_digits(size_bytes):
    assert parse_quantity(format_memory(size_bytes), "bytes") == pytest.approx(size_bytes, rel=5.01e-3)


_ROUND_TRIP = [d for d in DIMENSIONS if d != "count"] + ["count"]


@given(dimension=st.sampled_from(_ROUND_TRIP),
       magnitude=st.floats(min_value=1e-9, max_value=1e21),
       negative=st.booleans())
def test_format_then_parse_round_trips_to_four_digits(dimension, magnitude, negative):
    value = -magnitude if negative else magnitude
    text = format_quantity(value, dimension)
    assert parse_quantity(text, dimension) == pytest.approx(value, rel=5.01e-4)


@given(st.floats(min_value=1e-3, max_value=1e6), st.sampled_from(["GB", "GiB", "MB", "TB/s", "Gb/s"]))
def test_parse_scales_linearly(number, unit):
    dimension = "bandwidth" if unit.endswith("/s") else "bytes"
    one = parse_quantity(f"1 {unit}", dimension)
    assert parse_quantity(f"{number!r} {unit}", dimension) == pytest.approx(number * one, rel=1e-12)


@pytest.mark.parametrize(("text", "dimension", "words"), [
    ("80 GX", "bytes", ["80 GX", "unknown unit 'GX'", "a size"]),
    ("700 W", "bytes", ["700 W", "a power", "expected a size"]),
    ("3.35 TB", "bandwidth", ["3.35 TB", "a size", "expected a bandwidth"]),
    ("fast", "time", ["fast", "a duration"]),
    ("inf GB", "bytes", ["inf GB"]),
])
def test_errors_name_the_text_and_the_expected_dimension(text, dimension, words):
    with pytest.raises(UnitError) as info:
        parse_quantity(text, dimension)
    for word in words:
        assert word in str(info.value)


def test_non_finite_and_bool_are_rejected():
    with pytest.raises(UnitError, match="finite"):
        parse_quantity(math.inf, "bytes")
    with pytest.raises(UnitError):
        parse_quantity(True, "bytes")


def test_unknown_dimension_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="bytes, bandwidth"):
        parse_quantity("1 GB", "mass")
    with pytest.raises(ValueError, match="allowed"):
        format_quantity(1.0, "mass")


# --- durations and dollars that must carry their unit (rank --deadline / --budget) ---------------

from perfmodel.units import format_duration, format_money, parse_duration, parse_money  # noqa: E402


@pytest.mark.parametrize(("text", "seconds"), [
    ("14d", 14 * 86400.0), ("36h", 36 * 3600.0), ("36 h", 36 * 3600.0), ("90min", 5400.0), ("2w", 14 * 86400.0),
])
def test_durations_with_units(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize(("text", "words"), [
    ("14", "has no unit"), (14, "has no unit"), ("14 GB", "is not a duration"), ("-3d", "positive"),
    ("0h", "positive"), ("inf d", "is not a duration"), ("soon", "is not a duration"),
])
def test_durations_without_a_unit_or_positive_value_are_refused(text, words):
    with pytest.raises(UnitError, match=words):
        parse_duration(text, "deadline")


@pytest.mark.parametrize(("text", "usd"), [
    ("$50k", 50e3), ("$1.2M", 1.2e6), ("$250,000", 250e3), ("20000 USD", 20e3), ("$ 300", 300.0), ("5k$", 5e3),
])
def test_money_with_the_dollar_sign(text, usd):
    assert parse_money(text) == pytest.approx(usd, rel=1e-12)


@pytest.mark.parametrize(("text", "words"), [
    ("20000", "has no currency"), (20000, "has no currency"), ("50k", "has no currency"),
    ("$-5", "positive"), ("$0", "positive"), ("€50", "not an amount of US dollars"), ("$nan", "not an amount"),
])
def test_money_without_currency_or_positive_value_is_refused(text, words):
    with pytest.raises(UnitError, match=words):
        parse_money(text, "budget")


def test_format_duration_uses_days_and_hours():
    assert format_duration(4.203e6) == "48.6 d"
    assert format_duration(36 * 3600) == "36.0 h"
    assert format_duration(700) == "11.7 min"
    assert format_duration(45) == "45 s"
    assert format_duration(float("nan")) == "-" and format_duration(float("inf")) == "never"


@given(st.floats(120.0, 1e9))
def test_format_duration_round_trips_to_its_shown_precision(seconds):
    shown = format_duration(seconds)
    assert "e" not in shown
    assert parse_duration(shown.replace(",", "").replace(" ", "")) == pytest.approx(seconds, rel=0.03)


@given(st.floats(0.01, 1e12))
def test_format_money_round_trips_and_never_uses_scientific_notation(usd):
    shown = format_money(usd)
    assert shown.startswith("$") and "e" not in shown
    assert parse_money(shown) == pytest.approx(usd, rel=1e-2, abs=0.006)


def test_format_money_separates_thousands():
    assert format_money(196311.4) == "$196,311"
    assert format_money(12.5) == "$12.50"
    assert format_money(1234.5, cents=True) == "$1,234.50"
