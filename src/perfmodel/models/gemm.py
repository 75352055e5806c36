"""Time of one GEMM call from the GPU's catalog entry: tiles, waves, split-k, L2, clocks, floor.

A cuBLAS-like kernel choice, vectorized over arrays of shapes (and of GPUs):

- **tile configurations.** cuBLAS picks, per shape, one of a few thread-block tiles ``tm x tn``
  and a split-k factor ``s`` (NVIDIA Matrix Multiplication Background User's Guide, "Tile
  Quantization", "Wave Quantization"; CUTLASS "Efficient GEMM in CUDA", split-k).  Every
  configuration of :data:`TILES` x :data:`SPLITS` is timed and the fastest wins.  A batched call
  (``batch > 1``: ``torch.bmm``, cuBLAS strided-batched GEMM) spreads its GEMMs over the grid and
  does not split k: with split-k allowed, the NeuSight bmm rows of small outputs over a long k
  (``m n <= 1024``, ``k >= 512``) came out 1.3x (V100) to 2.5x (A100) too fast on all five GPUs;
  refitted without it, the GEMM set's error fell (in-sample MAPE 20.8 -> 20.5 %, A100 bmm 24.0 ->
  20.7 %; leave one GPU out 36.1 -> 35.6 %), though the V100 and P100 bmm rows lost about a point.
- **compute time** of a configuration: ``tiles = ceil(m/tm) ceil(n/tn) batch s`` thread blocks run
  in waves of ``SMs x slots``: ``slots = max(1, 128^2 / (tm tn))^g`` small blocks share one SM,
  each at 1/slots of its rate (``g = 1``: a small block alone cannot fill an SM; ``g = 0``: it
  can; ``g`` fitted);
  each block does ``2 tm tn (k/s + k0)`` FLOP (``k0``: pipeline fill and epilogue, in elements
  of k) at the SM's sustained rate times ``eta (1 + c e_L) / (1 + c (1/tm + 1/tn))`` -- a block
  loads ``(tm + tn)`` operand elements per ``tm tn`` FMAs, so small tiles pay more per FLOP
  (CUTLASS "Efficient GEMM in CUDA", hierarchical tiling); ``eta`` is the rate of the largest
  tile (``e_L = 1/256 + 1/128``), the share of peak a large cuBLAS GEMM reaches.
- **memory time**: operands read once and the output written once (plus the split-k partial
  sums), from L2 when the working set fits there: the hit share ``min(1, L2 / bytes)`` is served
  ``l2_gain`` times faster than DRAM (benchmarks time a kernel repeatedly, so a small working set
  is L2-resident).
- **kernel latency**: every kernel adds a fixed device time ``gemm_kernel_latency`` (its start on
  the device, prologue, epilogue, completion), the duration of a tiny GEMM: XLA's H100 table
  times a 256 x 256 x 256 bf16 kernel at 5-6 us of device time, where its tiles' work is under
  1 us.  Only rows that time the kernel alone (a profiler's device time, ``op`` "... kernel")
  separate it from the per-call floor below; inside a training step every GEMM-like op pays it.
- **sustained clock under the power limit.**  The datasheet base clock is the clock a heavy
  load holds at the board power limit (TDP).  Dynamic power grows about as f^3 (P ~ C V^2 f with
  V roughly proportional to f in the DVFS range), so a kernel drawing the share ``a`` of that
  worst-case power at equal clock holds ``f = min(boost, base a^(-1/3))``: a 70 W T4
  (585/1590 MHz) or a 72 W L4 (795/2040 MHz) cannot hold its boost clock, a 250 W V100
  (1245/1380 MHz) can.  ``a`` is one fitted number for all GPUs, not a knob per GPU model.
  That is the clock a long kernel settles at.  A timed call starts from an idle GPU at its boost
  clock, and the power limiter pulls the clock down to the sustained one with a time constant
  ``gemm_boost_window`` (fitted; NVIDIA GPU Boost lowers clocks when the power drawn exceeds the
  limit), so a kernel of length ``t`` runs at the mean clock ``1 + (g - 1)(1 - e^-x)/x`` times the
  sustained one (``x = t / window``, ``g = boost / sustained``): short calls near boost, long ones
  at the sustained clock.  A training step keeps the GPU busy: the sustained clock.
  ASSUMPTIONS for incomplete catalog entries: a GPU without a base or boost clock is assumed to
  hold its boost clock (ratio 1); one without an L2 size gets no L2 reuse (all traffic from DRAM).
- **per-call floor**: host dispatch (framework, launch) and synchronisation of a timed call; an
  nn.Linear call adds the module's Python path (``gemm_linear_call_overhead``).  The
  host dispatches the next call while the GPU runs the last one, so the two overlap partly: one
  call takes ``(floor^p + kernel^p)^(1/p)`` -- ``p = 1`` no overlap (sum), large ``p`` full
  overlap (max); ``p`` is fitted.  Known miss: how much the floor overlaps depends on how the
  calls were timed (a synchronised single call vs a loop of asynchronous calls), which a GEMM's
  description does not say; one ``p`` serves both.

All functions broadcast over numpy arrays: one call times 47,000 measured shapes or millions of
planned ones (the configurations are looped over, a few temporaries of the broadcast shape at a
time; cost ~ ``len(TILES) x len(SPLITS)`` vectorized passes).
"""

