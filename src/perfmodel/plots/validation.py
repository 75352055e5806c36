"""Predicted against measured on log-log axes: the y = x line, a +-10 % band, one colour per GPU."""

from __future__ import annotations

import numpy as np

from perfmodel.plots.style import colour, finish, new_figure

_MARKERS = {"gemm": "o", "memcpy": "s", "collective": "^", "train": "D"}


def predicted_vs_measured(frame, title: str | None = None, band: float = 0.10):
    """Scatter of predicted vs measured values of a :func:`perfmodel.calibration.validate.validate`
    frame (rows the model could not predict are left out and counted in the title), colour per
    GPU, marker per kind, with y = x and the ``+-band`` relative band.  Each point is in its own
    row's ``metric`` unit (time_us, busbw_GBps, tflops, samples_per_s, ...), so mixed metrics share
    one chart and only the distance to the diagonal compares across points; the median APE per
    GPU is in the legend.
    Returns a matplotlib ``Figure``."""
    missing = {"gpu", "kind", "measured", "predicted", "ape"} - set(frame)
    if missing:
        raise ValueError(f"predicted_vs_measured needs a validate() frame; missing columns: {', '.join(sorted(missing))}")
    if not 0 < band < 1:
        raise ValueError(f"band must be a fraction in (0, 1), got {band}")
    ok = frame["predicted"].notna() & (frame["predicted"] > 0) & (frame["measured"] > 0)
    rows = frame[ok]
    fig, ax = new_figure(7.0, 6.0)
    for index, (gpu, group) in enumerate(rows.groupby(rows["gpu"].fillna("?"), sort=True)):
        for kind, part in group.groupby("kind", sort=True):
            first = kind == group["kind"].min()
            ax.scatter(part["measured"], part["predicted"], s=22, color=colour(index),
                       marker=_MARKERS.get(kind, "x"), alpha=0.8,
                       label=f"{gpu} (median APE {100 * group['ape'].median():.0f} %)" if first else None)
    for kind, marker in _MARKERS.items():
        if (rows["kind"] == kind).any():
            ax.scatter([], [], marker=marker, color="0.4", label=f"kind: {kind}")
    if len(rows):
        low = float(min(rows["measured"].min(), rows["predicted"].min())) / 2
        high = float(max(rows["measured"].max(), rows["predicted"].max())) * 2
        line = np.geomspace(low, high, 50)
        ax.plot(line, line, color="black", linewidth=1, label="y = x")
        ax.fill_between(line, line * (1 - band), line * (1 + band), color="0.5", alpha=0.2,
                        label=f"+-{100 * band:.0f} %")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
    ax.set_xscale("log")
    ax.set_yscale("log")
    skipped = len(frame) - len(rows)
    finish(ax, title or f"Predicted vs measured ({len(rows)} rows, {skipped} not predicted)",
           "measured (unit of the row's metric: us, GB/s, TFLOP/s, samples/s, ...)",
           "predicted (same unit as measured: us, GB/s, ...)", legend=False)
    ax.legend(fontsize=7, loc="upper left")
    return fig
