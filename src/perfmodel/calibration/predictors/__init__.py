"""Predictors of measurement rows, one module per kind, in one table: :data:`PREDICTORS`.

A predictor ``(rows, catalog, profile) -> DataFrame`` returns, indexed like ``rows``, the columns
``predicted`` (float or NaN) and ``reason`` (None or a string).
"""

from perfmodel.calibration.predictors.collective import predict_collective
from perfmodel.calibration.predictors.kernel import predict_gemm, predict_memcpy
from perfmodel.calibration.predictors.train import predict_train

__all__ = ["PREDICTORS"]

PREDICTORS = {
    "gemm": predict_gemm,
    "memcpy": predict_memcpy,
    "collective": predict_collective,
    "train": predict_train,
}
