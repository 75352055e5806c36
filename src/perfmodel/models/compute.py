"""Roofline compute model: how long one op takes on one GPU.

Each op is limited by either its arithmetic or its memory traffic (the roofline of Williams,
Waterman and Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009):

    time = max(FLOP / (peak x eta_compute), bytes / (bandwidth x eta_memory)) + launch overhead

GEMM-like ops (matmul, conv as implicit GEMM, attention) run on tensor cores at the peak of the
training precision (FP32 training: the FP32 CUDA-core peak); every other op runs on CUDA cores and
is timed against the FP32 CUDA-core peak (it is memory-bound in practice).  The GEMM efficiency
falls for small or odd shapes through tile quantization, wave quantization and a fixed per-tile
cost (NVIDIA Deep Learning Performance docs, "Matrix Multiplication Background User's Guide",
sections "Tile Quantization" and "Wave Quantization").

**fp8 as Transformer Engine runs it** (NVIDIA Transformer Engine, ``te.Linear`` under
``fp8_autocast`` with the delayed-scaling recipe): the matmuls run at the FP8 peak at the bf16
GEMM efficiency times the architecture's ``fp8_gemm_efficiency`` (through
:func:`perfmodel.models.gemm.gemm_parameters`);
every other op stays in bf16.  Each fp8 matmul adds memory-bound cast kernels
(:func:`fp8_cast_bytes`, :func:`fp8_cast_times`): in the forward pass its input is cast to fp8, in
the backward pass the output gradient, and once per step its weight (TE caches the fp8 weight
over the micro-batches of a step: Megatron-LM passes ``is_first_microbatch`` to ``te.Linear``,
which casts on the first and reuses the cast on the others; the chain adds the weight casts once
per step); each cast reads the bf16 tensor (2 bytes per element) and
writes it in fp8 twice, row-wise and transposed (1 + 1 bytes), because Hopper's FP8 tensor-core
GEMMs take only the "TN" layout (cuBLASLt ``cublasLtMatmul`` docs, FP8 restrictions) and the
weight-gradient GEMM needs the transposed operand (TE's fused ``cast_transpose`` kernels).  The
amax TE's delayed scaling needs is reduced inside the same cast kernels; the amax-history and
scale update is one fused kernel per step and is not counted (a few microseconds).  Not modelled:
TE fusing the input cast into a preceding LayerNorm (``LayerNormLinear``), so the input casts
here are an upper bound.

**Host dispatch.** The framework dispatches kernels one by one from the host, asynchronously:
the host runs ahead of the GPU and the GPU only waits when the host falls behind ("Asynchronous
execution", PyTorch CUDA semantics docs; NVIDIA CUDA C++ Programming Guide, "Asynchronous
Concurrent Execution").  An op alone takes at least the host's dispatch time
(:func:`host_dispatch_seconds`: the framework's ``host_dispatch_time`` on the reference host
times the ``host_dispatch_scale`` of the GPU generation's host CPU) (:func:`op_times`);
a sequence of ops takes ``max(GPU work, host work)`` (:func:`queued_time`): long GEMMs give the
host the slack to queue the short element-wise kernels behind them, and a pass of many short
kernels is host-bound.  :func:`kernel_launches` counts the kernels each op launches per pass.

**CUDA graphs** (``cuda_graphs=True``): the kernels of a captured graph are replayed by one
``cudaGraphLaunch``, so the per-kernel host dispatch disappears (NVIDIA CUDA C++ Programming
Guide, "CUDA Graphs"); the chain floors each graph (a micro-batch's pass) at one
host dispatch instead, its launch (:func:`perfmodel.chain._compute`).

Every function over numbers broadcasts over numpy arrays: the same formula times one op or a
million candidate plans.  The efficiency parameters are declared in :mod:`perfmodel.parameters`;
:func:`op_times` reads them from a calibration profile, the pure functions take plain numbers.
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.hardware.specs import GPU
from perfmodel.models import gemm
from perfmodel.parameters import PARAMETERS
from perfmodel.profile import CalibrationProfile
from perfmodel.vocabulary import (ASYNC_ATTENTION_FRAMEWORKS, ASYNC_TENSOR_CORE_ARCHITECTURES, ELEMENT_BYTES,
                                  GRAPH_FRAMEWORKS, TRAIN_PRECISIONS)
from perfmodel.workloads.ops import OpTable

__all__ = [
    "TRAIN_PRECISIONS", "roofline_time", "attained_flops", "arithmetic_intensity", "ridge_point", "ridge_points", "gemm_flops", "gemm_bytes",
    "op_peaks", "attention_factor", "roofline_inputs", "op_times", "chain_time", "kernel_launches", "queued_time", "memory_bound", "roofline_points",
    "fp8_cast_bytes", "FP8_CAST_BYTES_PER_ELEMENT", "fp8_cast_times", "framework_runs",
]

TENSOR_KINDS = ("matmul", "conv", "attention")

# Transformer Engine cast_transpose: read bf16 (2 B), write fp8 row-wise (1 B) and transposed (1 B)
FP8_CAST_BYTES_PER_ELEMENT = 4.0



def roofline_time(flops, bytes, peak_flops, bandwidth, compute_efficiency, memory_efficiency,
                  launch_overhead):
    """Seconds for one kernel: max(FLOP / (peak x eta_c), bytes / (bw x eta_m)) + launch.

    Williams, Waterman & Patterson 2009 (CACM 52(4)), the roofline bound, plus a per-kernel launch
    overhead.  All arguments broadcast; FLOP, bytes, FLOP/s, bytes/s, fractions, seconds.
    """
    compute = np.divide(flops, np.multiply(peak_flops, compute_efficiency))
    memory = np.divide(bytes, np.multiply(bandwidth, memory_efficiency))
    return np.maximum(compute, memory) + launch_overhead


def attained_flops(flops, time):
    """FLOP/s actually reached: FLOP / seconds; NaN for an op that takes no time (one its framework
    does not run)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(time) > 0, np.divide(flops, time), np.nan)


