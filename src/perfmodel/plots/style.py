"""One look for every perfmodel figure: size, grid, colours per component, label helpers."""

from __future__ import annotations

# Colours by cost category, so "compute" or "DP communication" looks the same in every figure.
CATEGORY_COLOURS = {
    "compute": "#4477aa", "recompute": "#77aadd", "TP communication": "#ee8866",
    "CP communication": "#eedd88", "PP communication": "#ffaabb", "pipeline bubble": "#aa4499",
    "DP communication": "#ee6677", "memory bandwidth": "#99ddff", "framework overhead": "#bbbbbb",
    "input pipeline": "#44bb99", "EP communication": "#882255",
}
# A qualitative palette (Paul Tol "muted") for series without a fixed colour.
PALETTE = ("#332288", "#88ccee", "#44aa99", "#117733", "#999933", "#ddcc77", "#cc6677", "#882255",
           "#aa4499", "#555555")


def new_figure(width: float = 8.0, height: float = 5.0, ncols: int = 1):
    """A constrained-layout ``Figure`` (no pyplot state) and its axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(1, ncols)


def finish(ax, title: str, xlabel: str, ylabel: str, *, legend: bool = True, grid_axis: str = "both") -> None:
    """Title, unit-carrying axis labels, a light grid and (if there are labelled artists) a legend."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis=grid_axis, which="major", alpha=0.3)
    ax.set_axisbelow(True)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def as_dicts(estimates) -> list[dict]:
    """One Estimate, a list of them, or their ``model_dump()`` dicts -> list of dicts."""
    items = estimates if isinstance(estimates, (list, tuple)) else [estimates]
    if not items:
        raise ValueError("no estimate to plot: pass an Estimate or a non-empty list of them")
    return [item if isinstance(item, dict) else item.model_dump() for item in items]


def estimate_label(item: dict) -> str:
    """Short bar label: workload, GPU count x GPU, precision."""
    hardware, plan = item.get("hardware", {}), item.get("plan", {})
    return f"{item.get('workload', '?')}\n{hardware.get('num_gpus', '?')} x {hardware.get('gpu', '?')} {plan.get('precision', '')}".strip()


def estimate_title(item: dict, what: str) -> str:
    """Two lines: ``what`` and "llama2-7b on 8 x H100-SXM5-80GB, bf16 TP1 PP1 DP8, selective recompute, ZeRO-3"."""
    from perfmodel.ranking import plan_label

    hardware, plan = item.get("hardware", {}), item.get("plan", {})
    try:
        layout = f"{plan.get('precision', '')} {plan_label(plan)}".strip()
    except (KeyError, TypeError, ValueError):
        layout = plan.get("precision", "")
    gpus = f"{hardware.get('num_gpus', '?')} x {hardware.get('gpu', '?')}"
    return f"{what}\n{item.get('workload', '?')} on {gpus}, {layout}"


def label_points(ax, points, fontsize: int = 7, min_gap: tuple[float, float] = (0.12, 0.05)) -> int:
    """Annotate ``points`` ((x, y, text), most important first) on log-log axes, skipping any whose
    anchor is within ``min_gap`` (decades in x, y) of one already labelled, so labels never
    overprint.  Returns how many were skipped."""
    import math

    placed: list[tuple[float, float]] = []
    skipped = 0
    for x, y, text in points:
        lx, ly = math.log10(x), math.log10(y)
        if any(abs(lx - px) < min_gap[0] and abs(ly - py) < min_gap[1] for px, py in placed):
            skipped += 1
            continue
        placed.append((lx, ly))
        ax.annotate(text, (x, y), fontsize=fontsize, xytext=(4, 3), textcoords="offset points")
    return skipped
