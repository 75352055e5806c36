"""The input pipeline: how fast storage and decoding deliver samples, and what it exposes.

DESIGN.md, "Data pipeline": the rate an input pipeline can deliver is the slowest of its stages,
``min(storage bandwidth / bytes per sample, CPU cores x per-core decode rate, GPU decode rate)``;
with prefetching the step takes ``max(compute, input)``, without it ``compute + input``.  Only the
decode stage in use (CPU or GPU, as in NVIDIA DALI) counts.
"""

from __future__ import annotations

import numpy as np


def input_rate(bytes_per_sample, storage_bandwidth, decode_rate):
    """Samples/s one node's pipeline delivers: the slower of storage and decoding.

    ``storage_bandwidth`` in bytes/s (``inf`` when storage is not limiting), ``decode_rate`` in
    samples/s for the whole node.  Floats or arrays.
    """
    bytes_per_sample = np.asarray(bytes_per_sample, dtype=float)
    if np.any(bytes_per_sample <= 0):
        raise ValueError(f"data.bytes_per_sample must be positive, got {bytes_per_sample}")
    return np.minimum(np.asarray(storage_bandwidth, dtype=float) / bytes_per_sample, decode_rate)


def step_time_with_input(compute_time, input_time, prefetch):
    """Step time given compute and input times: ``max`` with prefetch, the sum without."""
    return np.where(prefetch, np.maximum(compute_time, input_time), compute_time + input_time)


def exposed_input_time(samples_per_node, compute_time, data, cluster, profile):
    """Input time that shows in the step: 0 when no ``data`` section is given.

    ``data`` is a :class:`perfmodel.scenario.DataSpec`; ``samples_per_node`` the samples one node
    consumes per step; ``compute_time`` the rest of the step (arrays broadcast).
    """
    compute_time = np.asarray(compute_time, dtype=float)
    if data is None:
        return np.zeros_like(compute_time)
    if data.decode == "cpu":
        decode = data.cpu_cores_per_gpu * cluster.gpus_per_node * profile.get("cpu_decode_rate")
    else:
        decode = cluster.gpus_per_node * profile.get("gpu_decode_rate")
    storage = np.inf if data.storage_bandwidth is None else data.storage_bandwidth
    input_time = samples_per_node / input_rate(data.bytes_per_sample, storage, decode)
    return step_time_with_input(compute_time, input_time, data.prefetch) - compute_time
