"""Predictors of measurement rows, one module per kind; importing this package registers them."""

from perfmodel.calibration.predictors import kernel  # noqa: F401
from perfmodel.calibration.predictors import collective  # noqa: F401
from perfmodel.calibration.predictors import train  # noqa: F401
