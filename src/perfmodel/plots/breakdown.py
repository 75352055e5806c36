"""Step time split into its exposed components, one stacked bar per estimate."""

from __future__ import annotations

from perfmodel.plots.style import CATEGORY_COLOURS, as_dicts, colour, estimate_label, estimate_title, finish, new_figure

# breakdown component -> colour category (recompute gets its own shade of compute)
_CATEGORY = {
    "forward": "compute", "backward": "compute", "recompute": "recompute", "tp_comm": "TP communication",
    "cp_comm": "CP communication", "moe_comm": "EP communication", "pp_bubble": "pipeline bubble",
    "pp_comm": "PP communication",
    "dp_comm": "DP communication", "zero_gather": "DP communication", "optimizer": "memory bandwidth",
    "overhead": "framework overhead", "input": "input pipeline",
}


def breakdown(estimates, labels: list[str] | None = None, title: str | None = None, relative: bool = False):
    """Stacked bar of ``breakdown_s`` (seconds per step) for one :class:`~perfmodel.Estimate`
    or a list; components that are zero everywhere are left out; each bar is labelled with its
    step time and bottleneck (estimates that do not fit are marked "infeasible"), in the axis's
    unit (ms when every step is under a second, else s).  ``relative`` draws each component as a
    share of its own step (%), to compare jobs of different sizes.  The title names the model,
    GPUs and plan of a single estimate.  Returns a matplotlib ``Figure``."""
    items = as_dicts(estimates)
    labels = labels or [estimate_label(item) for item in items]
    if len(labels) != len(items):
        raise ValueError(f"labels has {len(labels)} entries for {len(items)} estimates")
    names = []
    for item in items:
        names += [n for n, s in item.get("breakdown_s", {}).items() if s and s > 0 and n not in names]
    fig, ax = new_figure(max(6.0, 1.6 * len(items) + 4.0), 5.0)
    positions = range(len(items))
    bottom = [0.0] * len(items)
    steps = [item.get("step_time_s") or 0.0 for item in items]
    unit, per_second = ("ms", 1e3) if max(steps) < 1.0 else ("s", 1.0)
    scale = [100.0 / item["step_time_s"] if relative and item.get("step_time_s") else per_second for item in items]
    for index, name in enumerate(names):
        values = [(item.get("breakdown_s", {}).get(name, 0.0) or 0.0) * k for item, k in zip(items, scale)]
        shade = CATEGORY_COLOURS.get(_CATEGORY.get(name), colour(index))
        hatch = "//" if name in ("backward", "zero_gather") else None
        ax.bar(positions, values, bottom=bottom, color=shade, hatch=hatch, edgecolor="white",
               linewidth=0.5, label=name.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values)]
    top = max(bottom) if any(bottom) else 1.0
    for x, item, height in zip(positions, items, bottom):
        step = item.get("step_time_s")
        shown = "no step time" if step is None else f"{step * per_second:.3g} {unit}"
        text = "infeasible" if not item.get("feasible") else f"{shown}\n{item.get('bottleneck', '')}"
        ax.annotate(text, (x, height), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize=8)
    ax.set_ylim(0, top * 1.22)
    ax.set_xticks(list(positions), labels, fontsize=8)
    default = (estimate_title(items[0], "Step time breakdown") if len(items) == 1
               else "Step time breakdown (exposed time per component)")
    finish(ax, title or default, "scenario",
           "share of the step (%)" if relative else f"time per step ({unit})", grid_axis="y")
    if ax.get_legend():
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig

