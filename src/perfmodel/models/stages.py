"""Pipeline stages: how many layers each stage holds when the stages do not divide the layers."""

from __future__ import annotations

import numpy as np

__all__ = ["stage_layers"]


def stage_layers(layers: int, pp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layers of the (first, middle, last) pipeline stages when ``pp`` stages share ``layers``.

    Every stage holds ``ceil(layers / pp)`` layers, except that the first and last stages give
    up the ``pp * ceil(layers / pp) - layers`` layers too many (the first the larger half), as
    Megatron-LM's ``decoder_first_pipeline_num_layers`` / ``decoder_last_pipeline_num_layers`` and
    Llama 3 (Dubey et al. 2024, Sec. 3.3.2: one layer less on the first and last of 16 stages
    for 126 layers) do, so those stages also fit the embedding and the output layer; each keeps
    at least one layer.  The middle count is the largest middle stage's when the remaining layers
    are spread evenly (0 when pp < 3); pp = 1 is one stage of ``layers``; needs pp <= layers.
    """
    pp = np.asarray(pp, dtype=float)
    full = np.ceil(layers / pp)
    extra = pp * full - layers
    first = np.where(pp > 1, np.maximum(full - np.ceil(extra / 2.0), 1.0), float(layers))
    last = np.where(pp > 1, np.maximum(full - np.floor(extra / 2.0), 1.0), float(layers))
    middle = np.where(pp > 2, np.ceil((layers - first - last) / np.maximum(pp - 2.0, 1.0)), 0.0)
    return first, middle, last
