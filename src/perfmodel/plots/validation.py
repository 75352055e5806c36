"""How far the model is from measurements, in a form that shows errors of a few percent: the
predicted / measured ratio per kind (one point per row, colour per GPU) and the APE CDF per kind."""

from __future__ import annotations

import numpy as np

from perfmodel.plots.style import colour, finish, new_figure

BANDS = (0.10, 0.50)  # relative bands drawn around 1


def prediction_error(frame, title: str | None = None):
    """Two panels for a :func:`perfmodel.calibration.validate.validate` frame: left, the ratio
    predicted / measured of every predicted row by kind (log axis centred on 1, jittered strips,
    colour per GPU, +-10 % and +-50 % bands), so each row is compared with its own measurement in
    its own unit; right, the cumulative share of rows under each absolute percentage error, one
    line per kind, with its median in the legend.  Rows the model could not predict are left out
    and counted in the title.  Returns a matplotlib ``Figure``."""
    missing = {"gpu", "kind", "measured", "predicted", "ape"} - set(frame)
    if missing:
        raise ValueError(f"prediction_error needs a validate() frame; missing columns: {', '.join(sorted(missing))}")
    ok = frame["predicted"].notna() & (frame["predicted"] > 0) & (frame["measured"] > 0)
    rows = frame[ok]
    fig, (left, right) = new_figure(12.0, 5.0, ncols=2)
    kinds = sorted(rows["kind"].unique())
    rng = np.random.default_rng(0)  # fixed jitter: the figure is the same every time
    gpus = sorted(rows["gpu"].fillna("?").unique())
    for g, gpu in enumerate(gpus):
        part = rows[rows["gpu"].fillna("?") == gpu]
        x = np.array([kinds.index(k) for k in part["kind"]]) + rng.uniform(-0.3, 0.3, len(part))
        left.scatter(x, part["predicted"] / part["measured"], s=10, alpha=0.6, color=colour(g), label=gpu)
    for band, shade in zip(sorted(BANDS, reverse=True), ("0.92", "0.78")):  # wide band first, under the narrow
        left.axhspan(1 - band, 1 + band, color=shade, zorder=0)
    left.axhline(1.0, color="black", linewidth=1)
    left.set_yscale("log")
    left.set_xticks(range(len(kinds)), [f"{k}\n({(rows['kind'] == k).sum()} rows)" for k in kinds])
    from matplotlib.ticker import FuncFormatter, NullFormatter

    left.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    left.yaxis.set_minor_formatter(NullFormatter())
    finish(left, "predicted / measured per row (bands: +-10 %, +-50 %)", "kind of measurement",
           "predicted / measured (x, 1 = exact)", legend=False)
    left.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.2), title="GPU", title_fontsize=7)
    for k, kind in enumerate(kinds):
        ape = np.sort(100.0 * rows.loc[rows["kind"] == kind, "ape"].to_numpy())
        share = np.arange(1, len(ape) + 1) / len(ape) * 100.0
        right.step(ape, share, where="post", color=colour(k), label=f"{kind} (median {np.median(ape):.0f} %)")
    right.set_xscale("log")
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    right.set_ylim(0, 100)
    finish(right, "share of rows within an error", "absolute percentage error (%)", "rows at or below it (%)")
    skipped = len(frame) - len(rows)
    fig.suptitle(title or f"Prediction error on {len(rows)} measured rows ({skipped} not predicted)")
    return fig