def arithmetic_intensity(flops, bytes):
    """FLOP per byte moved to or from memory (the roofline's x axis); NaN for an op that moves
    nothing (host-side bookkeeping)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(bytes) > 0, np.divide(flops, bytes), np.nan)


def ridge_point(peak_flops, bandwidth):
    """Intensity (FLOP/byte) above which a kernel is compute-bound: peak / bandwidth."""
    return np.divide(peak_flops, bandwidth)


def ridge_points(gpu: GPU) -> dict[str, float]:
    """Ridge point (FLOP/byte, datasheet peak over datasheet bandwidth) for each training
    precision the GPU has a peak for."""
    return {p: float(ridge_point(gpu.peak(p), gpu.memory_bandwidth))
            for p in TRAIN_PRECISIONS if p in gpu.precisions}


def gemm_flops(m, n, k, batch=1):
    """2 m n k FLOP per GEMM (one multiply and one add per term)."""
    return 2.0 * np.multiply(np.multiply(m, n), k) * batch


def gemm_bytes(m, n, k, input_bytes, output_bytes, batch=1):
    """Bytes of one GEMM read once and written once: (m k + k n) inputs + m n output."""
    return (np.multiply(np.add(np.multiply(m, k), np.multiply(k, n)), input_bytes)
            + np.multiply(np.multiply(m, n), output_bytes)) * batch


def _check_precision(precision: str) -> None:
    if precision not in TRAIN_PRECISIONS:
        raise ValueError(f"precision {precision!r} is unknown; allowed: {', '.join(TRAIN_PRECISIONS)}")


def op_peaks(kinds, gpu: GPU, precision: str) -> np.ndarray:
    """Peak FLOP/s that each op kind runs at for a training ``precision``.

    matmul, conv and attention use the tensor peak of the precision (``fp32`` = CUDA cores, no
    TF32); with ``fp8`` only matmuls run in FP8 and conv/attention in BF16.  Other kinds
    (elementwise, norm, softmax, embedding, loss, pool) run on CUDA cores: the FP32 peak.
    A precision the GPU has no peak for raises the GPU's ValueError.
    """
    _check_precision(precision)
    tensor = gpu.peak(precision)
    other_tensor = gpu.peak("bf16") if precision == "fp8" else tensor
    cuda_cores = gpu.peak("fp32")
    kinds = np.asarray(kinds)
    return np.where(kinds == "matmul", tensor,
                    np.where(np.isin(kinds, TENSOR_KINDS), other_tensor, cuda_cores))


def _efficiencies(table: OpTable, gpu: GPU, precision: str, peak, profile: CalibrationProfile,
                  framework: str | None = None) -> np.ndarray:
    """eta_compute per op against ``peak``: GEMM-like ops by the GEMM kernel model, 1 for others.

    A matmul, convolution (implicit GEMM) or attention op with a shape gets the share of ``peak``
    that :func:`perfmodel.models.gemm.gemm_kernel_time` reaches on ``batch_gemms`` GEMMs of its
    ``m x n x k`` (tile and split-k choice, waves, L2, power-limited clock); convolutions and
    fused (flash) attention then run at ``conv_efficiency`` / ``attention_efficiency`` of that GEMM
    (:func:`attention_factor`: faster for a Hopper-class kernel where ``framework`` runs one),
    and an FP32 convolution cuDNN can run by a Winograd algorithm (``table.winograd``) another
    ``conv_winograd_gain`` times faster: Winograd's minimal filtering F(2x2, 3x3) computes a 3 x 3
    convolution with 2.25x fewer multiplications, F(4x4, 3x3) with 4x fewer (Lavin & Gray 2016,
    "Fast Algorithms for Convolutional Neural Networks", Sec. 4), at the price of its transforms;
    on tensor cores (TF32, FP16, BF16) cuDNN's implicit GEMMs are timed as GEMMs,
    and unfused attention's score and ``PV`` GEMMs at the plain GEMM's rate (they are cuBLAS batched
    GEMMs; its softmax and dropout are kernels of their own, :func:`chain_time`).  Flash
    attention (Dao 2023) is timed as a GEMM of its shape: that its blocks tile only the queries is
    not modelled.  Implicit GEMMs (``table.implicit``: convolutions, whose im2col operand is
    gathered on chip from an activation ``kernel volume`` times smaller, and fused attention, whose
    ``s x s`` score tiles never leave the chip; Dao et al. 2022, FlashAttention, Sec. 3) are timed
    by their tiles and waves alone: their memory traffic is the op's own ``bytes``, which the
    roofline of :func:`op_times` charges (timing them as explicit GEMMs would make a long sequence
    or a 3x3x3 convolution memory-bound on matrices that are never written).
    Each shaped op's kernel pays the GEMM model's fixed ``gemm_kernel_latency`` once, at full rate.
    A GEMM-like op without a shape gets the large-tile rate.  Other ops: 1.
    """
    group = gpu.architecture
    kind = table.per_op("kind")
    # a fused attention kernel runs at attention_efficiency of its GEMM; unfused attention's score and
    # PV GEMMs are plain batched cuBLAS GEMMs (factor 1)
    fused_attention = (kind == "attention") & table.per_op("implicit").astype(bool)
    # a convolution on CUDA cores (FP32) that cuDNN can run by Winograd does fewer multiplications
    winograd = table.per_op("winograd").astype(bool) & (precision in gemm.CUDA_CORE_DTYPES)
    conv = profile.get("conv_efficiency", group) * np.where(winograd, profile.get("conv_winograd_gain"), 1.0)
    factor = np.select([kind == "conv", fused_attention], [conv, attention_factor(gpu, profile, framework)], 1.0)
    tensor = np.isin(kind, TENSOR_KINDS)
    shaped = (table.m > 0) & (table.n > 0) & (table.k > 0) & (table.batch_gemms > 0) & tensor
    m, n, k, batch = (np.where(shaped, x, 1.0) for x in (table.m, table.n, table.k, table.batch_gemms))
    # with fp8 only matmuls read fp8 operands; conv and attention run in bf16 (op_peaks)
    # frameworks run matmuls as nn.Linear: in FP32 that is cublasLt's addmm path (gemm.linear_share)
    parameters = gemm.gemm_parameters(gpu, "bf16" if precision == "fp8" else precision, profile,
                                      linear=kind == "matmul")
    parameters["input_bytes"] = np.where(kind == "matmul", ELEMENT_BYTES[precision], parameters["input_bytes"])
    implicit = table.per_op("implicit")
    parameters["input_bytes"] = np.where(implicit, 0.0, parameters["input_bytes"])
    parameters["output_bytes"] = np.where(implicit, 0.0, parameters["output_bytes"])
    if precision == "fp8":  # the matmuls' inner loop at the fp8 GEMM efficiency
        parameters["efficiency"] = np.where(kind == "matmul", gemm.gemm_parameters(gpu, "fp8", profile)["efficiency"],
                                            parameters["efficiency"])
    clock = gemm.clock_ratio(gpu, profile)
    parameters["peak_flops"] = peak * clock
    # the tiles' work runs at `factor` of the GEMM's rate; the kernel's fixed latency is paid once
    latency = parameters.pop("kernel_latency")
    work_s = gemm.gemm_kernel_time(m, n, k, batch, **parameters)
    shape_eta = gemm_flops(m, n, k, batch) / ((work_s / factor + latency) * peak)
    large_tile = parameters["efficiency"] * clock
    return np.where(shaped, shape_eta, np.where(tensor, large_tile * factor, 1.0))


def attention_factor(gpu: GPU, profile: CalibrationProfile, framework: str | None = None) -> float:
    """Rate of a fused attention kernel as a share of a GEMM of its shape: ``attention_efficiency``
    of the architecture (a FlashAttention-2-class kernel), times ``attention_async_kernel_gain`` where
    the architecture has asynchronous tensor cores
    (:data:`~perfmodel.vocabulary.ASYNC_TENSOR_CORE_ARCHITECTURES`) and ``framework`` runs an attention
    kernel written for them (:data:`~perfmodel.vocabulary.ASYNC_ATTENTION_FRAMEWORKS`: NeMo's Transformer
    Engine cuDNN attention; FlashAttention-3, Shah et al. 2024, is 1.5-2.0x FlashAttention-2 on
    H100), capped at 1 (no attention kernel outruns the GEMM of its shape).  A framework not stated
    counts as FlashAttention-2 class."""
    factor = profile.get("attention_efficiency", gpu.architecture)
    if gpu.architecture in ASYNC_TENSOR_CORE_ARCHITECTURES and framework in ASYNC_ATTENTION_FRAMEWORKS:
        factor = min(1.0, factor * profile.get("attention_async_kernel_gain"))
    return factor


def roofline_inputs(table: OpTable, gpu: GPU, precision: str, profile: CalibrationProfile,
                    framework: str | None = None):
    """(peak, bandwidth, eta_compute, eta_memory, launch) for every op, ready for roofline_time;
    ``framework`` picks the fused attention kernel's rate (:func:`attention_factor`).
    Timing the GEMM-like ops' shapes is the costly part of a step's compute: a caller that needs
    both :func:`op_times` and :func:`memory_bound` of one table computes these once and passes them
    (``inputs=``)."""
    peak = np.where(table.per_op("fp32"), gpu.peak("fp32"), op_peaks(table.per_op("kind"), gpu, precision))
    eta_c = _efficiencies(table, gpu, precision, peak, profile, framework)
    bandwidth, eta_m, launch = _memory_inputs(gpu, profile)
    return peak, bandwidth, eta_c, eta_m, launch


def _memory_inputs(gpu: GPU, profile: CalibrationProfile):
    """(bandwidth, eta_memory, launch): what a memory-bound kernel's roofline time needs."""
    return gpu.memory_bandwidth, profile.get("memory_efficiency", gpu.architecture), profile.get("kernel_launch_overhead")


