"""Predictors for single-kernel rows: ``gemm`` (tflops, time_us) and ``memcpy`` (GBps).

A GEMM row is one (m x k) @ (k x n) product in ``dtype``; a memcpy row copies a ``bytes``-sized
buffer, and its GBps counts bytes read plus bytes written (measurement spec, kind = memcpy).
Both go through :func:`perfmodel.models.compute.roofline_time` with the profile's parameters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.hardware.catalog import Catalog, CatalogError
from perfmodel.models import compute
from perfmodel.profile import CalibrationProfile
from perfmodel.vocabulary import ELEMENT_BYTES, GEMM_OUTPUT_BYTES

GEMM_METRICS = MEASUREMENT_METRICS["gemm"]
MEMCPY_METRICS = MEASUREMENT_METRICS["memcpy"]


def _number(row: pd.Series, column: str) -> float:
    value = pd.to_numeric(row.get(column), errors="coerce")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"column {column!r} must be a positive number, got {row.get(column)!r}")
    return float(value)


def _gemm(row: pd.Series, catalog: Catalog, profile: CalibrationProfile) -> float:
    gpu = catalog.gpu(row["gpu"])
    dtype = str(row.get("dtype"))
    if dtype not in compute.TRAIN_PRECISIONS:
        raise ValueError(f"dtype {dtype!r} is unknown; allowed: {', '.join(compute.TRAIN_PRECISIONS)}")
    if row["metric"] not in GEMM_METRICS:
        raise ValueError(f"metric {row['metric']!r} is not a gemm metric ({', '.join(GEMM_METRICS)})")
    m, n, k = (_number(row, c) for c in ("m", "n", "k"))
    group = gpu.architecture
    eta = compute.matmul_efficiency(m, n, k, gpu.sm_count, profile.get("matmul_efficiency", group),
                                    profile.get("matmul_tile", group),
                                    profile.get("matmul_k_overhead", group))
    flops = compute.gemm_flops(m, n, k)
    time = compute.roofline_time(
        flops, compute.gemm_bytes(m, n, k, ELEMENT_BYTES[dtype], GEMM_OUTPUT_BYTES[dtype]),
        gpu.peak(dtype), gpu.memory_bandwidth, eta, profile.get("memory_efficiency", group),
        profile.get("kernel_launch_overhead"))
    return float(flops / time / 1e12 if row["metric"] == "tflops" else time * 1e6)


def _memcpy(row: pd.Series, catalog: Catalog, profile: CalibrationProfile) -> float:
    gpu = catalog.gpu(row["gpu"])
    if row["metric"] not in MEMCPY_METRICS:
        raise ValueError(f"metric {row['metric']!r} is not a memcpy metric ({', '.join(MEMCPY_METRICS)})")
    moved = 2.0 * _number(row, "bytes")  # read + write
    time = compute.roofline_time(0.0, moved, gpu.peak("fp32"), gpu.memory_bandwidth, 1.0,
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


def predict_gemm(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile) -> pd.DataFrame:
    """TFLOP/s (2mnk / time / 1e12) or microseconds of each GEMM row."""
    return _predict_rows(rows, catalog, profile, _gemm)


def predict_memcpy(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile) -> pd.DataFrame:
    """GB/s (1e9 bytes/s, read plus written) of each device-to-device copy row."""
    return _predict_rows(rows, catalog, profile, _memcpy)
