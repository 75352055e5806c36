"""Memory per GPU by component, one stacked bar per estimate, against the GPU's capacity."""

from __future__ import annotations

from perfmodel.plots.style import as_dicts, colour, estimate_label, finish, new_figure

_NOT_COMPONENTS = {"total", "capacity", "headroom", "fits", "reasons"}


def memory(estimates, labels: list[str] | None = None, title: str | None = None):
    """Stacked bar of the ``memory`` components (GB = 1e9 bytes per GPU) of one
    :class:`~perfmodel.Estimate` or a list, with each GPU's usable capacity as a red
    line over its bar and the total (and shortfall, if it does not fit) written above it.
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
                  and isinstance(v, (int, float)) and v > 0]
    fig, ax = new_figure(max(6.0, 1.6 * len(items) + 4.0), 5.0)
    positions = list(range(len(items)))
    bottom = [0.0] * len(items)
    for index, name in enumerate(names):
        values = [(item["memory"].get(name) or 0.0) / 1e9 for item in items]
        ax.bar(positions, values, bottom=bottom, color=colour(index), edgecolor="white", linewidth=0.5,
               label=name.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values)]
    capacities = [item["memory"]["capacity"] / 1e9 for item in items]
    for x, cap in zip(positions, capacities):
        ax.hlines(cap, x - 0.45, x + 0.45, colors="#cc0000", linewidth=2,
                  label="GPU capacity" if x == 0 else None)
    for x, item, total, cap in zip(positions, items, bottom, capacities):
        text = f"{total:.1f} GB" if total <= cap else f"{total:.1f} GB\n({total - cap:.1f} GB short)"
        ax.annotate(text, (x, max(total, cap)), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottom + capacities) * 1.22)
    ax.set_xticks(positions, labels, fontsize=8)
    finish(ax, title or "Memory per GPU by component", "scenario", "memory per GPU (GB, 1e9 bytes)",
           grid_axis="y")
    if ax.get_legend():
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
