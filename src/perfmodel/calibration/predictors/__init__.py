"""Predictors of measurement rows, one module per kind; importing this package registers them."""

from perfmodel.calibration.predictors import (
    collective,  # noqa: F401
    kernel,  # noqa: F401
    train,  # noqa: F401
)
