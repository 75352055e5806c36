"""Human-readable quantities at the boundary, SI floats inside.

Inside perfmodel every quantity is a float in base SI units: seconds, bytes, FLOP, FLOP/s,
bytes/s, watts, joules, US dollars.  This module is the one place where strings such as
``"80 GB"``, ``"141 GiB"``, ``"3.35 TB/s"``, ``"200 Gb/s"``, ``"989 TFLOP/s"``, ``"700 W"``,
``"60 s"`` or ``"7d"`` become those floats, and where floats become strings again.

Conventions (DESIGN.md, "SI inside, units at the edges"): decimal prefixes are powers of 1000
(GB = 1e9 bytes), binary prefixes powers of 1024 (GiB = 2**30 bytes); a lower-case ``b`` is a
bit, so ``Gb/s`` is 1e9 bits/s = 1.25e8 bytes/s.
"""

from __future__ import annotations

import math
import re

__all__ = ["DIMENSIONS", "UnitError", "parse_quantity", "format_quantity", "format_memory", "parse_duration", "parse_money",
           "format_duration", "format_money"]


class UnitError(ValueError):
    """A string that is not a quantity of the expected dimension."""


_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

# unit symbol (without prefix) -> (dimension, factor to SI)
_BASE_UNITS: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1.0),
    "byte": ("bytes", 1.0),
    "bytes": ("bytes", 1.0),
    "b": ("bytes", 0.125),
    "bit": ("bytes", 0.125),
    "B/s": ("bandwidth", 1.0),
    "Bps": ("bandwidth", 1.0),
    "b/s": ("bandwidth", 0.125),
    "bps": ("bandwidth", 0.125),
    "bit/s": ("bandwidth", 0.125),
    "FLOP": ("flops", 1.0),
    "FLOPs": ("flops", 1.0),
    "flop": ("flops", 1.0),
    "FLOP/s": ("flop_rate", 1.0),
    "FLOPS": ("flop_rate", 1.0),
    "flop/s": ("flop_rate", 1.0),
    "OP/s": ("flop_rate", 1.0),
    "OPS": ("flop_rate", 1.0),
    "W": ("power", 1.0),
    "J": ("energy", 1.0),
    "Wh": ("energy", 3600.0),
    "Hz": ("frequency", 1.0),
}

# time units take no prefix except the SI sub-second ones
_TIME_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3,
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}

DIMENSIONS: dict[str, str] = {
    "bytes": "a size, e.g. '80 GB', '141 GiB', '512 MiB'",
    "bandwidth": "a bandwidth, e.g. '3.35 TB/s', '200 Gb/s', '900 GB/s'",
    "flops": "an amount of work, e.g. '8.2 GFLOP', '3.1e23 FLOP'",
    "flop_rate": "a compute rate, e.g. '989 TFLOP/s', '19.5 TFLOPS'",
    "power": "a power, e.g. '700 W', '1.2 kW'",
    "energy": "an energy, e.g. '3.6 MJ', '12 kWh'",
    "time": "a duration, e.g. '60 s', '250 us', '7d', '36 h'",
    "frequency": "a frequency, e.g. '1410 MHz'",
    "count": "a plain number, e.g. '300e9', '1.2 G'",
}

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PATTERN = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-zµ/]*(?:/s)?)\s*$")


def _unit_factor(unit: str) -> tuple[str, float] | None:
    """(dimension, factor) of a unit symbol such as 'GiB', 'Gb/s', 'TFLOP/s', 'ms'; None if unknown."""
    if unit in _TIME_UNITS:
        return "time", _TIME_UNITS[unit]
    if unit in _BASE_UNITS:
        return _BASE_UNITS[unit]
    for prefixes in (_BINARY, _DECIMAL):
        for prefix, scale in prefixes.items():
            if prefix and unit.startswith(prefix) and unit[len(prefix):] in _BASE_UNITS:
                dimension, factor = _BASE_UNITS[unit[len(prefix):]]
                return dimension, scale * factor
    if unit in _DECIMAL:  # a bare prefix on a count: '300 G' tokens
        return "count", _DECIMAL[unit]
    return None


