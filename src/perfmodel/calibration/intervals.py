"""80 % prediction intervals from cross-validated residuals.

For each measurement kind and GPU architecture, the 10th and 90th percentiles of the held-out
ratio measured / predicted (from :func:`perfmodel.calibration.fit.cross_validate`) scale a new
prediction into an interval that covers about 80 % of held-out rows.  Groups with fewer than
``MIN_ROWS`` held-out rows fall back to the kind's pooled ratios.

Ratios are kept in *rate* orientation (measured / predicted for throughputs, predicted /
measured for times), so that rows of both kinds of metric pool: a model that is 20 % too fast
gives 0.83 whether the row reports samples/s or seconds per step.
"""

from __future__ import annotations

import numpy as np

from perfmodel.profile import TIME_METRICS, scale_by_ratio

MIN_ROWS = 8
QUANTILES = (0.10, 0.90)
def rate_ratio(metric, measured, predicted):
    """measured / predicted for rate metrics, predicted / measured for time metrics."""
    is_time = np.isin(np.asarray(metric), TIME_METRICS)
    return np.where(is_time, predicted / measured, measured / predicted)


def interval_table(cv_frame, catalog) -> dict[str, tuple[float, float]]:
    """``{kind: (low, high), "kind[architecture]": (low, high)}`` ratio quantiles."""
    import pandas as pd

    scored = cv_frame[cv_frame["predicted"].notna()]
    ratio = pd.Series(rate_ratio(scored["metric"], scored["measured"], scored["predicted"]), index=scored.index)
    architecture = scored["gpu"].map(lambda name: _architecture(catalog, name))
    table: dict[str, tuple[float, float]] = {}
    for kind, values in ratio.groupby(scored["kind"]):
        if len(values) >= 2:
            table[kind] = tuple(float(q) for q in np.quantile(values, QUANTILES))
    for (kind, arch), values in ratio.groupby([scored["kind"], architecture]):
        if len(values) >= MIN_ROWS and arch:
            table[f"{kind}[{arch}]"] = tuple(float(q) for q in np.quantile(values, QUANTILES))
    return table


def _architecture(catalog, name) -> str | None:
    try:
        return catalog.gpu(name).architecture
    except ValueError:
        return None


def interval_bounds(result, profile, catalog=None):
    """(low, high) arrays for the rows of a validate() result, from ``profile.interval``.

    Bounds are in rate orientation; time-like metrics get them inverted (see module docstring).
    """
    from perfmodel.hardware.catalog import load_catalog

    catalog = catalog or load_catalog()
    low = np.full(len(result), np.nan)
    high = np.full(len(result), np.nan)
    rows = zip(result["kind"], result["gpu"], result["metric"], result["predicted"])
    for i, (kind, gpu, metric, predicted) in enumerate(rows):
        bounds = profile.interval_ratio(kind, _architecture(catalog, gpu))
        if bounds is not None and np.isfinite(predicted):
            low[i], high[i] = scale_by_ratio(metric, predicted, bounds)
    return low, high