from __future__ import annotations

import numpy as np

from perfmodel.hardware.specs import GPU
from perfmodel.profile import CalibrationProfile
from perfmodel.vocabulary import ELEMENT_BYTES, GEMM_OUTPUT_BYTES

__all__ = ["TILES", "SPLITS", "CUDA_CORE_DTYPES", "sustained_clock_ratio", "base_over_boost", "clock_ratio",
           "gemm_kernel_time",
           "gemm_call_time", "power_activity", "transient_clock_gain", "gemm_parameters", "gpu_time", "linear_share"]

TILES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64), (64, 32), (32, 64), (32, 32))
"""Thread-block tiles (tm, tn) the kernel choice ranges over: the 256x128 ... 64x64 shapes of
NVIDIA's Matrix Multiplication Background User's Guide ("Tile Quantization") and the smaller
CUTLASS SGEMM threadblock shapes down to 32x32."""

SPLITS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Split-k factors (CUTLASS split-k serial/parallel reduction).  Up to 256: an output of a few
tiles over a k of 30,000-60,000 (a GEMV-like ``nn.Linear``, or a weight gradient whose k is every
token of the batch) fills the GPU only when k is split that finely; with 16 at most, NeuSight's
rows of that kind came out 4-7x too slow on A100 and V100 (V100 42 x 38 x 51,973: 95 us measured,
523 us predicted).  With 256, the GEMM set's MAPE under the session-21 profile went 20.5 -> 19.6 %;
kernel stage refitted (``scripts/gemm_accuracy.py --subsample 4``): k-fold 20.5 -> 20.0 %, leave one
GPU out 34.4 -> 33.7 % (A100 25.1 -> 23.4 %, V100 27.8 -> 26.3 %)."""

LARGEST_TILE_EDGE = min(1.0 / tm + 1.0 / tn for tm, tn in TILES)
"""Edge share ``1/tm + 1/tn`` of the largest tile: the efficiencies are that tile's rate, and a
tile with edge share ``e`` runs at ``(1 + c e_L) / (1 + c e)`` of it."""

REFERENCE_TILE_ELEMENTS = 128 * 128
"""A block of this many outputs fills one SM; smaller blocks share an SM (``slots``)."""

_STACKED_ELEMENTS = 1 << 18
"""Largest broadcast shape x split factors that :func:`gemm_kernel_time` evaluates in one pass (a
training step's op table: a few hundred shapes, where numpy's per-call cost dominates); larger
arrays (the GEMM rows, a search's plans) go one split factor at a time to bound the temporaries."""

CUDA_CORE_DTYPES = ("fp32",)
"""dtypes whose GEMMs run on CUDA cores (FP32 with TF32 off); the others on tensor cores."""


def sustained_clock_ratio(base_hz, boost_hz, power_activity):
    """Sustained clock / boost clock under the power limit: min(1, (base/boost) a^(-1/3)).

    The base clock is rated at TDP under a heavy load; dynamic power ~ f^3, so a load drawing the
    share ``a`` of that power at equal clock holds base x a^(-1/3) (capped at boost).  NaN base
    (unknown) gives 1 (assumed to hold boost).  Broadcasts.
    """
    ratio = np.divide(base_hz, boost_hz) * np.power(power_activity, -1.0 / 3.0)
    return np.where(np.isnan(ratio), 1.0, np.minimum(1.0, ratio))


def gemm_kernel_time(m, n, k, batch, peak_flops, sm_count, bandwidth, l2_bytes, input_bytes, output_bytes,
                     efficiency, tile_edge_cost, k_overhead, l2_gain, memory_efficiency, small_tile_sharing=1.0,
                     kernel_latency=0.0):
    """Seconds of the fastest tile/split-k configuration for ``batch`` GEMMs (m x k) @ (k x n)
    (split-k only for a single GEMM, ``batch == 1``), plus the fixed device time of one kernel
    (``kernel_latency``).

    ``peak_flops`` is the rate at the sustained clock.  All arguments broadcast (shapes of rows,
    GPUs or plans).
    """
    m, n, k, batch = (np.asarray(x, dtype=float) for x in (m, n, k, batch))
    shape = np.broadcast_shapes(m.shape, n.shape, k.shape, batch.shape, np.shape(peak_flops),
                                np.shape(sm_count), np.shape(bandwidth), np.shape(l2_bytes))
    best = np.full(shape, np.inf)
    per_sm = np.divide(peak_flops, sm_count)
    bandwidth = np.multiply(bandwidth, memory_efficiency)
    operands = (m * k + k * n) * input_bytes
    splits = (1,) if np.all(batch > 1) else SPLITS  # a batched call never splits k
    # the split factors as a leading axis while that stays small, else one split at a time
    stacked = int(np.prod(shape)) * len(splits) <= _STACKED_ELEMENTS
    split_groups = [np.reshape(splits, (-1,) + (1,) * len(shape))] if stacked else [float(s) for s in splits]
    for tm, tn in TILES:
        slots = max(1.0, REFERENCE_TILE_ELEMENTS / (tm * tn)) ** small_tile_sharing
        rate = (per_sm * efficiency * (1.0 + tile_edge_cost * LARGEST_TILE_EDGE)
                / (1.0 + tile_edge_cost * (1.0 / tm + 1.0 / tn)))
        blocks = np.ceil(m / tm) * np.ceil(n / tn) * batch
        for split in split_groups:
            k_split = np.ceil(k / split)
            waves = np.ceil(blocks * split / (np.multiply(sm_count, slots)))
            compute = waves * slots * 2.0 * tm * tn * (k_split + k_overhead) / rate
            outputs = m * n * output_bytes * np.where(split == 1, 1.0, 1.0 + 2.0 * split)
            moved = batch * (operands + outputs)
            # nothing moved (an implicit GEMM, timed by its tiles only) costs no memory time
            hit = np.minimum(1.0, np.divide(l2_bytes, np.where(moved > 0, moved, 1.0)))
            memory = moved * (hit / l2_gain + (1.0 - hit)) / bandwidth
            time = np.where((split > 1) & (batch > 1), np.inf, np.maximum(compute, memory))
            best = np.minimum(best, time.min(axis=0) if stacked else time)
    return best + kernel_latency


def base_over_boost(gpu: GPU) -> float:
    """The catalog's base / boost clock of the GPU; NaN when either is unknown (the clock models
    then assume it holds boost)."""
    if gpu.base_clock_hz is None or gpu.boost_clock_hz is None:
        return np.nan
    return gpu.base_clock_hz / gpu.boost_clock_hz


def clock_ratio(gpu: GPU, profile: CalibrationProfile) -> float:
    """The GPU's sustained / boost clock under a dense GEMM (:func:`sustained_clock_ratio` with the
    catalog's clocks; a missing clock counts as holding boost)."""
    return float(sustained_clock_ratio(base_over_boost(gpu), 1.0, power_activity(gpu, profile)))


def power_activity(gpu: GPU, profile: CalibrationProfile) -> float:
    """``gemm_power_activity`` of the GPU's architecture (a generation's trait, not pooled)."""
    return profile.get("gemm_power_activity", gpu.architecture)


def gemm_parameters(gpu: GPU, dtype: str, profile: CalibrationProfile, linear=False) -> dict:
    """The GPU's catalog numbers and the profile's parameters for a ``dtype`` GEMM, as the keyword
    arguments of :func:`gemm_call_time` (sustained-clock peak, SMs, bandwidth, L2, bytes, etas);
    ``linear`` (bool, broadcasts): an nn.Linear call, whose efficiency is :func:`linear_share` of
    the plain GEMM's."""
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"dtype {dtype!r} is unknown; allowed: {', '.join(ELEMENT_BYTES)}")
    if gpu.sm_count is None:
        raise ValueError(f"gpu {gpu.name}: the GEMM model needs sm_count, which the catalog has as null")
    group = gpu.architecture
    clock = clock_ratio(gpu, profile)
    kind = "gemm_cuda_core_efficiency" if dtype in CUDA_CORE_DTYPES else "gemm_tensor_core_efficiency"
    # fp8: a share of the bf16 tensor-core efficiency (parameter fp8_gemm_efficiency)
    fp8_share = profile.get("fp8_gemm_efficiency", group) if dtype == "fp8" else 1.0
    return {
        "peak_flops": gpu.peak(dtype) * clock, "sm_count": float(gpu.sm_count),
        "bandwidth": gpu.memory_bandwidth, "l2_bytes": 0.0 if gpu.l2_cache is None else gpu.l2_cache,
        "input_bytes": ELEMENT_BYTES[dtype], "output_bytes": GEMM_OUTPUT_BYTES[dtype],
        "efficiency": profile.get(kind, group) * fp8_share * np.where(linear, linear_share(gpu, dtype, profile), 1.0),
        "tile_edge_cost": profile.get("gemm_tile_edge_cost"),
        "k_overhead": profile.get("gemm_k_overhead"), "kernel_latency": profile.get("gemm_kernel_latency"),
        "l2_gain": profile.get("gemm_l2_bandwidth_gain"),
        "small_tile_sharing": profile.get("gemm_small_tile_sharing"),
        "memory_efficiency": profile.get("gemm_memory_efficiency"),
    }


