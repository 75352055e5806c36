"""80 % prediction intervals from cross-validated residuals.

For each measurement kind and GPU architecture, the 10th and 90th percentiles of the held-out
ratio measured / predicted (from :func:`perfmodel.calibration.fit.cross_validate`) scale a new
prediction into an interval that covers about 80 % of held-out rows.  Groups with fewer than
``MIN_ROWS`` held-out rows fall back to the kind's pooled ratios.
"""

from __future__ import annotations

import numpy as np

MIN_ROWS = 8
QUANTILES = (0.10, 0.90)


def interval_table(cv_frame, catalog) -> dict[str, tuple[float, float]]:
    """``{kind: (low, high), "kind[architecture]": (low, high)}`` ratio quantiles."""
    scored = cv_frame[cv_frame["predicted"].notna()]
    ratio = scored["measured"] / scored["predicted"]
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

    Time-like metrics and rate-like metrics scale the same way: the interval is on the ratio of
    measured to predicted, whatever the metric.
    """
    from perfmodel.hardware.catalog import load_catalog

    catalog = catalog or load_catalog()
    low = np.full(len(result), np.nan)
    high = np.full(len(result), np.nan)
    for i, (kind, gpu, predicted) in enumerate(zip(result["kind"], result["gpu"], result["predicted"])):
        bounds = interval_for(profile, kind, _architecture(catalog, gpu))
        if bounds is not None and np.isfinite(predicted):
            low[i], high[i] = predicted * bounds[0], predicted * bounds[1]
    return low, high


def interval_for(profile, kind: str, architecture: str | None):
    """The (low, high) ratio pair for a kind and architecture, or None."""
    return profile.interval.get(f"{kind}[{architecture}]") or profile.interval.get(kind)