def parse_quantity(text: str | float | int, dimension: str) -> float:
    """Parse ``text`` as a quantity of ``dimension`` and return it in SI base units.

    Numbers (int/float) pass through unchanged: they are taken to be SI already.  Strings carry
    a unit; a bare number string is SI as well.  Raises :class:`UnitError` naming the text, the
    expected dimension and an example when the unit is unknown or of another dimension, or when
    the value is not finite.
    """
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; allowed: {', '.join(DIMENSIONS)}")
    if isinstance(text, bool):
        raise UnitError(f"{text!r} is not {DIMENSIONS[dimension]}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        match = _PATTERN.match(str(text))
        if not match:
            raise UnitError(f"{text!r} is not {DIMENSIONS[dimension]}")
        number, unit = float(match.group(1)), match.group(2)
        if unit == "":
            value = number
        else:
            found = _unit_factor(unit)
            if found is None:
                raise UnitError(f"{text!r}: unknown unit {unit!r}; expected {DIMENSIONS[dimension]}")
            unit_dimension, factor = found
            if unit_dimension != dimension:
                raise UnitError(
                    f"{text!r} is {DIMENSIONS[unit_dimension].split(',')[0]}, "
                    f"expected {DIMENSIONS[dimension]}"
                )
            value = number * factor
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not a finite number; expected {DIMENSIONS[dimension]}")
    return value


_FORMAT_UNITS = {
    "bytes": "B", "bandwidth": "B/s", "flops": "FLOP", "flop_rate": "FLOP/s",
    "power": "W", "energy": "J", "frequency": "Hz", "count": "",
}


def format_quantity(value: float, dimension: str, digits: int = 4) -> str:
    """Format an SI value for people: ``format_quantity(80e9, 'bytes') == '80 GB'``.

    Decimal prefixes are used throughout, so ``parse_quantity(format_quantity(x, d), d)``
    returns ``x`` to ``digits`` significant digits.
    """
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; allowed: {', '.join(DIMENSIONS)}")
    value = float(value)
    if dimension == "time":
        for unit, scale in (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0),
                            ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {unit}"
        return f"{value:.{digits}g} s"  # below a nanosecond (or zero): plain seconds
    unit = _FORMAT_UNITS[dimension]
    prefix = next((p for p in ("E", "P", "T", "G", "M", "k") if abs(value) >= _DECIMAL[p]), "")
    return f"{value / _DECIMAL[prefix]:.{digits}g} {prefix}{unit}".rstrip()


def format_memory(value: float, digits: int = 3) -> str:
    """Format a memory size in binary units, as nvidia-smi, PyTorch's allocator messages and the
    catalog's GPU memory (``"80 GiB"``) give it: ``format_memory(80 * 2**30) == '80 GiB'``.

    ``parse_quantity(format_memory(x), 'bytes')`` returns ``x`` to ``digits`` significant digits.
    """
    value = float(value)
    prefix = next((p for p in ("Pi", "Ti", "Gi", "Mi", "Ki") if abs(value) >= _BINARY[p]), "")
    return f"{value / _BINARY.get(prefix, 1.0):.{digits}g} {prefix}B"


def parse_duration(text: str | float | int, name: str = "duration") -> float:
    """A duration that must carry its unit, in seconds: ``'14d'``, ``'36 h'``, ``'90 min'``, ``'2w'``.

    Unlike :func:`parse_quantity`, a bare number is refused (is ``14`` days or seconds?), and so
    are negative, zero and non-finite values; the message names ``name`` and gives examples.
    """
    if isinstance(text, bool) or isinstance(text, (int, float)):
        raise UnitError(f"{name} {text!r} has no unit; give one, e.g. '14d', '36h', '90min'")
    stripped = str(text).strip()
    match = _PATTERN.match(stripped)
    if match and match.group(2) == "":
        raise UnitError(f"{name} {text!r} has no unit; give one, e.g. '{stripped}d' or '{stripped}h'")
    try:
        seconds = parse_quantity(stripped, "time")
    except UnitError:
        raise UnitError(f"{name} {text!r} is not a duration; e.g. '14d', '36h', '90min', '2w'") from None
    if not seconds > 0:
        raise UnitError(f"{name} {text!r} must be a positive duration, e.g. '14d'")
    return seconds


_MONEY = re.compile(r"^\s*(?:\$\s*({n})\s*([kKMB]?)|({n})\s*([kKMB]?)\s*(?:USD|usd|\$))\s*$".format(n=_NUMBER))
_MONEY_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}


def parse_money(text: str | float | int, name: str = "amount") -> float:
    """An amount of US dollars that must say so, in USD: ``'$50k'``, ``'$1.2M'``, ``'$250,000'``,
    ``'50000 USD'``.  A bare number is refused, and so are negative, zero and non-finite amounts.
    """
    if isinstance(text, bool) or isinstance(text, (int, float)):
        raise UnitError(f"{name} {text!r} has no currency; give dollars, e.g. '$50k', '$1.2M', '20000 USD'")
    stripped = str(text).strip().replace(",", "")
    match = _MONEY.match(stripped)
    if not match:
        bare = _PATTERN.match(stripped)
        if bare and bare.group(2) in ("", "k", "K", "M"):
            raise UnitError(f"{name} {text!r} has no currency; give dollars, e.g. '${stripped}'")
        raise UnitError(f"{name} {text!r} is not an amount of US dollars; e.g. '$50k', '$1.2M', '20000 USD'")
    number, scale = (match.group(1), match.group(2)) if match.group(1) is not None else (match.group(3), match.group(4))
    value = float(number) * _MONEY_SCALE[scale]
    if not (math.isfinite(value) and value > 0):
        raise UnitError(f"{name} {text!r} must be a positive, finite amount, e.g. '$50k'")
    return value


def format_duration(seconds: float) -> str:
    """A run length for people: ``'48.6 d'``, ``'36.0 h'``, ``'12.0 min'``, ``'45 s'`` (days from 2
    days up, hours from 1 hour up); ``'-'`` for NaN and ``'never'`` for infinity."""
    seconds = float(seconds)
    if math.isnan(seconds):
        return "-"
    if math.isinf(seconds):
        return "never"
    for unit, scale, threshold in (("d", 86400.0, 2 * 86400.0), ("h", 3600.0, 3600.0),
                                   ("min", 60.0, 120.0)):
        if abs(seconds) >= threshold:
            return f"{seconds / scale:.1f} {unit}" if abs(seconds) < 1000 * scale else f"{seconds / scale:,.0f} {unit}"
    return f"{seconds:.3g} s"


def format_money(usd: float, cents: bool | None = None) -> str:
    """Dollars with thousands separators, ``'$196,300'``; cents below $100 (``'$12.50'``) unless
    ``cents`` says otherwise; ``'-'`` for NaN."""
    usd = float(usd)
    if math.isnan(usd):
        return "-"
    if math.isinf(usd):
        return "$inf"
    show_cents = abs(usd) < 100 if cents is None else cents
    sign = "-" if usd < 0 else ""
    return f"{sign}${abs(usd):,.2f}" if show_cents else f"{sign}${abs(usd):,.0f}"
