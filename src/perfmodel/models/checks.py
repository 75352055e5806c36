"""Argument checks shared by the cost models: floats or arrays in, a clear ValueError out.

Each returns its argument as a float array (so callers can use it directly) and names the
argument, the first bad value and what is allowed.
"""

from __future__ import annotations

import numpy as np


def _first(array: np.ndarray, bad: np.ndarray) -> float:
    return float(array[bad].flat[0]) if array.ndim else float(array)


def nonnegative(name: str, value, allow_inf: bool = False) -> np.ndarray:
    """``value >= 0`` (finite unless ``allow_inf``: an infinite mean time between failures is
    a meaningful 'never')."""
    array = np.asarray(value, dtype=float)
    bad = np.isnan(array) | (array < 0) | (np.isinf(array) & (not allow_inf))
    if np.any(bad):
        raise ValueError(f"{name} must be >= 0; got {_first(array, bad):g}")
    return array


def positive(name: str, value, allow_inf: bool = False) -> np.ndarray:
    """``value > 0`` (finite unless ``allow_inf``)."""
    array = np.asarray(value, dtype=float)
    bad = np.isnan(array) | (array <= 0) | (np.isinf(array) & (not allow_inf))
    if np.any(bad):
        raise ValueError(f"{name} must be > 0; got {_first(array, bad):g}")
    return array


def count(name: str, value, low: int = 1) -> np.ndarray:
    """An integer-valued ``value >= low`` (GPU counts, layers, parallel degrees)."""
    array = np.asarray(value, dtype=float)
    bad = ~np.isfinite(array) | (array < low) | (array != np.floor(array))
    if np.any(bad):
        raise ValueError(f"{name} must be an integer >= {low}; got {_first(array, bad):g}")
    return array
