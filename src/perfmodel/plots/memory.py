"""Memory per GPU by component, one stacked bar per estimate, against the GPU's capacity."""

from __future__ import annotations

from perfmodel.plots.style import as_dicts, colour, estimate_label, estimate_title, finish, new_figure

# keys of Estimate.memory that are not bytes of a component (shares, verdicts, totals)
# not GPU memory components: totals, flags, and host memory (offload; perfmodel.models.offload)
GIB = 2.0**30  # bytes per GiB: GPU memory is counted in binary units (the catalog, nvidia-smi)
_NOT_COMPONENTS = {"total", "capacity", "headroom", "fits", "reasons", "stage", "bound_share", "host", "host_capacity",
                   "host_fits"}


def memory(estimates, labels: list[str] | None = None, title: str | None = None):
    """Stacked bar of the ``memory`` components (GiB = 2^30 bytes per GPU, as nvidia-smi counts) of one
    :class:`~perfmodel.Estimate` or a list, with each GPU's usable capacity as a red
    line over its bar (its value in the legend) and the total (and shortfall, if it does not fit)
    written on the bar's top.  The title names the model, GPUs and plan of a single estimate.
    Returns a matplotlib ``Figure``."""
    items = as_dicts(estimates)
    labels = labels or [estimate_label(item) for item in items]
    if len(labels) != len(items):
        raise ValueError(f"labels has {len(labels)} entries for {len(items)} estimates")
    if any("capacity" not in item.get("memory", {}) for item in items):
        raise ValueError("memory plot needs estimates with a memory breakdown (memory.capacity missing)")
    names: list[str] = []
    for item in items:
        names += [k for k, v in item["memory"].items() if k not in _NOT_COMPONENTS and k not in names
                  and not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0]
    fig, ax = new_figure(max(6.0, 1.6 * len(items) + 4.0), 5.0)
    positions = list(range(len(items)))
    bottom = [0.0] * len(items)
    for index, name in enumerate(names):
        values = [(item["memory"].get(name) or 0.0) / GIB for item in items]
        ax.bar(positions, values, bottom=bottom, color=colour(index), edgecolor="white", linewidth=0.5,
               label=name.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values)]
    capacities = [item["memory"]["capacity"] / GIB for item in items]
    for x, cap in zip(positions, capacities):
        same = len(set(capacities)) == 1
        ax.hlines(cap, x - 0.45, x + 0.45, colors="#cc0000", linewidth=2,
                  label=(f"GPU capacity ({cap:.0f} GiB)" if same else "GPU capacity") if x == 0 else None)
    for x, total, cap in zip(positions, bottom, capacities):
        text = f"{total:.1f} GiB" if total <= cap else f"{total:.1f} GiB\n({total - cap:.1f} GiB short)"
        near_line = total <= cap and cap - total < 0.08 * max(bottom + capacities)
        ax.annotate(text, (x, total), xytext=(0, -3 if near_line else 3), textcoords="offset points",
                    ha="center", va="top" if near_line else "bottom", fontsize=8)
    ax.set_ylim(0, max(bottom + capacities) * 1.22)
    ax.set_xticks(positions, labels, fontsize=8)
    default = estimate_title(items[0], "Memory per GPU") if len(items) == 1 else "Memory per GPU by component"
    finish(ax, title or default, "scenario", "memory per GPU (GiB, 2^30 bytes)",
           grid_axis="y")
    if ax.get_legend():
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
