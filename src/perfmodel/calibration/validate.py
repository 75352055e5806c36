"""Predict measured rows and score the model: ``validate(measurements) -> DataFrame``.

Each measurement ``kind`` (gemm, memcpy, collective, train) has a *predictor* in the table
:data:`perfmodel.calibration.predictors.PREDICTORS`.  A predictor takes the rows of its
kind and returns, for each, the predicted value in the row's metric unit or a ``reason`` why it
cannot predict it (unknown GPU, infeasible plan, ...), never a made-up number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.calibration.intervals import TERM_COLUMNS
from perfmodel.calibration.predictors import PREDICTORS
from perfmodel.hardware.catalog import Catalog, load_catalog
from perfmodel.profile import CalibrationProfile, default_profile

RESULT_COLUMNS = ["id", "kind", "gpu", "framework", "metric", "measured", "predicted", "ape", "reason", "assumed"]


def predict(measurements: pd.DataFrame, catalog: Catalog | None = None,
            profile: CalibrationProfile | None = None) -> pd.DataFrame:
    """Predicted value and reason for every row, in the row order and with the index of
    ``measurements`` (which may repeat labels, as ``pd.concat`` of several files does)."""
    catalog = catalog or load_catalog()
    profile = profile or default_profile()
    labels = measurements.index
    measurements = measurements.reset_index(drop=True)
    out = pd.DataFrame({"predicted": np.nan, "reason": None, "assumed": None,
                        **{column: np.nan for column in TERM_COLUMNS}}, index=measurements.index)
    out["reason"] = out["reason"].astype(object)
    out["assumed"] = out["assumed"].astype(object)
    for kind, rows in measurements.groupby("kind", sort=False):
        predictor = PREDICTORS.get(kind)
        if predictor is None:
            out.loc[rows.index, "reason"] = f"kind {kind!r} is not modelled"
            continue
        result = predictor(rows, catalog, profile)
        out.loc[rows.index, "predicted"] = result["predicted"].astype(float)
        out.loc[rows.index, "reason"] = result["reason"]
        if "assumed" in result:
            out.loc[rows.index, "assumed"] = result["assumed"]
        for column in TERM_COLUMNS:
            if column in result:
                out.loc[rows.index, column] = result[column].astype(float)
    bad = out["predicted"].notna() & ~(np.isfinite(out["predicted"]) & (out["predicted"] > 0))
    out.loc[bad, "reason"] = "model returned a non-positive or non-finite value"
    out.loc[bad, "predicted"] = np.nan
    out.index = labels
    return out


def validate(measurements: pd.DataFrame, catalog: Catalog | None = None,
             profile: CalibrationProfile | None = None) -> pd.DataFrame:
    """One row per measurement: id, kind, gpu, framework, metric, measured, predicted, ape, reason, assumed,
    host_log_sensitivity, attention_log_sensitivity and the step shares.

    ``ape`` = |predicted - measured| / measured; rows that cannot be predicted have NaN
    ``predicted`` and ``ape`` and a ``reason``; ``host_log_sensitivity`` (train rows, else NaN) is
    how much a host dispatch time one standard error slower would move the prediction
    (:func:`perfmodel.chain.host_log_sensitivity`, the interval's host term);
    ``attention_log_sensitivity`` (train rows) is how much the step would change (log) with the
    other attention kernel where a row's kernel was assumed, else 0 (the interval's attention term);
    ``share_<group>``
    (train rows) is the share of the predicted step in each :data:`perfmodel.chain.STEP_SHARES`
    group (the interval's step-makeup term).  When the profile has prediction intervals,
    ``low`` and ``high`` bound the 80 % interval.
    """
    labels = measurements.index
    measurements = measurements.reset_index(drop=True)
    predicted = predict(measurements, catalog, profile)
    result = pd.DataFrame({
        "id": measurements["id"].astype(str),
        "kind": measurements["kind"],
        "gpu": measurements["gpu"],
        "framework": measurements["framework"] if "framework" in measurements else None,
        "metric": measurements["metric"],
        "measured": measurements["value"].astype(float),
        "predicted": predicted["predicted"],
        "reason": predicted["reason"],
        "assumed": predicted["assumed"],
        **{column: predicted[column] for column in TERM_COLUMNS},
    })
    result["ape"] = (result["predicted"] - result["measured"]).abs() / result["measured"]
    profile = profile or default_profile()
    if profile.interval:
        from perfmodel.calibration.intervals import interval_bounds

        result["low"], result["high"] = interval_bounds(result, profile, measurements=measurements)
    result.index = labels
    return result[[c for c in RESULT_COLUMNS + [*TERM_COLUMNS, "low", "high"] if c in result]]


def summarize(result: pd.DataFrame, by: str | list[str] | None = None) -> dict:
    """``{"all": {...}, kind: {...}}`` with n, predicted, mape, median_ape (and coverage)."""

    def stats(frame: pd.DataFrame) -> dict:
        ok = frame[frame["predicted"].notna()]
        summary = {
            "n": int(len(frame)),
            "predicted": int(len(ok)),
            "mape": float(ok["ape"].mean()) if len(ok) else None,
            "median_ape": float(ok["ape"].median()) if len(ok) else None,
        }
        if "low" in ok and len(ok):
            inside = (ok["measured"] >= ok["low"]) & (ok["measured"] <= ok["high"])
            summary["coverage"] = float(inside.mean())
        return summary

    out = {"all": stats(result)}
    for key, frame in result.groupby(by or "kind", sort=True):
        name = key if isinstance(key, str) else "/".join(map(str, key if isinstance(key, tuple) else (key,)))
        out[name] = stats(frame)
    return out
