"""Helpers shared by the subcommands: catalog loading, JSON printing, tables."""

from __future__ import annotations

import json
import math
import sys

from perfmodel.hardware.catalog import Catalog, load_catalog


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


# exit statuses shared by the subcommands
EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3
