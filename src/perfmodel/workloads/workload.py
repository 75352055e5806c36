"""The :class:`Workload` record shared by the transformer and CNN builders, and the helpers that
turn a list of per-op formulas into an :class:`~perfmodel.workloads.ops.OpTable`.

A builder describes each op with a :class:`OpSpec` whose numeric fields are numpy expressions in
the plan variables (micro-batch ``b``, tensor-parallel degree ``t``, context-parallel degree
``c``); :func:`build_table` broadcasts them all to the plan shape.  There is one formula per op,
evaluated on scalars or on arrays of candidate plans alike.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from perfmodel.inputs import INTEGER_LIMITS, excerpt
from perfmodel.vocabulary import ACTIVATION_BYTES, TRAIN_PRECISIONS
from perfmodel.workloads.ops import BACKWARD_BYTES_FACTOR, OpTable, backward_kernels

__all__ = ["PRECISIONS", "ACTIVATION_BYTES", "MODEL_FLOP_KINDS", "OpSpec", "Workload",
           "activation_bytes", "plan_arrays", "build_table", "positive_int", "cross_entropy_op"]

PRECISIONS = TRAIN_PRECISIONS
# Op kinds whose FLOPs are "model FLOPs" as MFU counts them (PaLM, Chowdhery et al. 2022, App. B):
# the GEMM-like work; elementwise, norm, softmax, loss and pooling FLOPs are left out.
MODEL_FLOP_KINDS = ("matmul", "conv", "attention")

# FLOP per element of the memory-bound ops, counted from their defining formulas (they only
# place these ops on the roofline; model FLOPs leave them out):
NORM_FLOPS = 7  # Layer/Batch norm: mean, variance (2), subtract, divide, scale, shift
GELU_FLOPS = 8  # tanh approximation: cube, 2 multiply-adds, tanh, add, 2 multiplies
SWIGLU_FLOPS = 4  # silu(g) * u = g / (1 + exp(-g)) * u: exp, add, divide, multiply
RESIDUAL_FLOPS = 2  # dropout scale + residual add
LOSS_FLOPS = 5  # softmax cross entropy: max, subtract, exp, sum, log

# A softmax row that stays on chip is read once; a longer one (a language model's vocabulary) is
# read three times: for its maximum, for its sum of exponentials and to write the output (PyTorch
# aten/src/ATen/native/cuda/SoftMax.cu: rows of up to 1,024 elements run a persistent warp kernel,
# longer ones a block per row that reduces over the row twice before it writes).  ASSUMPTION: a
# row stays on chip while its fp32 values fit in the 48 KiB of shared memory a block gets.
SOFTMAX_ON_CHIP_ROW_BYTES = 48 * 1024


def cross_entropy_op(name: str, elements, A: int, row_length=None, placement: str = "post") -> OpSpec:
    """Softmax cross entropy over ``elements`` logits per micro-batch (rows of ``row_length``
    logits; None: rows short enough to stay on chip, a CNN head's classes), as PyTorch runs it
    under mixed precision: ``cross_entropy``, ``log_softmax`` and ``nll_loss`` autocast to fp32
    (PyTorch AMP op reference, "CUDA Ops that can autocast to float32"; Megatron-LM casts the
    logits with ``.float()`` before its vocab-parallel cross entropy likewise), so with 16-bit
    activations (``A`` < 4 bytes) the logits are cast up first and the gradient cast back last.

    Bytes per logit (a row is read once on chip, three times when long: :data:`SOFTMAX_ON_CHIP_ROW_BYTES`):

    - forward: cast ``A + 4``; log-softmax ``4 + 4`` or ``12 + 4`` (reads, then writes the fp32 output it keeps
      for backward; Korthikanti et al. 2022, Sec. 4.3: ``4 s b V / t`` bytes); the target gather is
      negligible;
    - backward: the fp32 input gradient of ``nll_loss``, zero-filled (4); the log-softmax backward
      reads the gradient for its row sum (a long row: a pass of its own, 4) and with the saved
      output writes the input gradient (12); cast back ``4 + A``.

    Kernels: cast (16-bit only), log-softmax and gather forward; zero fill, scatter, log-softmax
    backward and the cast back (16-bit only) backward.  Fused cross-entropy kernels (a Triton loss
    that never writes the probabilities) move less; they are not modelled."""
    cast = A < 4
    long_rows = row_length is not None and 4.0 * np.asarray(row_length, dtype=float) > SOFTMAX_ON_CHIP_ROW_BYTES
    forward = cast * (A + 4) + 4 * np.where(long_rows, 3.0, 1.0) + 4
    backward = 4 + 4 * long_rows + 12 + cast * (4 + A)
    return OpSpec(name, "loss", placement, fp32=True, flops=LOSS_FLOPS * elements, bytes=forward * elements,
                  bytes_backward=backward * elements, saved_bytes=4 * elements,
                  kernels_forward=2.0 + cast, kernels_backward=3.0 + cast)


def positive_int(value, field_name: str) -> int:
    """``value`` as an int > 0 (and within its limit in :data:`perfmodel.inputs.INTEGER_LIMITS`),
    else a ValueError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{field_name} must be a positive integer, got {excerpt(value)}")
    limit = INTEGER_LIMITS.get(field_name.rsplit(": ", 1)[-1])
    if limit is not None and value > limit:
        raise ValueError(f"{field_name} = {excerpt(value)}: must be from 1 to {limit:,} (the {field_name} limit)")
    return int(value)


def activation_bytes(precision: str) -> int:
    """Bytes per element at a training precision; unknown precision -> ValueError."""
    if precision not in ACTIVATION_BYTES:
        raise ValueError(f"precision {precision!r} is not known; allowed: {', '.join(PRECISIONS)}")
    return ACTIVATION_BYTES[precision]


def plan_arrays(micro_batch, tp, cp):
    """Validate the plan variables and return them as float arrays plus their broadcast shape."""
    arrays = []
    for value, field_name in ((micro_batch, "micro_batch"), (tp, "tp"), (cp, "cp")):
        array = np.asarray(value)
        if array.dtype.kind not in "iu" and not (array.dtype.kind == "f" and np.all(array == np.round(array))):
            raise ValueError(f"{field_name} must be an integer or an integer array, got {value!r}")
        if array.size == 0 or np.any(array <= 0):
            raise ValueError(f"{field_name} must be positive, got {value!r}")
        arrays.append(array.astype(float))
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ValueError(f"micro_batch, tp and cp shapes {[a.shape for a in arrays]} do not broadcast") from None
    return (*arrays, shape)


@dataclass
class OpSpec:
    """One op's formulas; numeric fields are floats or arrays that broadcast to the plan shape."""

    name: str
    kind: str
    placement: str = "layer"
    fp32: bool = False
    flops: object = 0.0
    bytes: object = 0.0
    params: object = 0.0
    saved_bytes: object = 0.0
    m: object = 0.0
    n: object = 0.0
    k: object = 0.0
    batch_gemms: object = 1.0
    expert: bool = False  # a mixture-of-experts expert GEMM (its params split over expert parallelism)
    implicit: bool = False  # GEMM matrices never in memory (implicit-GEMM conv, fused attention): traffic = bytes
    winograd: bool = False  # a convolution cuDNN can run by a Winograd algorithm (ops.OpTable)
    pass_bytes: object = 0.0  # the part of bytes its memory-bound side kernels move (unfused softmax, dropout)
    kernels_forward: object = 1.0  # kernels one instance launches forward (may grow with the micro-batch)
    kernels_backward: object = None  # ... backward; None: by kind (ops.backward_kernels)
    eager_only: bool = False  # Python-side bookkeeping a graph-compiled framework batches away (ops.OpTable)
    column_parallel: bool = False  # a column-parallel GEMM: its input gradient is all-reduced over TP backward
    bytes_backward: object = None  # backward bytes; None: ops.BACKWARD_BYTES_FACTOR x bytes


def build_table(ops: list[OpSpec], repeat: list[int], plan_shape: tuple[int, ...]) -> OpTable:
    """Stack the op formulas into an :class:`OpTable` with columns ``(n_ops, *plan_shape)``."""

    def column(name: str) -> np.ndarray:
        return np.stack([np.broadcast_to(np.asarray(getattr(op, name), dtype=float), plan_shape)
                         for op in ops])

    return OpTable(
        name=[op.name for op in ops], kind=[op.kind for op in ops],
        placement=[op.placement for op in ops], repeat=np.asarray(repeat, dtype=float),
        fp32=np.array([op.fp32 for op in ops], dtype=bool),
        m=column("m"), n=column("n"), k=column("k"), batch_gemms=column("batch_gemms"),
        flops=column("flops"), bytes=column("bytes"), params=column("params"),
        saved_bytes=column("saved_bytes"), plan_shape=tuple(plan_shape),
        expert=np.array([op.expert for op in ops], dtype=bool),
        implicit=np.array([op.implicit for op in ops], dtype=bool), pass_bytes=column("pass_bytes"),
        winograd=np.array([op.winograd for op in ops], dtype=bool),
        column_parallel=np.array([op.column_parallel for op in ops], dtype=bool),
        bytes_backward=np.stack([np.broadcast_to(np.asarray(BACKWARD_BYTES_FACTOR * op.bytes if op.bytes_backward is None
                                                            else op.bytes_backward, dtype=float), plan_shape)
                                 for op in ops]),
        eager_only=np.array([op.eager_only for op in ops], dtype=bool),
        kernels_forward=_kernels([op.kernels_forward for op in ops], plan_shape),
        kernels_backward=_kernels([by_kind if op.kernels_backward is None else op.kernels_backward
                                   for op, by_kind in zip(ops, backward_kernels([op.kind for op in ops]))],
                                  plan_shape))


def _kernels(counts: list, plan_shape: tuple[int, ...]) -> np.ndarray:
    """A kernels column: one number per op, or ``(n_ops, *plan_shape)`` when a count is an array
    (it grows with the micro-batch)."""
    if all(np.ndim(count) == 0 for count in counts):
        return np.array(counts, dtype=float)
    return np.stack([np.broadcast_to(np.asarray(count, dtype=float), plan_shape) for count in counts])


@dataclass(frozen=True)
class Workload:
    """A named model: its size and a function that lists its ops for a plan.

    ``layers`` is the number of repeated blocks a pipeline splits: transformer layers, or for a
    CNN the number of ops in its table.  ``ops()`` is per GPU, per micro-batch, forward only
    (see :mod:`perfmodel.workloads.ops`).
    """

    name: str
    family: str  # 'transformer' | 'cnn'
    shape: object  # TransformerShape, or None for CNNs
    params: float
    tokens_per_sample: int | None
    layers: int
    builder: Callable = field(repr=False, default=None)  # compared by identity: overrides differ
    active_params: float | None = None  # parameters one token uses (mixture of experts); None = params

    @property
    def params_per_token(self) -> float:
        """Parameters a token passes through: ``active_params`` for a mixture of experts, else ``params``."""
        return self.params if self.active_params is None else self.active_params

    def ops(self, micro_batch=1, tp=1, cp=1, precision: str = "bf16", flash_attention: bool = True,
            sequence_parallel: bool = False, channels_last: bool = True) -> OpTable:
        """The op table for a plan; ``micro_batch``/``tp``/``cp`` may be integer arrays that broadcast;
        ``sequence_parallel`` (transformers) splits the norms and residual adds over the
        tensor-parallel ranks; ``channels_last`` False (CNNs) holds the activations NCHW, so every
        tensor-core convolution is bracketed by layout transposes (:func:`perfmodel.workloads.cnn.cnn_ops`).

        Tables are memoised (they depend only on these arguments) and read-only: calibration and
        search ask for the same few tables many times."""
        if sequence_parallel and self.family != "transformer":
            raise ValueError(f"sequence_parallel applies to transformers only, not to {self.name} ({self.family})")
        key = tuple((a.shape, a.tobytes(), a.dtype.str) for a in map(np.asarray, (micro_batch, tp, cp)))
        return _cached_ops(self, key, precision, bool(flash_attention), bool(sequence_parallel), bool(channels_last))

    def plan_valid(self, tp=1, cp=1) -> np.ndarray:
        """Boolean (array) of the ``tp``/``cp`` values ``ops()`` accepts for this workload, so a
        search can drop the others before calling it (CNNs: tp = cp = 1 only)."""
        if self.shape is None:
            return (np.asarray(tp) == 1) & (np.asarray(cp) == 1)
        return self.shape.plan_valid(tp, cp)

    @functools.lru_cache(maxsize=256)
    def flops_per_sample(self, training: bool = False) -> float:
        """Model FLOPs per sample (matmul, conv and attention, full s^2 attention score matrix as
        Megatron's and PaLM's formulas count it, no recomputation); training = 3x forward."""
        table = self.ops(1, precision="bf16", flash_attention=False)
        forward = float(table.total("flops", kind=MODEL_FLOP_KINDS))
        return 3.0 * forward if training else forward

    def summary(self) -> dict:
        """Parameters, FLOPs per sample and a per-op-kind table (one sample, tp = cp = 1, bf16,
        no flash attention so the attention row shows the full score-matrix work)."""
        table = self.ops(1, precision="bf16", flash_attention=False)
        by_kind = {}
        for kind in dict.fromkeys(table.kind):
            by_kind[kind] = {column: float(table.total(column, kind=kind))
                             for column in ("flops", "bytes", "params", "saved_bytes")}
            by_kind[kind]["ops"] = int(sum(r for r, k in zip(table.repeat, table.kind) if k == kind))
        return {
            "name": self.name, "family": self.family, "params": self.params,
            "active_params": self.params_per_token,
            "tokens_per_sample": self.tokens_per_sample, "layers": self.layers,
            "forward_flops_per_sample": self.flops_per_sample(),
            "training_flops_per_sample": self.flops_per_sample(training=True),
            "by_kind": by_kind,
            **({"host_ops": host} if (host := self.host_ops()) else {}),
        }

    def host_ops(self) -> dict | None:
        """The workload's Python-side bookkeeping (``eager_only`` ops), or None when it has none:
        their names (``ops``) and the ops an eager framework dispatches for them per micro-batch,
        ``forward_per_step + forward_per_sample x micro_batch`` forward and ``backward_per_step``
        backward (the counts are linear in the micro-batch: read from the tables of 1 and 2)."""
        one, two = self.ops(1), self.ops(2)
        eager = one.eager_only.astype(bool)
        if not eager.any():
            return None
        forward_one, forward_two = (float((table.kernels_forward.reshape(len(table), -1)[:, 0] * eager).sum())
                                    for table in (one, two))
        return {"ops": [name for name, flag in zip(one.name, eager) if flag],
                "forward_per_step": 2 * forward_one - forward_two,
                "forward_per_sample": forward_two - forward_one,
                "backward_per_step": float((one.kernels_backward.reshape(len(one), -1)[:, 0] * eager).sum())}



@functools.lru_cache(maxsize=1024)
def _cached_ops(workload: Workload, key, precision: str, flash_attention: bool, sequence_parallel: bool,
                channels_last: bool = True) -> OpTable:
    """The builder's table for ``key`` = ((shape, bytes, dtype) of micro_batch, tp, cp), read-only."""
    micro_batch, tp, cp = (np.frombuffer(data, dtype=dtype).reshape(shape) for shape, data, dtype in key)
    split = {"sequence_parallel": True} if sequence_parallel else {}  # CNN builders have no such argument
    if workload.family == "cnn" and not channels_last:  # transformer builders have no such argument
        split["channels_last"] = False
    table = workload.builder(micro_batch=micro_batch, tp=tp, cp=cp, precision=precision,
                             flash_attention=flash_attention, **split)
    for column in ("repeat", "fp32", "expert", "m", "n", "k", "batch_gemms", "flops", "bytes", "params", "saved_bytes"):
        getattr(table, column).setflags(write=False)
    return table
