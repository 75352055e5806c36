"""Helpers shared by the subcommands: exit statuses, checked numeric flags, catalog loading,
JSON printing, tables."""

from __future__ import annotations

import argparse
import json
import math
import sys

from perfmodel.hardware.catalog import Catalog, load_catalog
from perfmodel.inputs import INTEGER_LIMITS, excerpt

EXIT_OK = 0
"""An answer was printed."""
EXIT_BAD_INPUT = 2
"""Bad input (a file, a field, a flag): one error line on stderr, nothing else done."""
EXIT_INFEASIBLE = 3
"""Valid input, but nothing feasible (the model does not fit, no plan is valid); reasons printed."""


def int_arg(low: int, high: int | None = None):
    """argparse ``type=`` for a whole number in ``low..high`` (``high`` None: no upper bound)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a whole number") from None
        if value < low or (high is not None and value > high):
            allowed = f"from {low:,} to {high:,}" if high is not None else f"{low:,} or more"
            raise argparse.ArgumentTypeError(f"{excerpt(value)}: must be {allowed}")
        return value

    parse.__name__ = "whole number"
    return parse


def count_arg(field: str):
    """argparse ``type=`` for a count bounded like the same field of a scenario
    (:data:`perfmodel.inputs.INTEGER_LIMITS`)."""
    return int_arg(1, INTEGER_LIMITS[field])


def float_arg(low: float | None = None, high: float | None = None, *, low_open: bool = False):
    """argparse ``type=`` for a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``);
    nan and inf are refused."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{excerpt(text)} is not a number") from None
        too_low = low is not None and (value <= low if low_open else value < low)
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            lower = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
            upper = "" if high is None else f"<= {high:g}"
            raise argparse.ArgumentTypeError(
                f"{excerpt(text)}: must be a finite number {' and '.join(p for p in (lower, upper) if p)}".rstrip())
        return value

    parse.__name__ = "number"
    return parse


def catalog_from(args) -> Catalog:
    return load_catalog(*getattr(args, "catalog", []))


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _clean(value.item())
    return value


def print_json(data) -> None:
    """JSON on stdout; NaN/inf become null so every JSON parser reads it."""
    json.dump(_clean(data), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_table(rows: list[dict], columns: list[str] | None = None) -> None:
    """A plain fixed-width table for people."""
    if not rows:
        print("(no rows)")
        return
    columns = columns or list(rows[0])
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def profile_from(args):
    """The calibration profile named by ``--calibration``, else the shipped one."""
    from perfmodel.profile import default_profile, load_profile

    path = getattr(args, "calibration", None)
    return load_profile(path) if path else default_profile()


def attention_of(args, gpu) -> bool:
    """Fused attention or not for ``--attention fused|unfused``; left out, the default of the GPU and
    ``--framework`` (:func:`perfmodel.plans.default_flash_attention`)."""
    from perfmodel.plans import default_flash_attention

    choice = getattr(args, "attention", None)
    if choice is not None:
        return choice == "fused"
    return default_flash_attention(gpu, getattr(args, "framework", None))


def attention_text(args, flash: bool) -> str:
    """How the ops' attention was timed, and whether that was given or a default."""
    how = "fused attention (FlashAttention)" if flash else "unfused attention"
    return how if getattr(args, "attention", None) else f"{how}, the default; --attention to change"
