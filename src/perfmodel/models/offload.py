"""Offload to host memory (ZeRO-Offload): what leaves GPU memory, what the host holds, and the
PCIe traffic it costs.

Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training" (USENIX ATC), Sec. 4:
the fp32 master weights and the Adam moments (our ``optimizer`` component) live in host memory and
the CPU runs the optimizer; each step the GPU sends its gradient shard to the host (device to host,
overlapped with the backward pass, Sec. 4.1) and receives the updated 16-bit weights of its shard
(host to device, after the CPU step).  Weight offload (ZeRO-Infinity, Rajbhandari et al. 2021,
Sec. 5) keeps the weights in host memory and fetches a stage's weights for every micro-batch's
forward and again for its backward, prefetched under the compute, with the current and the next
layer resident on the GPU.

Offload codes (:data:`perfmodel.vocabulary.OFFLOAD_TARGETS`): bit 0 the optimizer state, bit 1 the
weights.  Pure functions over floats or numpy arrays that broadcast.

Not modelled (say so to the user): the CPU optimizer's own time (the step keeps the GPU optimizer
kernel's time in its place) and PCIe efficiency below the link rate.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OPTIMIZER_BIT", "WEIGHTS_BIT", "pcie_bandwidth_per_direction", "offload_memory", "offload_traffic_bytes"]

OPTIMIZER_BIT, WEIGHTS_BIT = 1, 2

# PCI Express base specifications: transfer rate per lane (GT/s) and line-code efficiency
_PCIE_RATE = {3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130)}


def pcie_bandwidth_per_direction(generation: int | None, lanes: int = 16) -> float:
    """Bytes/s one direction of a PCIe link carries: lanes x rate x 128b/130b / 8 (PCIe 3.0-5.0
    specifications: 8, 16, 32 GT/s per lane; x16 gives 15.75, 31.5, 63.0 GB/s, the catalog's
    pcie3/4/5 links).  NaN for a generation the catalog does not state (null) or this table lacks."""
    if generation not in _PCIE_RATE:
        return float("nan")
    rate, code = _PCIE_RATE[generation]
    return lanes * rate * 1e9 * code / 8.0


def _bit(offload, bit):
    return (np.asarray(offload) & bit) > 0


def offload_memory(offload, weights, gradients, optimizer, layers_per_stage, *, gradient_bytes_per_param,
                   optimizer_bytes_per_param):
    """(GPU bytes removed per component, host bytes) of offloading per GPU.

    ``weights``, ``gradients``, ``optimizer``: the GPU's model-state components without offload
    (:func:`perfmodel.models.memory.model_state_bytes`).  Optimizer offload moves the optimizer
    state to the host, which also keeps the 16-bit gradients of that shard for the CPU update
    (``optimizer x gradient_bytes_per_param / optimizer_bytes_per_param``); the GPU keeps its
    gradient buffers (conservative: they are streamed out bucket by bucket).  Weight offload
    leaves ``min(1, 2 / layers_per_stage)`` of the weights on the GPU (current and prefetched
    layer) and holds them all on the host.
    """
    opt, wts = _bit(offload, OPTIMIZER_BIT), _bit(offload, WEIGHTS_BIT)
    weights, optimizer = np.asarray(weights, dtype=float), np.asarray(optimizer, dtype=float)
    resident = np.minimum(1.0, 2.0 / np.asarray(layers_per_stage, dtype=float))
    removed = {"optimizer": np.where(opt, optimizer, 0.0),
               "weights": np.where(wts, weights * (1.0 - resident), 0.0),
               "gradients": np.zeros_like(np.asarray(gradients, dtype=float))}
    host = (np.where(opt, optimizer * (1.0 + gradient_bytes_per_param / optimizer_bytes_per_param), 0.0)
            + np.where(wts, weights, 0.0))
    return removed, host


def offload_traffic_bytes(offload, weights, optimizer, *, weight_bytes_per_param, gradient_bytes_per_param,
                          optimizer_bytes_per_param):
    """PCIe bytes per GPU: ``(gradients_down, weights_up_per_step, weights_up_per_microbatch,
    weights_down)``.

    Optimizer offload: the gradient shard goes down and the updated 16-bit weights of the shard
    come up once per step (shard parameters = ``optimizer / optimizer_bytes_per_param``).  Weight
    offload: the GPU's weights come up for every micro-batch's forward and backward (2x, per
    micro-batch); without optimizer offload the GPU-updated weights go back down once per step.
    """
    opt, wts = _bit(offload, OPTIMIZER_BIT), _bit(offload, WEIGHTS_BIT)
    shard_params = np.asarray(optimizer, dtype=float) / optimizer_bytes_per_param
    weights = np.asarray(weights, dtype=float)
    return (np.where(opt, shard_params * gradient_bytes_per_param, 0.0),
            np.where(opt, shard_params * weight_bytes_per_param, 0.0),
            np.where(wts, 2.0 * weights, 0.0),
            np.where(wts & ~opt, weights, 0.0))
