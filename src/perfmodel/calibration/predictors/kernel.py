"""Predictors for single-kernel rows: ``gemm`` (tflops, time_us) and ``memcpy`` (GBps).

A GEMM row is one call of ``batch`` (default 1) (m x k) @ (k x n) products in ``dtype``, timed by
the kernel model :mod:`perfmodel.models.gemm`; a row whose ``op`` has the word ``linear``
(nn.Linear, addmm with a bias) in an FP32 CUDA-core dtype runs at ``gemm_linear_efficiency`` of
that rate (:func:`perfmodel.models.gemm.linear_share`; any other ``op`` text is a plain GEMM); a row
whose ``op`` has the word ``kernel`` is the device time of the kernel alone, as a profiler or a
CUDA-graph replay measures it (no per-call floor; the GPU starts from idle); a memcpy row copies a
``bytes``-sized buffer, and its
GBps counts bytes read plus bytes written (measurement spec, kind = memcpy), timed by
:func:`perfmodel.models.compute.roofline_time`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.hardware.catalog import Catalog, CatalogError
from perfmodel.models import compute, gemm
from perfmodel.profile import CalibrationProfile

GEMM_METRICS = MEASUREMENT_METRICS["gemm"]
MEMCPY_METRICS = MEASUREMENT_METRICS["memcpy"]


def _number(row: pd.Series, column: str) -> float:
    value = pd.to_numeric(row.get(column), errors="coerce")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"column {column!r} must be a positive number, got {row.get(column)!r}")
    return float(value)


def _memcpy(row: pd.Series, catalog: Catalog, profile: CalibrationProfile) -> float:
    gpu = catalog.gpu(row["gpu"])
    if row["metric"] not in MEMCPY_METRICS:
        raise ValueError(f"metric {row['metric']!r} is not a memcpy metric ({', '.join(MEMCPY_METRICS)})")
    moved = 2.0 * _number(row, "bytes")  # read + write
    # a copy does no arithmetic: its roofline is the memory term alone (no FLOP peak needed, so a
    # GPU whose catalog entry lacks one -- A10G's FP32 -- still gets an answer)
    time = compute.roofline_time(0.0, moved, np.inf, gpu.memory_bandwidth, 1.0,
                                 profile.get("memory_efficiency", gpu.architecture),
                                 profile.get("kernel_launch_overhead"))
    return float(moved / time / 1e9)


def _predict_rows(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile,
                  one) -> pd.DataFrame:
    out = pd.DataFrame({"predicted": np.nan, "reason": None}, index=rows.index)
    out["reason"] = out["reason"].astype(object)
    for index, row in rows.iterrows():
        try:
            out.at[index, "predicted"] = one(row, catalog, profile)
        except (CatalogError, ValueError) as error:
            out.at[index, "reason"] = str(error)
    return out


def _gemm_group(rows: pd.DataFrame, gpu_name: str, dtype: str, catalog: Catalog,
                profile: CalibrationProfile) -> np.ndarray:
    """Predicted values of the rows of one (gpu, dtype), vectorized; raises for the whole group."""
    gpu = catalog.gpu(gpu_name)
    if dtype not in compute.TRAIN_PRECISIONS:
        raise ValueError(f"dtype {dtype!r} is unknown; allowed: {', '.join(compute.TRAIN_PRECISIONS)}")
    m, n, k = (rows[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
    batch = rows["batch"].fillna(1.0).to_numpy(dtype=float) if "batch" in rows else np.ones(len(rows))
    # ``op`` is free text (spec: linear, bmm, matmul): "nn.Linear" or "torch.nn.Linear" name it too;
    # the word "kernel" marks a device time (profiler, CUDA-graph replay) without the call's floor
    linear, device_only = (rows["op"].fillna("").astype(str).str.contains(rf"\b{word}\b", case=False, regex=True)
                           .to_numpy() if "op" in rows else np.zeros(len(rows), dtype=bool)
                           for word in ("linear", "kernel"))
    time_s = gemm.gpu_time(m, n, k, batch, gpu, dtype, profile, linear=linear, device_only=device_only)
    flops = compute.gemm_flops(m, n, k, batch)
    return np.where(rows["metric"].to_numpy() == "tflops", flops / time_s / 1e12, time_s * 1e6)


def predict_gemm(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile) -> pd.DataFrame:
    """TFLOP/s (2 mnk batch / call time / 1e12) or microseconds of each GEMM row: the whole call
    (``batch`` GEMMs and the per-call floor, measurement spec), by
    :func:`perfmodel.models.gemm.gpu_time`, one vectorized call per (gpu, dtype)."""
    out = pd.DataFrame({"predicted": np.nan, "reason": None}, index=rows.index)
    out["reason"] = out["reason"].astype(object)
    shape = rows[[c for c in ("m", "n", "k", "batch") if c in rows]].apply(pd.to_numeric, errors="coerce")
    batch = shape["batch"] if "batch" in shape else pd.Series(np.nan, index=rows.index)
    bad_shape = ~((shape[["m", "n", "k"]] > 0).all(axis=1) & ~(batch <= 0))
    out.loc[bad_shape, "reason"] = "columns m, n, k (and batch) must be positive numbers"
    bad_metric = ~rows["metric"].isin(GEMM_METRICS)
    out.loc[bad_metric, "reason"] = [f"metric {v!r} is not a gemm metric ({', '.join(GEMM_METRICS)})"
                                     for v in rows.loc[bad_metric, "metric"]]
    good = rows[~bad_shape & ~bad_metric].assign(**{c: shape[c] for c in shape})
    for (gpu_name, dtype), group in good.groupby([good["gpu"].astype(str), good["dtype"].astype(str)], sort=False):
        try:
            out.loc[group.index, "predicted"] = _gemm_group(group, gpu_name, dtype, catalog, profile)
        except (CatalogError, ValueError) as error:
            out.loc[group.index, "reason"] = str(error)
    return out


def predict_memcpy(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile) -> pd.DataFrame:
    """GB/s (1e9 bytes/s, read plus written) of each device-to-device copy row."""
    return _predict_rows(rows, catalog, profile, _memcpy)
