"""Are the prediction intervals honest?  Coverage and width of ``low``/``high`` bounds.

``coverage_table(frame)`` scores a frame with ``measured``, ``predicted`` and, for each nominal
level, interval bounds (``low``/``high`` for the 80 % interval of :func:`validate`, or
``low_50``/``high_50``, ``low_80``/``high_80``, ``low_95``/``high_95`` from
:func:`perfmodel.calibration.intervals.interval_columns`): per group (kind, GPU, framework,
source) the share of measured values inside the interval (*coverage*, which should be close to the
nominal level) and the median ``high / low`` ratio (*width*: 1.0 is a point, 2.0 a factor-of-two
band).

``leave_group_out(measurements, groups)`` is cross-validation with one fold per group (a GPU
architecture, a source): every row is predicted by a profile fitted without any row of its group,
the situation of an estimate on a GPU or a software stack that the calibration never saw.
``leave_gpu_out(measurements)`` is the cheap case of it for GEMM rows: one kernel-stage fit per
GPU, the error on a GPU model never measured.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEVELS", "bound_columns", "coverage_table", "leave_group_out", "leave_gpu_out", "calibration_points",
           "held_out_intervals", "group_out_intervals", "without_architecture", "kernel_stage_only"]

LEVELS = (0.50, 0.80, 0.95)


def bound_columns(frame, level: float) -> tuple[str, str] | None:
    """(low, high) column names holding the ``level`` interval of ``frame``, or None.

    ``low_80``/``high_80`` style columns first; plain ``low``/``high`` are the 80 % interval
    (what :func:`perfmodel.calibration.validate.validate` writes)."""
    tag = f"{round(100 * level):d}"
    if f"low_{tag}" in frame and f"high_{tag}" in frame:
        return f"low_{tag}", f"high_{tag}"
    if tag == "80" and "low" in frame and "high" in frame:
        return "low", "high"
    return None


def _stats(frame, levels) -> dict:
    ok = frame[frame["predicted"].notna() & (frame["measured"] > 0)]
    out: dict = {"n": int(len(ok))}
    for level in levels:
        columns = bound_columns(ok, level)
        tag = f"{round(100 * level):d}"
        if columns is None or not len(ok):
            out[f"coverage_{tag}"] = np.nan
            out[f"width_{tag}"] = np.nan
            continue
        low, high = (ok[c].to_numpy(dtype=float) for c in columns)
        measured = ok["measured"].to_numpy(dtype=float)
        has = np.isfinite(low) & np.isfinite(high)
        out[f"coverage_{tag}"] = float(((measured >= low) & (measured <= high))[has].mean()) if has.any() else np.nan
        out[f"width_{tag}"] = float(np.median(high[has] / low[has])) if has.any() else np.nan
    return out


def coverage_table(frame, by: str | list[str] | None = "kind", levels=LEVELS):
    """One row per group of ``by`` (None: one row for all), plus an ``all`` row: ``n`` predicted
    rows, ``coverage_50/80/95`` (share of measured values inside the interval) and
    ``width_50/80/95`` (median high/low).  Levels whose bounds the frame lacks are NaN.

    ``by`` names columns of ``frame`` (kind, gpu, architecture, framework, source, ...); missing
    values form their own group ``"?"``."""
    import pandas as pd

    missing = {"measured", "predicted"} - set(frame)
    if missing:
        raise ValueError(f"coverage_table needs a validate() frame; missing columns: {', '.join(sorted(missing))}")
    columns = [by] if isinstance(by, str) else list(by or [])
    unknown = [c for c in columns if c not in frame]
    if unknown:
        raise ValueError(f"coverage_table: no column {unknown[0]!r} to group by; columns: {', '.join(frame.columns)}")
    rows = [{**{c: "all" for c in columns}, **_stats(frame, levels)}]
    if columns:
        keys = frame[columns].astype(object).where(frame[columns].notna(), "?")
        for key, part in frame.groupby([keys[c] for c in columns], sort=True):
            key = key if isinstance(key, tuple) else (key,)
            rows.append({**dict(zip(columns, key)), **_stats(part, levels)})
    return pd.DataFrame(rows)


def calibration_points(frame, levels=LEVELS) -> list[tuple[float, float, int]]:
    """(nominal, observed coverage, rows) for each level whose bounds ``frame`` has."""
    stats = _stats(frame, levels)
    return [(level, stats[f"coverage_{round(100 * level):d}"], stats["n"]) for level in levels
            if np.isfinite(stats[f"coverage_{round(100 * level):d}"])]


def leave_group_out(measurements, groups, params=None, catalog=None, profile=None):
    """Cross-validation with one fold per distinct value of ``groups`` (an array aligned with
    ``measurements``: GPU architecture, source, ...): refit without the group, predict it.

    Returns the :func:`validate` frame of every row (same index as ``measurements``) with a
    ``fold`` column naming the held-out group.  Rows whose group is missing (None/NaN) are always
    fitted, never held out.  ``profile``: the fits' starting point (as in :func:`calibrate`).
    Cost: one full :func:`calibrate` per group."""
    import pandas as pd

    from perfmodel.calibration.fit import calibrate
    from perfmodel.calibration.validate import validate
    from perfmodel.hardware.catalog import load_catalog

    catalog = catalog or load_catalog()
    groups = pd.Series(np.asarray(groups, dtype=object), index=measurements.index)
    names = sorted({g for g in groups if g is not None and g == g})
    if len(names) < 2:
        raise ValueError(f"leave_group_out needs at least 2 groups, got {names}")
    parts = []
    for name in names:
        held = groups == name
        fitted = calibrate(measurements[~held], params=params, profile=profile, catalog=catalog)
        scored = validate(measurements[held], catalog, fitted.model_copy(update={"interval": {}}))
        scored["fold"] = name
        parts.append(scored)
    return pd.concat(parts).sort_index()


def leave_gpu_out(measurements, kinds=("gemm",), min_rows: int = 10, params=None, catalog=None):
    """Leave-one-GPU-out on the rows of ``kinds`` (GEMM by default): for each GPU with at least
    ``min_rows`` such rows, refit the kernel stage of :func:`calibrate` (``params`` of it; the
    stage that fits GEMM rows: seconds, not the minutes of a whole fit) on the other GPUs' rows of
    the kernel stage's kinds and predict its ``kinds`` rows.  Returns the :func:`validate` frame of the
    held-out rows with ``fold`` = the GPU (empty when fewer than 2 GPUs qualify)."""
    import pandas as pd

    from perfmodel.calibration.fit import calibrate
    from perfmodel.calibration.validate import validate
    from perfmodel.hardware.catalog import load_catalog

    catalog = catalog or load_catalog()
    stage = kernel_stage_only()
    fitting = measurements[measurements["kind"].isin(stage[0][1])]
    rows = measurements[measurements["kind"].isin(kinds)]
    counts = rows["gpu"].value_counts()
    gpus = sorted(counts.index[counts >= min_rows])
    if len(gpus) < 2:
        return pd.DataFrame(columns=["id", "kind", "gpu", "metric", "measured", "predicted", "ape", "reason", "fold"])
    parts = []
    for gpu in gpus:
        profile = calibrate(fitting[fitting["gpu"] != gpu], params=params, catalog=catalog, stages=stage)
        scored = validate(rows[rows["gpu"] == gpu], catalog, profile.model_copy(update={"interval": {}}))
        scored["fold"] = gpu
        parts.append(scored)
    return pd.concat(parts).sort_index()


def kernel_stage_only():
    """The ``stages`` argument of :func:`perfmodel.calibration.fit.calibrate` that fits only the
    kernel stage (GEMM and copy rows)."""
    from perfmodel.calibration.fit import STAGES

    return tuple(stage for stage in STAGES if stage[0] == "kernel")


def held_out_intervals(cv_frame, context, profile, levels=LEVELS, n0=None):
    """``cv_frame`` with interval columns (``low_50``/``high_50``, ...) where each fold's bounds
    come from an interval model fitted on the *other* folds' residuals only, so the coverage of
    the result is an honest out-of-sample number (the model never saw the row it bounds).
    ``cv_frame`` needs a ``fold`` column (as :func:`perfmodel.calibration.fit.cross_validate`
    writes); ``context`` is :func:`perfmodel.calibration.intervals.row_context` of its rows."""
    import pandas as pd

    from perfmodel.calibration.intervals import N0, fit_interval_model, interval_columns

    if "fold" not in cv_frame:
        raise ValueError("held_out_intervals needs a cross-validated frame with a 'fold' column")
    parts = []
    for fold in sorted(cv_frame["fold"].unique(), key=str):
        held = cv_frame["fold"] == fold
        model = fit_interval_model(cv_frame[~held], profile, context, n0=N0 if n0 is None else n0)
        rows = cv_frame[held & cv_frame["kind"].isin(list(model["kinds"]))]
        parts.append(interval_columns(rows, context, profile, model, levels))
    return pd.concat(parts).sort_index()


def without_architecture(profile, architecture: str):
    """``profile`` with every ``name[architecture]`` value and uncertainty removed, so that
    architecture falls back to the pooled values: the profile a fit without its rows would give."""
    suffix = f"[{architecture}]"
    return profile.model_copy(update={
        "values": {k: v for k, v in profile.values.items() if not k.endswith(suffix)},
        "uncertainty": {k: v for k, v in profile.uncertainty.items() if not k.endswith(suffix)}})


def group_out_intervals(group_frame, cv_frame, context, profile, column: str, levels=LEVELS, calibrate_unseen=False):
    """Intervals for a :func:`leave_group_out` frame (``fold`` = the held-out value of
    ``context[column]``): each group's rows are bounded by an interval model fitted on the
    ``cv_frame`` residuals of the *other* groups, and, when ``column`` is ``architecture`` (or
    ``gpu``, for a GPU that no other GPU of its architecture joins in ``cv_frame``), with the
    profile's values of that architecture removed (:func:`without_architecture`), so the group is
    new to both the parameters and the interval model, as a GPU never measured is.
    ``calibrate_unseen``: also give each model the ``group_frame`` rows of the *other* groups as
    its ``unseen`` frame (``unseen_gpu`` when ``column`` is ``gpu``;
    :func:`perfmodel.calibration.intervals.fit_interval_model`), so the new-architecture (new-GPU)
    term is learnt from the other held-out groups, never from the one scored."""
    import pandas as pd

    from perfmodel.calibration.intervals import fit_interval_model, interval_columns

    parts = []
    for group in sorted(group_frame["fold"].unique(), key=str):
        others = cv_frame[(context.loc[cv_frame.index, column] != group).to_numpy()]
        held = group_frame[group_frame["fold"] == group]
        local = without_architecture(profile, group) if column == "architecture" else profile
        if column == "gpu" and len(held):
            # a GPU alone in its architecture: the refit without it had no value of that architecture
            # (pooled), so neither may the profile whose uncertainties its interval model uses
            architecture = context.loc[held.index, "architecture"].iloc[0]
            if architecture is not None and architecture not in set(context.loc[others.index, "architecture"]):
                local = without_architecture(profile, architecture)
        unseen = group_frame[group_frame["fold"] != group] if calibrate_unseen else None
        if column == "gpu":
            model = fit_interval_model(others, local, context, unseen_gpu=unseen)
        else:
            model = fit_interval_model(others, local, context, unseen=unseen)
        held = held[held["kind"].isin(list(model["kinds"]))]
        parts.append(interval_columns(held, context, local, model, levels))
    return pd.concat(parts).sort_index()