def op_times(table: OpTable, gpu: GPU, precision: str, profile: CalibrationProfile,
             sustained: float = 1.0, cuda_graphs: bool = False,
             host_floor: bool = True, framework: str | None = None, inputs=None) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward seconds of ONE instance of each op, shape ``(n_ops, *plan_shape)``.

    The roofline of each op's kernels (:func:`chain_time`) at the peak of :func:`op_peaks`; GEMM-like ops
    (matmul/conv/attention) at the efficiency the GEMM kernel model gives their shape
    (:func:`_efficiencies`), other ops an eta_compute of 1 (they are memory-bound).  Ops marked
    ``fp32`` (norms, softmax, loss under AMP) run at the FP32 peak.  Backward uses
    ``table.backward_flops()``/``backward_bytes()`` with the same efficiencies and the table's
    kernels per op and pass.  Element-wise ops move only the unfused share ``1 - elementwise_fusion``
    of their bytes.  With ``host_floor`` (an op alone) every kernel takes at least the host's
    :func:`host_dispatch_seconds` for ``framework`` (None: a framework not stated, the prior):
    the host dispatches kernels one by one, so a kernel shorter than that leaves the GPU waiting
    (launch-bound); with ``cuda_graphs`` the graph replays them without the host and that floor is
    0.  ``host_floor=False`` gives the GPU's own seconds, for a sequence of ops timed by
    :func:`queued_time`.  With ``precision="fp8"`` each
    matmul also pays its input cast (forward) and output-gradient cast (backward) kernels
    (:func:`fp8_cast_times`; its weight cast, once per step, is the caller's).  ``sustained`` scales the compute peaks
    (a whole training step holds a lower clock than an isolated kernel; see the
    ``sustained_clock_fraction`` parameter).  Parameters come from ``profile`` for the group
    ``gpu.architecture``.  ``inputs``: the table's :func:`roofline_inputs`, when the caller has them.
    """
    forward, backward = _kernel_times(table, gpu, precision, profile, sustained, inputs, framework)
    runs = framework_runs(table, framework)
    host = 0.0 if cuda_graphs or not host_floor else host_dispatch_seconds(profile, framework, gpu.architecture)
    input_cast, _, gradient_cast = fp8_cast_times(table, gpu, precision, profile, cuda_graphs or not host_floor,
                                                  framework)
    return (np.maximum(forward, host * table.per_op("kernels_forward")) * runs + input_cast,
            np.maximum(backward, host * table.per_op("kernels_backward")) * runs + gradient_cast)


def framework_runs(table: OpTable, framework: str | None) -> np.ndarray:
    """Per op (shaped like :meth:`OpTable.per_op`), 1 where ``framework`` runs the op and 0 for the
    Python-side bookkeeping (``table.eager_only``: a detection model's per-image target assignment
    and proposal selection) that a graph-compiled framework
    (:data:`~perfmodel.vocabulary.GRAPH_FRAMEWORKS`: TensorFlow's and JAX's traced graphs, which
    take such steps batched over the images at fixed sizes) does not dispatch op by op.  A
    framework not stated runs them (eager PyTorch, the common case; the estimate says so)."""
    skip = table.per_op("eager_only").astype(bool) & (framework in GRAPH_FRAMEWORKS)
    return np.where(skip, 0.0, 1.0)


def kernel_launches(table: OpTable, precision: str, framework: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Kernels the host dispatches for ONE instance of each op, (forward, backward), shaped like
    the table's per-op columns: the table's ``kernels_forward`` / ``kernels_backward`` (one per op
    and pass; two in the backward pass of a matmul or convolution, whose data- and weight-gradient
    GEMMs are two kernels; an unfused attention's chain, a flash attention's three backward
    kernels), plus the fp8 cast kernels (:func:`fp8_cast_bytes`: the input cast forward, the
    output-gradient cast backward); none for the ops ``framework`` does not run
    (:func:`framework_runs`)."""
    input_cast, _, gradient_cast = (cast > 0 if precision == "fp8" else np.zeros_like(cast, dtype=bool)
                                    for cast in fp8_cast_bytes(table))
    runs = framework_runs(table, framework)
    return table.per_op("kernels_forward") * runs + input_cast, table.per_op("kernels_backward") * runs + gradient_cast


# ASSUMPTION (shown by confidence()): a framework whose rows never determined its host dispatch time
# has it to within x2 at one standard error: torch's nn.Linear forward costs its host 13.5 us on an
# H100 DGX and TransformerEngine's 2.5-2.7x that on Grace hosts (NVIDIA/TransformerEngine#2053), and a
# modelled op stands for one to three framework kernels.  (The fit's own prior is deliberately wider,
# so that rows of a stack far from the prior, such as TensorFlow 1 graphs, can move it.)
HOST_PRIOR_LOG_SIGMA = math.log(2.0)


def host_dispatch_seconds(profile: CalibrationProfile, framework: str | None, architecture: str) -> float:
    """Seconds the host takes to dispatch one kernel: ``framework``'s ``host_dispatch_time`` (None:
    not stated, its prior) on the reference host, times the ``host_dispatch_scale`` of the
    ``architecture``'s systems (their host CPU; Hopper's DGX H100 host is the reference)."""
    return profile.get("host_dispatch_time", framework) * profile.get("host_dispatch_scale", architecture)


def host_log_error(profile: CalibrationProfile, framework: str | None, architecture: str | None = None) -> float:
    """One standard error, in log space, of :func:`host_dispatch_seconds`: the framework's
    ``host_dispatch_time`` error and the architecture's ``host_dispatch_scale`` error in quadrature
    (independent fits).  The framework's is its fitted relative error when rows determined it, else
    :data:`HOST_PRIOR_LOG_SIGMA`; a partially pooled value (the framework's own rows did not
    determine it) takes the smaller of the two: its posterior width is the fit's wide box prior
    wherever its rows say nothing, which is not a statement about the stack.  The scale's is 0 on
    the reference architecture (its unit), its fitted relative error when rows determined it, else
    its prior width."""
    fitted = None if profile.prior_only("host_dispatch_time", framework) else \
        profile.log_error("host_dispatch_time", framework)
    if fitted is None:
        stack = HOST_PRIOR_LOG_SIGMA
    else:
        stack = min(fitted, HOST_PRIOR_LOG_SIGMA) if profile.pooled("host_dispatch_time", framework) else fitted
    return math.hypot(stack, _host_scale_log_error(profile, architecture))


def _host_scale_log_error(profile: CalibrationProfile, architecture: str | None) -> float:
    """One standard error, in log space, of ``architecture``'s ``host_dispatch_scale`` (see
    :func:`host_log_error`); 0 when no architecture is named."""
    if architecture is None or architecture == PARAMETERS["host_dispatch_scale"].reference_group:
        return 0.0
    fitted = None if host_scale_is_prior(profile, architecture) else profile.log_error("host_dispatch_scale", architecture)
    return PARAMETERS["host_dispatch_scale"].prior_log_sigma if fitted is None else fitted


def host_scale_is_prior(profile: CalibrationProfile, architecture: str) -> bool:
    """Whether ``architecture``'s ``host_dispatch_scale`` is its prior (no row fitted it) rather
    than the reference host's unit or a fitted value."""
    return (architecture != PARAMETERS["host_dispatch_scale"].reference_group
            and profile.prior_only("host_dispatch_scale", architecture))


def queued_time(gpu_seconds, launches, host_dispatch_s):
    """Seconds of a sequence of kernels the host dispatches asynchronously: ``max(sum of the GPU's
    kernel times, launches x host_dispatch_s)``.  The host enqueues kernel i at ``i h`` and runs
    ahead while the GPU works, so the GPU idles only when the host's cumulative dispatch time
    passes its own cumulative work; over a pass of identical layers that is the larger of the two
    totals (a head start of one dispatch is neglected).  Arguments are totals over the sequence
    (seconds, kernel count) and broadcast."""
    return np.maximum(gpu_seconds, np.multiply(launches, host_dispatch_s))


def fp8_cast_times(table: OpTable, gpu: GPU, precision: str, profile: CalibrationProfile,
                   cuda_graphs: bool = False, framework: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds of each op's fp8 cast kernels (input per forward pass, weight once per step, output
    gradient per backward pass; :func:`fp8_cast_bytes`), each a memory-bound kernel
    (:func:`roofline_time` with no FLOPs) with its launch and, without ``cuda_graphs``, the host
    dispatch floor (:func:`host_dispatch_seconds`); all 0 unless ``precision`` is ``fp8``."""
    casts = fp8_cast_bytes(table)
    if precision != "fp8":
        return tuple(np.zeros_like(cast) for cast in casts)
    bandwidth, eta_m, launch = _memory_inputs(gpu, profile)
    host = 0.0 if cuda_graphs else host_dispatch_seconds(profile, framework, gpu.architecture)
    return tuple(np.maximum(roofline_time(0.0, cast, 1.0, bandwidth, 1.0, eta_m, launch), host) * (cast > 0)
                 for cast in casts)


def fp8_cast_bytes(table: OpTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes of the Transformer Engine fp8 cast kernels of each op: (forward input cast, forward
    weight cast, backward output-gradient cast), :data:`FP8_CAST_BYTES_PER_ELEMENT` per element of
    the ``m x k`` input, ``k x n`` weight and ``m x n`` output of each of the op's ``batch_gemms``
    GEMMs.  Ops that are not matmuls, run in fp32, or have no shape: 0."""
    cast = (table.per_op("kind") == "matmul") & ~table.per_op("fp32").astype(bool)
    batch = np.where(cast, table.batch_gemms, 0.0) * FP8_CAST_BYTES_PER_ELEMENT
    return (batch * table.m * table.k, batch * table.k * table.n, batch * table.m * table.n)


def chain_time(flops, bytes, pass_bytes, kernels, peak_flops, bandwidth, compute_efficiency, memory_efficiency,
               launch_overhead):
    """Seconds of an op's kernels run one after another: its GEMM-like work on the roofline
    (:func:`roofline_time` of ``flops`` and the ``bytes - pass_bytes`` its GEMMs move), then its
    memory-bound side kernels (``pass_bytes``: an unfused attention's softmax and dropout) at the
    memory rate, and a launch gap per kernel (``kernels``).  A single-kernel op (``pass_bytes = 0``,
    one kernel) is its roofline time.  Broadcasts."""
    gemm = roofline_time(flops, np.subtract(bytes, pass_bytes), peak_flops, bandwidth, compute_efficiency,
                         memory_efficiency, 0.0)
    return gemm + np.divide(pass_bytes, np.multiply(bandwidth, memory_efficiency)) + np.multiply(kernels, launch_overhead)


def _kernel_times(table: OpTable, gpu: GPU, precision: str, profile: CalibrationProfile, sustained: float,
                  inputs=None, framework: str | None = None):
    """Forward and backward seconds of each op's kernels (:func:`chain_time`), before the host
    dispatch floor; element-wise ops move only their unfused share of bytes.  ``inputs``: the
    table's :func:`roofline_inputs`, when the caller has them."""
    peak, *rest = inputs or roofline_inputs(table, gpu, precision, profile, framework)
    inputs = (peak * sustained, *rest)
    unfused = np.where(table.per_op("kind") == "elementwise", 1.0 - profile.get("elementwise_fusion"), 1.0)
    return (chain_time(table.flops, table.bytes * unfused, table.pass_bytes, table.per_op("kernels_forward"),
                       *inputs),
            chain_time(table.backward_flops(), table.backward_bytes() * unfused, table.backward_pass_bytes(),
                       table.per_op("kernels_backward"), *inputs))


def memory_bound(table: OpTable, gpu: GPU, precision: str, profile: CalibrationProfile,
                 sustained: float = 1.0, inputs=None, framework: str | None = None) -> np.ndarray:
    """True for the ops whose memory time exceeds their compute time on the roofline, same
    shape as the table's columns (the forward and backward passes have the same intensity).
    ``inputs``: the table's :func:`roofline_inputs`, when the caller has them."""
    peak, bandwidth, eta_c, eta_m, _ = inputs or roofline_inputs(table, gpu, precision, profile, framework)
    return table.bytes / (bandwidth * eta_m) > table.flops / (peak * sustained * eta_c)


def roofline_points(workload, gpu: GPU, precision: str, profile: CalibrationProfile,
                    micro_batch: int = 1, framework: str | None = None, flash_attention: bool = True):
    """One row per forward op of ``workload`` at ``micro_batch``: where it sits on the roofline
    (attention fused as FlashAttention unless ``flash_attention`` is false).

    Columns: ``op``, ``kind``, ``flops`` (FLOP), ``bytes``, ``intensity`` (FLOP/byte),
    ``attained_flops`` (FLOP/s, launch overhead and host dispatch included), ``efficiency``
    (attained / the op's dense peak; above 1 only for an FP32 convolution run by Winograd, which
    does fewer multiplications than the direct convolution's FLOP it is credited with), ``time_s`` (:func:`chain_time` of the op's kernels), ``bound``
    (``"launch"`` when ``framework``'s host dispatch time (None: not stated, the parameter's prior)
    for the op's kernels exceeds their GPU time, else ``"compute"`` or ``"memory"``: which roofline
    term is larger).  Ops ``framework`` does not run (:func:`framework_runs`) are left out.
    """
    import pandas as pd

    if isinstance(micro_batch, bool) or int(micro_batch) != micro_batch or micro_batch <= 0:
        raise ValueError(f"micro_batch must be a positive integer, got {micro_batch!r}")
    table = workload.ops(int(micro_batch), precision=precision, flash_attention=bool(flash_attention))
    peak, bandwidth, eta_c, eta_m, launch = roofline_inputs(table, gpu, precision, profile, framework)
    runs = framework_runs(table, framework)
    kernels = table.per_op("kernels_forward") * runs
    kernel = chain_time(table.flops, table.bytes, table.pass_bytes, kernels, peak, bandwidth, eta_c, eta_m, launch)
    host = host_dispatch_seconds(profile, framework, gpu.architecture) * kernels
    time = np.maximum(kernel, host)
    compute = roofline_time(table.flops, 0.0, peak, bandwidth, eta_c, eta_m, 0.0)
    memory = roofline_time(0.0, table.bytes, peak, bandwidth, eta_c, eta_m, 0.0)
    frame = pd.DataFrame({
        "op": table.name,
        "kind": table.kind,
        "flops": table.flops,
        "bytes": table.bytes,
        "intensity": arithmetic_intensity(table.flops, table.bytes),
        "attained_flops": attained_flops(table.flops, time),
        "efficiency": attained_flops(table.flops, time) / peak,
        "time_s": time,
        "bound": np.where(host > kernel, "launch", np.where(compute >= memory, "compute", "memory")),
    })
    return frame[runs.reshape(len(table)) > 0]  # ops the framework does not run are not on its roofline
