"""Time to train against cost for the rows of :func:`perfmodel.rank`, Pareto front marked."""

from __future__ import annotations

import numpy as np


def pareto(frame, *, label_front: bool = True):
    """Scatter of ``time_to_train_s`` (days) against ``cost_usd`` for the feasible rows of a
    :func:`perfmodel.rank` frame, one marker per pricing, the Pareto front drawn as a step
    line with its points labelled ``instance xnodes pricing``.  Returns a matplotlib ``Figure``."""
    from matplotlib.figure import Figure

    missing = {"time_to_train_s", "cost_usd", "feasible", "pareto", "pricing", "instance", "nodes"} - set(frame)
    if missing:
        raise ValueError(f"pareto plot needs a rank() frame; missing columns: {', '.join(sorted(missing))}")
    rows = frame[frame["feasible"] & np.isfinite(frame["time_to_train_s"]) & np.isfinite(frame["cost_usd"])]
    per_step = frame.attrs.get("basis") == "step"
    scale, unit = (1.0, "s") if per_step else (86400.0, "days")
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    markers = "os^Dv"
    for index, (pricing, group) in enumerate(rows.groupby("pricing", sort=True)):
        ax.scatter(group["time_to_train_s"] / scale, group["cost_usd"], s=18, alpha=0.55,
                   marker=markers[index % len(markers)], label=f"{pricing}")
    front = rows[rows["pareto"]].sort_values("time_to_train_s")
    if len(front):
        ax.step(front["time_to_train_s"] / scale, front["cost_usd"], where="post", color="black",
                linewidth=1.2, label="Pareto front")
        ax.scatter(front["time_to_train_s"] / scale, front["cost_usd"], s=40, facecolors="none",
                   edgecolors="black", zorder=3)
        if label_front:
            for _, row in front.iterrows():
                ax.annotate(f"{row['instance']} x{int(row['nodes'])} {row['pricing']}",
                            (row["time_to_train_s"] / scale, row["cost_usd"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    what = "step" if per_step else "time to train"
    ax.set_xlabel(f"{what} ({unit})")
    ax.set_ylabel("cost per step (USD)" if per_step else "cost (USD)")
    title = frame.attrs.get("workload", "")
    ax.set_title(f"{title}: {what} vs cost ({len(rows)} feasible candidates)".strip(": "))
    ax.grid(True, which="both", alpha=0.3)
    if len(rows):
        ax.legend(fontsize=8)
    return fig
