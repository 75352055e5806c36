"""The roofline figure: one ceiling per precision and the ops of a workload placed on it."""

from __future__ import annotations

import numpy as np

from perfmodel.hardware.specs import GPU
from perfmodel.models.compute import ridge_point
from perfmodel.plots.style import label_points


def roofline(gpu: GPU, points, precisions, workload: str | None = None, title: str | None = None):
    """A log-log roofline of ``gpu``: attainable TFLOP/s against arithmetic intensity.

    ``points`` is the DataFrame of :func:`perfmodel.models.compute.roofline_points` (columns
    ``op``, ``kind``, ``intensity``, ``attained_flops``, and ``time_s`` when known; ops without
    FLOPs are left out, the axes being logarithmic); ``precisions`` the ceilings to draw (each
    needs a peak on the GPU).  Op labels never overprint: the longest-running ops (else the
    highest) are labelled first and a label too close to one already drawn is left out (the
    title counts them).  ``workload`` names the model in the title.  Returns a matplotlib
    ``Figure`` (no pyplot state).
    """
    from matplotlib.figure import Figure

    points = points[(points["intensity"] > 0) & (points["attained_flops"] > 0)]  # log axes
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    bandwidth = gpu.memory_bandwidth
    low = min(0.1, float(np.min(points["intensity"])) / 2) if len(points) else 0.1
    high = max(max(ridge_point(gpu.peak(p), bandwidth) for p in precisions) * 10,
               float(np.max(points["intensity"])) * 2 if len(points) else 1.0)
    intensity = np.geomspace(low, high, 256)
    styles = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]
    for index, precision in enumerate(precisions):
        peak = gpu.peak(precision)
        ax.plot(intensity, np.minimum(peak, bandwidth * intensity) / 1e12, color="0.35",
                linestyle=styles[index % len(styles)],
                label=f"{precision} roofline (ridge {ridge_point(peak, bandwidth):.0f} FLOP/B)")
    markers = "osD^vP*X"
    for index, (kind, group) in enumerate(points.groupby("kind", sort=True)):
        ax.scatter(group["intensity"], group["attained_flops"] / 1e12, label=f"{kind} ops", zorder=3,
                   marker=markers[index % len(markers)])
    order = points.sort_values("time_s" if "time_s" in points else "attained_flops", ascending=False)
    skipped = label_points(ax, [(row["intensity"], row["attained_flops"] / 1e12, row["op"])
                                for _, row in order.drop_duplicates("op").iterrows()], min_gap=(0.35, 0.08))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attained throughput (TFLOP/s)")
    name = f"{workload} on " if workload else ""
    hidden = f"; {skipped} crowded op labels left out" if skipped else ""
    ax.set_title(title or f"Roofline: {name}{gpu.name}, HBM {bandwidth / 1e12:.2f} TB/s{hidden}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return fig
