"""The op record: what one layer of a model asks of a GPU.

A workload is a list of ops.  :class:`OpTable` holds them column-wise as numpy arrays so that
the cost models can time every op of every candidate plan in one broadcast: each numeric column
has shape ``(n_ops, *plan_shape)`` where ``plan_shape`` is the broadcast shape of the
``micro_batch``, ``tp`` and ``cp`` arguments the table was built with (``()`` for scalars).

Quantities are **per GPU and per micro-batch, forward pass only**, in SI units (FLOP, bytes).
Backward work derives from forward work by op kind (:data:`BACKWARD_FLOPS_FACTOR`): 2x for
matmuls, convolutions and unfused attention (gradient w.r.t. each GEMM operand; Narayanan et al.
2021, Sec. 5.1), 2.5x for fused (flash) attention (its backward recomputes the score matrix; Dao
2023, FlashAttention-2 Sec. 3), and 2x the bytes for memory-bound ops (read the output gradient and
the saved input, write the input gradient).

An op may stand for several kernels run one after another (unfused attention: the score GEMM,
softmax, dropout and the PV GEMM): ``kernels_forward`` / ``kernels_backward`` count them (the host
dispatches each), and ``pass_bytes`` is the share of ``bytes`` moved by its memory-bound side kernels
(softmax, dropout), which the compute model times on their own instead of hiding them under the
GEMMs' arithmetic (:func:`perfmodel.models.compute.op_times`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OP_KINDS = ("matmul", "conv", "attention", "elementwise", "norm", "softmax", "embedding", "loss", "pool")
PLACEMENTS = ("pre", "layer", "post")

BACKWARD_FLOPS_FACTOR = {"matmul": 2.0, "conv": 2.0, "attention": 2.0}
FUSED_ATTENTION_BACKWARD_FLOPS_FACTOR = 2.5  # flash attention's backward recomputes the scores (Dao 2023)
BACKWARD_BYTES_FACTOR = 2.0
# kernels of one op instance in the backward pass by kind, when the op does not say: a matmul or a
# convolution runs its data- and weight-gradient GEMMs as two kernels, every other op one
BACKWARD_KERNELS = {"matmul": 2.0, "conv": 2.0}


def backward_kernels(kinds) -> np.ndarray:
    """Backward kernels of one instance of ops of these kinds (:data:`BACKWARD_KERNELS`, else 1)."""
    return np.array([BACKWARD_KERNELS.get(kind, 1.0) for kind in kinds], dtype=float)


@dataclass(frozen=True)
class OpTable:
    """Ops of one workload at one (or many) micro-batch / tp / cp settings.

    Columns of length ``n_ops`` (plain lists or 1-D arrays):
      ``name``: op name (``"qkv"``, ``"mlp_up"``, ``"conv2_1a"``...);
      ``kind``: one of :data:`OP_KINDS`;
      ``placement``: ``"pre"`` (embedding: first pipeline stage), ``"layer"`` (repeated
      ``repeat`` times), ``"post"`` (final norm, logits, loss: last pipeline stage);
      ``repeat``: how many times the op runs per micro-batch (transformer layers; 1 for CNN ops);
      ``fp32``: True where mixed precision keeps the op in FP32 (norms, softmax, loss);
      ``expert``: True for a mixture-of-experts expert GEMM (all False for dense models);
      ``implicit``: True for a GEMM-like op whose GEMM matrices never exist in memory: an
      implicit-GEMM convolution gathers its ``m x k`` (im2col) operand on chip from the
      activation, ``kernel volume`` times smaller (NVIDIA cuDNN / CUTLASS "implicit GEMM"), and
      fused attention (flash attention, Dao et al. 2022) keeps its ``m x n`` score tiles on chip.
      The kernel model times their tiles and waves only; their memory traffic is the op's own
      ``bytes`` (False: a plain GEMM, whose matrices are its traffic).
      ``winograd``: True for a convolution cuDNN can run by a Winograd algorithm (2-D, 3 x 3,
      stride 1, one group, not transposed: the filter sizes and strides cuDNN's WINOGRAD and
      WINOGRAD_NONFUSED algorithms accept; Lavin & Gray 2016), which needs fewer multiplications
      than its ``2 m n k`` (:func:`perfmodel.models.compute._efficiencies`);
      ``column_parallel``: True for a tensor-parallel layer's column-parallel GEMM (qkv, MLP up:
      Shoeybi et al. 2019, Sec. 3), whose input gradient is all-reduced over the tensor-parallel
      group in the backward pass (False for every other op and for CNNs);
      ``eager_only``: True for bookkeeping an eager framework dispatches op by op from Python
      between the layers (a detection model's per-image target assignment and proposal
      selection), which a graph-compiled one batches away
      (:func:`perfmodel.models.compute.framework_runs`);
    Columns of shape ``(n_ops, *plan_shape)`` (float arrays):
      ``m``, ``n``, ``k``: GEMM dimensions per GPU (convolutions as implicit GEMM:
      m = batch x output pixels, n = output channels, k = input channels x kernel volume);
      0 for ops that are not GEMMs;
      ``batch_gemms``: independent GEMMs of that shape (attention heads per GPU), else 1;
      ``flops``: forward FLOP per GPU per micro-batch for one instance of the op;
      ``bytes``: forward bytes read + written (activations, weights) at the training precision;
      ``pass_bytes``: the part of ``bytes`` moved by the op's memory-bound side kernels (0 for a
      single-kernel op);
      ``params``: parameters held per GPU (a count, not bytes);
      ``saved_bytes``: activation bytes kept for the backward pass (no recomputation).
      ``bytes_backward``: backward bytes read + written, where the op counts them itself (default
      :data:`BACKWARD_BYTES_FACTOR` x ``bytes``).
    Columns of length ``n_ops`` (floats), or of shape ``(n_ops, *plan_shape)`` when an op's count
    grows with the micro-batch: ``kernels_forward``, ``kernels_backward``: kernels one instance of
    the op launches per pass (default 1 forward, :data:`BACKWARD_KERNELS` backward).
    """

    name: list[str]
    kind: list[str]
    placement: list[str]
    repeat: np.ndarray
    fp32: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    batch_gemms: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    params: np.ndarray
    saved_bytes: np.ndarray
    plan_shape: tuple[int, ...] = field(default=())
    expert: np.ndarray | None = None
    implicit: np.ndarray | None = None
    winograd: np.ndarray | None = None
    pass_bytes: np.ndarray | None = None
    kernels_forward: np.ndarray | None = None
    kernels_backward: np.ndarray | None = None
    column_parallel: np.ndarray | None = None
    bytes_backward: np.ndarray | None = None
    eager_only: np.ndarray | None = None

    def __post_init__(self):
        n_ops = len(self.name)
        for column in ("expert", "implicit", "winograd", "column_parallel", "eager_only"):
            if getattr(self, column) is None:
                object.__setattr__(self, column, np.zeros(n_ops, dtype=bool))
        if self.pass_bytes is None:
            object.__setattr__(self, "pass_bytes", np.zeros_like(self.bytes))
        if self.bytes_backward is None:
            object.__setattr__(self, "bytes_backward", self.bytes * BACKWARD_BYTES_FACTOR)
        if self.kernels_forward is None:
            object.__setattr__(self, "kernels_forward", np.ones(n_ops))
        if self.kernels_backward is None:
            object.__setattr__(self, "kernels_backward", backward_kernels(self.kind))
        for column in ("kind", "placement", "repeat", "fp32", "expert", "implicit", "winograd", "column_parallel",
                       "eager_only", "kernels_forward", "kernels_backward"):
            if len(getattr(self, column)) != n_ops:
                raise ValueError(f"OpTable column {column!r} has {len(getattr(self, column))} rows, not {n_ops}")
        bad_kind = set(self.kind) - set(OP_KINDS)
        if bad_kind:
            raise ValueError(f"OpTable: unknown op kinds {sorted(bad_kind)}; allowed: {', '.join(OP_KINDS)}")
        bad_place = set(self.placement) - set(PLACEMENTS)
        if bad_place:
            raise ValueError(f"OpTable: unknown placements {sorted(bad_place)}; allowed: {', '.join(PLACEMENTS)}")
        for column in ("m", "n", "k", "batch_gemms", "flops", "bytes", "pass_bytes", "params", "saved_bytes",
                       "bytes_backward"):
            value = getattr(self, column)
            if value.shape != (n_ops, *self.plan_shape):
                raise ValueError(f"OpTable column {column!r} has shape {value.shape}, "
                                 f"expected {(n_ops, *self.plan_shape)}")

    def __len__(self) -> int:
        return len(self.name)

    def per_op(self, column: str) -> np.ndarray:
        """A column with a trailing axis per plan dimension, ready to broadcast with it."""
        values = np.asarray(getattr(self, column))
        return values.reshape(values.shape + (1,) * (len(self.plan_shape) - values.ndim + 1))

    def mask(self, *, kind: str | tuple[str, ...] | None = None, placement: str | None = None,
             expert: bool | None = None) -> np.ndarray:
        """Boolean mask over ops, shaped to broadcast against the numeric columns."""
        kinds = (kind,) if isinstance(kind, str) else kind
        keep = np.ones(len(self), dtype=bool)
        if expert is not None:
            keep &= self.expert == expert
        if kinds is not None:
            keep &= np.isin(self.kind, kinds)
        if placement is not None:
            keep &= np.asarray(self.placement) == placement
        return keep.reshape((len(self),) + (1,) * len(self.plan_shape))

    def total(self, column: str, **selection) -> np.ndarray:
        """Sum of ``column`` x ``repeat`` over the selected ops; shape ``plan_shape``."""
        values = getattr(self, column) * self.per_op("repeat") * self.mask(**selection)
        return values.sum(axis=0)

    def backward_flops(self) -> np.ndarray:
        """Backward FLOP per op instance (see module docstring for the factors)."""
        factor = np.array([FUSED_ATTENTION_BACKWARD_FLOPS_FACTOR if kind == "attention" and implicit
                           else BACKWARD_FLOPS_FACTOR.get(kind, 1.0) for kind, implicit in zip(self.kind, self.implicit)])
        return self.flops * factor.reshape((len(self),) + (1,) * len(self.plan_shape))

    def backward_bytes(self) -> np.ndarray:
        """Backward bytes per op instance: the op's own count where it gives one (``bytes_backward``:
        the loss's kernels), else :data:`BACKWARD_BYTES_FACTOR` x the forward bytes (GEMM-like ops
        move about what the forward moved twice, memory-bound ops read the gradient and saved input
        and write one)."""
        return self.bytes_backward

    def backward_pass_bytes(self) -> np.ndarray:
        """Backward bytes of the side kernels (``pass_bytes`` by :data:`BACKWARD_BYTES_FACTOR`:
        softmax and dropout backward read the gradient and a saved tensor and write one)."""
        return self.pass_bytes * BACKWARD_BYTES_FACTOR


def unique_plan_shapes(micro_batch, tp, cp) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (micro_batch, tp, cp) triples of many plans and, per plan, the index of its triple.

    Op tables depend on these three numbers only, so a search over a million plans builds and
    times the ops of a few dozen triples and gathers the results with ``inverse``.  Each triple is
    packed into one integer (micro-batch < 2**31, tp and cp < 2**16) for a flat ``np.unique``.
    """
    micro_batch, tp, cp = (np.asarray(a, dtype=np.int64).ravel() for a in (micro_batch, tp, cp))
    if np.any(tp >= 2**16) or np.any(cp >= 2**16) or np.any(micro_batch >= 2**31):
        raise ValueError("micro_batch, tp or cp out of range for plan packing")
    keys, inverse = np.unique((micro_batch << 32) | (tp << 16) | cp, return_inverse=True)
    return keys >> 32, (keys >> 16) & 0xFFFF, keys & 0xFFFF, inverse.ravel()
