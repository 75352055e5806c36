"""Calibration curve of prediction intervals: nominal level against the observed coverage."""

from __future__ import annotations

import numpy as np

from perfmodel.plots.style import colour, finish, new_figure


def calibration_curve(frame, by: str | None = "kind", levels=(0.50, 0.80, 0.95), title: str | None = None):
    """Observed coverage (share of measured values inside the interval) against the nominal
    level, for all rows and for each group of ``by`` (kind, gpu, framework, source; groups of
    fewer than 10 rows are left out), from a frame with interval columns (``low_50``/``high_50``,
    ... or ``low``/``high`` = 80 %, see :mod:`perfmodel.calibration.coverage`).  Points on the
    diagonal are honest intervals; below it, over-confident ones.  The legend carries each
    group's row count and median 80 % high/low width.  Returns a matplotlib ``Figure``."""
    from perfmodel.calibration.coverage import bound_columns, coverage_table

    if not any(bound_columns(frame, level) for level in levels):
        raise ValueError("calibration_curve: the frame has no interval columns (low_50/high_50, ..., or low/high); "
                         "score it with perfmodel.calibration.intervals.interval_columns first")
    table = coverage_table(frame, by, levels)
    fig, ax = new_figure(6.0, 5.5)
    ax.plot([0, 1], [0, 1], color="black", linewidth=1, label="honest (observed = nominal)")
    key = by or None
    for index, row in table.iterrows():
        name = row[key] if key else "all"
        if name != "all" and row["n"] < 10:
            continue
        nominal = [level for level in levels if np.isfinite(row[f"coverage_{round(100 * level)}"])]
        observed = [row[f"coverage_{round(100 * level)}"] for level in nominal]
        width = row.get("width_80", np.nan)
        label = f"{name} (n={row['n']}" + (f", 80 % width x{width:.2f})" if np.isfinite(width) else ")")
        ax.plot(nominal, observed, marker="o", color="black" if name == "all" else colour(index),
                linewidth=2.0 if name == "all" else 1.0, label=label)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    finish(ax, title or "Prediction-interval calibration", "nominal coverage (fraction of rows)",
           "observed coverage (fraction of rows inside the interval)")
    return fig
