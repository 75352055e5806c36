"""Scaling curves: speedup against GPU count with the linear line, efficiency on a second axis."""

from __future__ import annotations

import numpy as np

from perfmodel.plots.style import colour, finish, new_figure


def scaling_plot(frames, labels: list[str] | None = None, title: str | None = None):
    """Speedup (relative to the smallest GPU count) vs number of GPUs, log2 x axis, with the
    linear-scaling line; parallel efficiency (speedup / GPU ratio, %) on the right axis as dashed
    lines.  ``frames`` is one :func:`perfmodel.scaling` DataFrame or a list of them
    (e.g. strong and weak); infeasible counts (NaN) are skipped.  Returns a matplotlib ``Figure``."""
    frames = list(frames) if isinstance(frames, (list, tuple)) else [frames]
    if not frames:
        raise ValueError("no scaling frame to plot")
    labels = labels or [f"{frame.attrs.get('mode', 'scaling')} scaling" for frame in frames]
    if len(labels) != len(frames):
        raise ValueError(f"labels has {len(labels)} entries for {len(frames)} frames")
    fig, ax = new_figure(8.0, 5.0)
    right = ax.twinx()
    counts = []
    for index, (frame, label) in enumerate(zip(frames, labels)):
        missing = {"num_gpus", "speedup", "efficiency"} - set(frame)
        if missing:
            raise ValueError(f"scaling plot needs a scaling() frame; missing columns: {', '.join(sorted(missing))}")
        rows = frame[np.isfinite(frame["speedup"].astype(float))]
        counts += list(rows["num_gpus"])
        ax.plot(rows["num_gpus"], rows["speedup"], marker="o", color=colour(index), label=f"{label}: speedup")
        right.plot(rows["num_gpus"], 100 * rows["efficiency"], linestyle="--", marker=".", color=colour(index),
                   alpha=0.7, label=f"{label}: efficiency")
    if counts:
        low, high = min(counts), max(counts)
        ideal = np.array([low, high], dtype=float)
        ax.plot(ideal, ideal / low, color="black", linewidth=1, linestyle=":", label="linear scaling")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(sorted(set(counts)), [str(int(n)) for n in sorted(set(counts))])
    right.set_ylabel("parallel efficiency (%)")
    right.set_ylim(0, 110)
    finish(ax, title or "Scaling: speedup and efficiency", "number of GPUs",
           "speedup (x, vs smallest GPU count)", legend=False)
    handles, names = ax.get_legend_handles_labels()
    more, more_names = right.get_legend_handles_labels()
    ax.legend(handles + more, names + more_names, fontsize=8, loc="upper left")
    return fig