def transient_clock_gain(kernel_s, window_s, base_over_boost, power_activity):
    """Mean clock of a kernel that starts at boost after the GPU idled, over its sustained clock:
    ``1 + (g - 1)(1 - e^-x)/x`` with ``x = kernel_s / window_s`` and ``g = boost / sustained``
    (the power limiter pulls the clock from boost to the sustained clock with time constant
    ``window_s``; the mean of ``g_t = 1 + (g - 1) e^(-t/window)`` over the kernel).  1 when the GPU
    holds boost anyway or its base clock is unknown; tends to ``g`` for short kernels and to 1 for
    long ones.  Broadcasts."""
    sustained = sustained_clock_ratio(base_over_boost, 1.0, power_activity)
    x = np.maximum(np.divide(kernel_s, window_s), 1e-9)
    return 1.0 + (1.0 / sustained - 1.0) * -np.expm1(-x) / x


def gemm_call_time(m, n, k, batch=1, *, floor_s=0.0, overlap=1.0, base_over_boost=np.nan, power_activity=1.0,
                   boost_window_s=5e-3, from_idle=None, **kernel):
    """Seconds of one call: ``(floor_s^p + kernel^p)^(1/p)`` with ``p = overlap`` >= 1 and the
    kernel time of :func:`gemm_kernel_time` (keyword arguments as :func:`gemm_parameters` returns,
    whose ``peak_flops`` is the sustained rate).  A timed call (``from_idle``, bool, broadcasts;
    default: where ``floor_s > 0``) starts from an idle GPU, so its kernel runs at the mean clock of
    :func:`transient_clock_gain` (from the GPU's ``base_over_boost`` clock ratio, ``power_activity``
    and the limiter's ``boost_window_s``; one fixed-point step: the kernel is timed at the sustained
    clock, then at the clock its length allows)."""
    def call(kernel_s):
        return np.power(np.power(floor_s, overlap) + np.power(kernel_s, overlap), 1.0 / overlap)
    kernel_s = gemm_kernel_time(m, n, k, batch, **kernel)
    idle = np.asarray(floor_s) > 0.0 if from_idle is None else np.asarray(from_idle, dtype=bool)
    if not np.any(idle) or np.all(np.isnan(base_over_boost)):
        return call(kernel_s)
    gain = np.where(idle, transient_clock_gain(kernel_s, boost_window_s, base_over_boost, power_activity), 1.0)
    return call(gemm_kernel_time(m, n, k, batch, **{**kernel, "peak_flops": np.multiply(kernel["peak_flops"], gain)}))


