"""Time to train against cost for the rows of :func:`perfmodel.rank`, Pareto front marked."""

from __future__ import annotations

import numpy as np

from perfmodel.plots.style import label_points


def _money(value: float, _=None) -> str:
    if value >= 1e6:
        return f"${value / 1e6:g}M"
    if value >= 1e3:
        return f"${value / 1e3:g}k"
    return f"${value:g}"


def _readable_log_axis(axis, formatter) -> None:
    """Ticks at 1, 2, 5 x 10^k labelled by ``formatter``; no minor labels (no '3x10^1')."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


def pareto(frame, *, label_front: bool = True):
    """Scatter of ``time_to_train_s`` (days) against ``cost_usd`` for the feasible rows of a
    :func:`perfmodel.rank` frame, one marker per pricing, the Pareto front drawn as a step
    line with its points labelled ``name xnodes pricing`` (labels that would overprint are left
    out), ticks in days and dollars.  Returns a matplotlib ``Figure``."""
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
                   marker=markers[index % len(markers)], label=str(pricing).replace("_", "-"))
    front = rows[rows["pareto"]].sort_values("time_to_train_s")
    if len(front):
        ax.step(front["time_to_train_s"] / scale, front["cost_usd"], where="post", color="black",
                linewidth=1.2, label="Pareto front")
        ax.scatter(front["time_to_train_s"] / scale, front["cost_usd"], s=40, facecolors="none",
                   edgecolors="black", zorder=3)
        if label_front:
            label_points(ax, [(row["time_to_train_s"] / scale, row["cost_usd"],
                               f"{row['instance'].split('/')[-1]} x{int(row['nodes'])} {row['pricing']}")
                              for _, row in front.iterrows()], min_gap=(0.6, 0.08))
    ax.set_xscale("log")
    ax.set_yscale("log")
    _readable_log_axis(ax.xaxis, lambda v, _: f"{v:g}")
    _readable_log_axis(ax.yaxis, _money)
    what = "step" if per_step else "time to train"
    ax.set_xlabel(f"{what} ({unit})")
    ax.set_ylabel("cost per step (USD)" if per_step else "cost of the run (USD)")
    workload = frame.attrs.get("workload", "")
    pricing = ", ".join(str(p).replace("_", "-") for p in frame.attrs.get("pricing", []))
    ax.set_title((f"{workload}: " if workload else "") + f"{what} vs cost, {len(rows)} feasible instance x node counts"
                 + (f" ({pricing})" if pricing else ""))
    ax.grid(True, which="both", alpha=0.3)
    if len(rows):
        ax.legend(fontsize=8)
    return fig
