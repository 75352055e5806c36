"""Bus bandwidth against message size, one line per algorithm, like the nccl-tests charts."""

from __future__ import annotations


def busbw_figure(table, title: str | None = None):
    """busbw (GB/s) vs message size (log2 x axis) per algorithm.

    ``table`` is the DataFrame of :func:`perfmodel.models.comm.sweep` (columns ``size``,
    ``algorithm``, ``busbw``).  Returns a matplotlib ``Figure`` (no pyplot state).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    for algorithm, rows in table.groupby("algorithm", sort=False):
        style = "--" if algorithm == "auto" else "-"
        ax.plot(rows["size"], rows["busbw"] / 1e9, style, marker=".", label=algorithm)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes, as nccl-tests prints it)")
    ax.set_ylabel("bus bandwidth (GB/s, nccl-tests busbw)")
    ax.set_title(title or "collective bus bandwidth by algorithm (model)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="algorithm")
    return fig