def linear_share(gpu: GPU, dtype: str, profile: CalibrationProfile) -> float:
    """Rate of an nn.Linear call (addmm with a bias: cublasLt's bias-epilogue kernels) relative to a
    plain GEMM of its shape: ``gemm_linear_efficiency`` of the architecture for CUDA-core dtypes
    (where it was measured), 1 for tensor-core ones."""
    return profile.get("gemm_linear_efficiency", gpu.architecture) if dtype in CUDA_CORE_DTYPES else 1.0


def gpu_time(m, n, k, batch, gpu: GPU, dtype: str, profile: CalibrationProfile, include_floor: bool = True,
             linear=False, device_only=False):
    """Seconds of one ``dtype`` GEMM call (``batch`` GEMMs) on ``gpu`` with the profile's parameters;
    ``include_floor=False``: the kernel alone at the sustained clock, as inside a busy step;
    ``linear`` (bool, broadcasts): an nn.Linear call, at :func:`linear_share` of the rate, whose
    floor adds ``gemm_linear_call_overhead``; ``device_only`` (bool, broadcasts): a timed kernel
    whose device time a profiler (or a CUDA-graph replay) measured -- no per-call floor, but the
    kernel still starts from an idle GPU (:func:`transient_clock_gain`)."""
    floor = (np.where(device_only, 0.0,
                      profile.get("gemm_call_floor") + np.where(linear, profile.get("gemm_linear_call_overhead"), 0.0))
             if include_floor else 0.0)
    return gemm_call_time(m, n, k, batch, floor_s=floor, overlap=profile.get("gemm_floor_overlap"),
                          from_idle=include_floor,
                          base_over_boost=base_over_boost(gpu),
                          power_activity=power_activity(gpu, profile),
                          boost_window_s=profile.get("gemm_boost_window"),
                          **gemm_parameters(gpu, dtype, profile, linear))
