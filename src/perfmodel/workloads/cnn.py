"""Convolutional workloads from a layer table.

A layer table is a list of rows (dicts), one per op, in execution order.  Shapes are per sample
(``size`` = spatial extent, ``[H, W]`` or ``[D, H, W]``):

* ``{op: conv, in_channels, out_channels, kernel, stride: 1, padding: 0, input_size, groups: 1,
  bias: false, transposed: false}`` - a convolution as an implicit GEMM (Chetlur et al. 2014,
  cuDNN, Sec. 3): ``m = batch x output pixels``, ``n = out_channels/groups``,
  ``k = in_channels/groups x kernel volume``, ``batch_gemms = groups``, ``2mnk`` FLOP.  A
  transposed convolution multiplies every *input* pixel by the kernel: ``m = batch x input
  pixels``, ``n = out_channels x kernel volume``, ``k = in_channels``.  A 2-D 3 x 3 stride-1
  convolution of one group, not transposed, is marked ``winograd`` (cuDNN can run it by a
  Winograd algorithm; :class:`perfmodel.workloads.ops.OpTable`).
* ``{op: bn | relu | add | concat, channels, size}`` - memory-bound elementwise ops (``bn`` is
  any normalisation with a per-channel scale and shift: batch or instance norm).
* ``{op: pool, mode: max | avg, channels, input_size, kernel, stride, padding: 0}``.
* ``{op: fc, in_features, out_features, bias: true}``.
* ``{op: loss, classes}`` - softmax cross entropy (fp32) over ``classes`` outputs per sample
  (:func:`perfmodel.workloads.workload.cross_entropy_op`, rows short enough to stay on chip).
* ``{op: host, forward_ops, forward_ops_per_sample: 0, backward_ops: 0}`` - bookkeeping an eager
  framework dispatches op by op from Python between the layers (a detection model's anchor
  matching, sampling and proposal selection, much of it looping over the images): no modelled
  GPU work, ``forward_ops + forward_ops_per_sample x batch`` kernels forward and ``backward_ops``
  backward, each a host dispatch; marked ``eager_only`` (a graph-compiled framework batches it
  away: :func:`perfmodel.models.compute.framework_runs`).

Every row may carry ``name``, ``shared: true`` on a conv or fc whose weights another op already
holds (a detection head applied to every pyramid level: its work counts at every level, its
parameters once), and ``input_saved: true`` when its input is a tensor that another
op already keeps for backward (a ReLU output feeding a convolution and a shortcut), so that each
tensor is counted once in ``saved_bytes``, as Korthikanti et al. 2022 (Sec. 4.1) count them.
What each op keeps: convolutions, fully connected layers and norms their input, ReLU its output
(PyTorch's in-place ReLU), max pooling its input and int64 indices, the loss its fp32
probabilities; additions, concatenations and average pooling nothing.
"""

from __future__ import annotations

from functools import partial
from math import prod

import numpy as np

from perfmodel.vocabulary import CONV_TRANSPOSE_PRECISIONS
from perfmodel.workloads.workload import (NORM_FLOPS, OpSpec, Workload, activation_bytes, build_table,
                                          cross_entropy_op, plan_arrays, positive_int)

__all__ = ["cnn", "cnn_ops", "conv_output_size", "bottleneck", "transpose_bytes", "CNN_OPS"]

CNN_OPS = ("conv", "bn", "relu", "add", "concat", "pool", "fc", "loss", "host")
_REQUIRED = {"conv": ("in_channels", "out_channels", "kernel", "input_size"), "bn": ("channels", "size"),
             "relu": ("channels", "size"), "add": ("channels", "size"), "concat": ("channels", "size"),
             "pool": ("mode", "channels", "input_size", "kernel", "stride"), "fc": ("in_features", "out_features"),
             "loss": ("classes",), "host": ("forward_ops",)}
_INDEX_BYTES = 8  # PyTorch max pooling keeps int64 argmax indices


def conv_output_size(size, kernel, stride=1, padding=0, transposed=False) -> list[int]:
    """Output spatial size, per dimension: ``(i + 2p - k) // s + 1``, or ``(i - 1) s - 2p + k``
    for a transposed convolution (PyTorch Conv/ConvTranspose documentation)."""
    if transposed:
        return [(i - 1) * stride - 2 * padding + kernel for i in size]
    return [(i + 2 * padding - kernel) // stride + 1 for i in size]


def _check_row(index: int, row: dict) -> dict:
    where = f"layer {index} ({row.get('name', row.get('op'))!r})"
    op = row.get("op")
    if op not in CNN_OPS:
        raise ValueError(f"{where}: op {op!r} is not known; allowed: {', '.join(CNN_OPS)}")
    missing = [key for key in _REQUIRED[op] if key not in row]
    if missing:
        raise ValueError(f"{where}: {op} needs {', '.join(missing)}")
    for key in ("in_channels", "out_channels", "kernel", "stride", "channels", "in_features",
                "out_features", "classes", "groups"):
        if key in row:
            positive_int(row[key], f"{where}: {key}")
    for key in ("input_size", "size"):
        if key in row:
            if not isinstance(row[key], (list, tuple)) or not row[key]:
                raise ValueError(f"{where}: {key} must be a list of spatial sizes, got {row[key]!r}")
            for value in row[key]:
                positive_int(value, f"{where}: {key}")
    for key in ("forward_ops", "forward_ops_per_sample", "backward_ops"):
        if key in row and (isinstance(row[key], bool) or not isinstance(row[key], (int, float))
                           or not 0 <= row[key] < 1e6):
            raise ValueError(f"{where}: {key} must be a number of ops from 0 to 1e6, got {row[key]!r}")
    if op == "pool" and row["mode"] not in ("max", "avg"):
        raise ValueError(f"{where}: pool mode {row['mode']!r} is not known; allowed: max, avg")
    if op == "conv" and (row["in_channels"] % row.get("groups", 1) or row["out_channels"] % row.get("groups", 1)):
        raise ValueError(f"{where}: groups ({row.get('groups')}) must divide in_channels and out_channels")
    return {"name": f"{op}{index}", **row}


def cnn(name: str, layer_table: list[dict]) -> Workload:
    """A CNN workload from a layer table (format in the module docstring)."""
    if not layer_table:
        raise ValueError(f"cnn {name!r}: the layer table is empty")
    rows = tuple(_check_row(i, dict(row)) for i, row in enumerate(layer_table))
    for row in rows:  # sizes must be consistent enough to give a positive output
        if row["op"] in ("conv", "pool") and min(_out_size(row)) <= 0:
            raise ValueError(f"layer {row['name']!r}: output size {_out_size(row)} is not positive")
    builder = partial(cnn_ops, rows)
    params = float(builder(micro_batch=1, tp=1, cp=1, precision="bf16", flash_attention=True).total("params"))
    return Workload(name=name, family="cnn", shape=None, params=params, tokens_per_sample=None,
                    layers=len(rows), builder=builder)


def _out_size(row) -> list[int]:
    return conv_output_size(row["input_size"], row["kernel"], row.get("stride", 1), row.get("padding", 0),
                            row.get("transposed", False))


def cnn_ops(rows, micro_batch=1, tp=1, cp=1, precision: str = "bf16", flash_attention: bool = True,
            channels_last: bool = True):
    """Op table of a checked layer table; ``tp``/``cp`` other than 1 -> ValueError (a CNN is
    data parallel only here).  ``flash_attention`` is accepted and ignored.  With ``channels_last``
    False at a 16-bit precision (:data:`~perfmodel.vocabulary.CONV_TRANSPOSE_PRECISIONS`)
    each convolution also moves its layout transposes (:func:`transpose_bytes`)."""
    A = activation_bytes(precision)
    b, t, c, plan_shape = plan_arrays(micro_batch, tp, cp)
    for value, field_name in ((t, "tp"), (c, "cp")):
        if np.any(value != 1):
            raise ValueError(f"{field_name} must be 1 for a CNN workload (data parallel only), got {value.tolist()}")
    transposes = not channels_last and precision in CONV_TRANSPOSE_PRECISIONS
    return build_table([_op(row, b, A, transposes) for row in rows], [1] * len(rows), plan_shape)


def transpose_bytes(activation_bytes):
    """Forward bytes of the layout transposes around one NCHW 16-bit convolution: cuDNN's
    tensor-core kernels take NHWC tensors, and given NCHW ones it transposes them to NHWC and back
    (NVIDIA cuDNN documentation, Legacy API, "Tensor Transformations": "NCHW-to-NHWC
    transformations to call the Tensor Core operations"): the input read and written once
    transposed, the output once more, ``2 x`` the convolution's activation bytes.  They are the
    op's side kernels (``pass_bytes``), so the backward pass moves :data:`ops.BACKWARD_BYTES_FACTOR`
    times as much: the data gradient's output-gradient and input-gradient transposes, and the
    weight gradient's input and output-gradient ones.  Their kernels' launch gaps are not counted
    (cuDNN launches them inside the one convolution call; about 2 us each, under 1 % of a
    ResNet-50 step).  ResNet-50 in FP16 on an A100 then takes 1.30x as long as channels-last,
    where MosaicML measured channels-last to speed ResNet-50 up by about 30 % on V100 and A100
    (Composer documentation, "Channels Last" method card)."""
    return 2.0 * np.asarray(activation_bytes)


def _op(row: dict, b, A: int, transposes: bool = False) -> OpSpec:
    op, name = row["op"], row["name"]
    keep_input = 0.0 if row.get("input_saved", False) else 1.0
    if op == "conv":
        cin, cout, groups = row["in_channels"], row["out_channels"], row.get("groups", 1)
        in_pixels, out_pixels = prod(row["input_size"]), prod(_out_size(row))
        kvol = row["kernel"] ** len(row["input_size"])
        params = cout * cin // groups * kvol + (cout if row.get("bias", False) else 0)
        held = 0.0 if row.get("shared", False) else params
        if row.get("transposed", False):
            m, n, k = b * in_pixels, cout * kvol / groups, cin / groups
        else:
            m, n, k = b * out_pixels, cout / groups, cin / groups * kvol
        winograd = (len(row["input_size"]) == 2 and row["kernel"] == 3 and row.get("stride", 1) == 1
                    and groups == 1 and not row.get("transposed", False))
        activations = A * b * (cin * in_pixels + cout * out_pixels)
        side = transpose_bytes(activations) if transposes else 0.0
        return OpSpec(name, "conv", m=m, n=n, k=k, batch_gemms=groups, flops=2 * m * n * k * groups,
                      bytes=activations + A * params + side, pass_bytes=side, params=held, implicit=True,
                      winograd=winograd, saved_bytes=keep_input * A * b * cin * in_pixels)
    if op == "fc":
        cin, cout = row["in_features"], row["out_features"]
        params = cin * cout + (cout if row.get("bias", True) else 0)
        return OpSpec(name, "matmul", m=b, n=cout, k=cin, flops=2 * b * cin * cout,
                      bytes=A * (b * (cin + cout) + params), params=params, saved_bytes=keep_input * A * b * cin)
    if op == "loss":
        elements = b * row["classes"]
        return cross_entropy_op(name, elements, A)  # a head's rows (classes per sample, anchor, voxel) stay on chip
    if op == "pool":
        elements_in = b * row["channels"] * prod(row["input_size"])
        elements_out = b * row["channels"] * prod(_out_size(row))
        window = row["kernel"] ** len(row["input_size"])
        saved = keep_input * A * elements_in + _INDEX_BYTES * elements_out if row["mode"] == "max" else 0.0
        return OpSpec(name, "pool", flops=window * elements_out, bytes=A * (elements_in + elements_out),
                      saved_bytes=saved)
    if op == "host":
        return OpSpec(name, "elementwise", eager_only=True,
                      kernels_forward=row["forward_ops"] + row.get("forward_ops_per_sample", 0) * b,
                      kernels_backward=float(row.get("backward_ops", 0)))
    elements = b * row["channels"] * prod(row["size"])
    if op == "bn":
        return OpSpec(name, "norm", fp32=True, flops=NORM_FLOPS * elements, bytes=3 * A * elements,
                      params=2 * row["channels"], saved_bytes=keep_input * A * elements)
    if op == "relu":
        return OpSpec(name, "elementwise", flops=elements, bytes=2 * A * elements, saved_bytes=A * elements)
    if op == "add":
        return OpSpec(name, "elementwise", flops=elements, bytes=3 * A * elements)
    return OpSpec(name, "elementwise", bytes=2 * A * elements)  # concat: a copy


class LayerTableBuilder:
    """Writes a layer table while tracking the running tensor (channels, spatial size, identity)
    and which tensors are already kept for backward, so that a tensor read by two ops (a block
    input feeding a convolution and a shortcut) is counted once.  Used by the zoo's tables."""

    def __init__(self, channels: int, size: list[int]):
        self.channels, self.size, self.tensor = channels, list(size), 0
        self.kept: set[int] = set()
        self.rows: list[dict] = []

    def state(self):
        return self.channels, list(self.size), self.tensor

    def new_tensor(self, channels: int, size: list[int]):
        """Start from a tensor no op has produced here (ROI features gathered from a pyramid)."""
        self.channels, self.size, self.tensor = channels, list(size), -len(self.rows) - 1
        return self

    def restore(self, state) -> None:
        self.channels, self.size, self.tensor = state[0], list(state[1]), state[2]

    def _emit(self, row: dict, keeps_input: bool, channels=None, size=None, keeps_output=False):
        if keeps_input:
            row["input_saved"] = self.tensor in self.kept
            self.kept.add(self.tensor)
        self.rows.append(row)
        self.channels = self.channels if channels is None else channels
        self.size = self.size if size is None else list(size)
        self.tensor = len(self.rows)
        if keeps_output:
            self.kept.add(self.tensor)
        return self

    def conv(self, name, out, kernel, stride=1, padding=0, bias=False, transposed=False, groups=1, shared=False):
        row = dict(op="conv", name=name, in_channels=self.channels, out_channels=out, kernel=kernel,
                   stride=stride, padding=padding, input_size=self.size, bias=bias, transposed=transposed,
                   groups=groups, shared=shared)
        size = conv_output_size(self.size, kernel, stride, padding, transposed)
        return self._emit(row, True, out, size)

    def bn(self, name):
        return self._emit(dict(op="bn", name=name, channels=self.channels, size=self.size), True)

    def relu(self, name):
        """ReLU, or any pointwise activation that keeps one tensor of its size (SiLU, sigmoid)."""
        return self._emit(dict(op="relu", name=name, channels=self.channels, size=self.size), False,
                          keeps_output=True)

    def add(self, name):
        return self._emit(dict(op="add", name=name, channels=self.channels, size=self.size), False)

    def concat(self, name, skip_channels):
        channels = self.channels + skip_channels
        return self._emit(dict(op="concat", name=name, channels=channels, size=self.size), False, channels)

    def pool(self, name, mode, kernel, stride, padding=0):
        row = dict(op="pool", name=name, mode=mode, channels=self.channels, input_size=self.size,
                   kernel=kernel, stride=stride, padding=padding)
        return self._emit(row, mode == "max", size=conv_output_size(self.size, kernel, stride, padding))

    def fc(self, name, out):
        row = dict(op="fc", name=name, in_features=self.channels * prod(self.size), out_features=out)
        return self._emit(row, True, out, [1])

    def loss(self, name, classes):
        return self._emit(dict(op="loss", name=name, classes=classes), False)

    def host(self, name, forward_ops, forward_ops_per_sample=0, backward_ops=0):
        """Python-side bookkeeping ops between the layers (module docstring, ``op: host``); the
        running tensor is unchanged."""
        row = dict(op="host", name=name, forward_ops=forward_ops, forward_ops_per_sample=forward_ops_per_sample,
                   backward_ops=backward_ops)
        tensor = self.tensor
        self._emit(row, False)
        self.tensor = tensor
        return self


def bottleneck(net: LayerTableBuilder, name: str, width: int, stride: int, downsample: bool) -> None:
    """ResNet v1.5 bottleneck: 1x1, 3x3 (carrying the stride), 1x1 (x4), shortcut, add, ReLU."""
    block_input = net.state()
    net.conv(f"{name}.conv1", width, 1).bn(f"{name}.bn1").relu(f"{name}.relu1")
    net.conv(f"{name}.conv2", width, 3, stride, 1).bn(f"{name}.bn2").relu(f"{name}.relu2")
    net.conv(f"{name}.conv3", 4 * width, 1).bn(f"{name}.bn3")
    if downsample:
        projection_shortcut(net, name, block_input, 4 * width, stride)
    net.add(f"{name}.add").relu(f"{name}.relu3")


def projection_shortcut(net: LayerTableBuilder, name: str, block_input, channels: int, stride: int) -> None:
    """A residual block's 1x1 projection shortcut (with its batch norm) from ``block_input`` (a
    :meth:`LayerTableBuilder.state`), leaving the builder on the block's main path."""
    main = net.state()
    net.restore(block_input)
    net.conv(f"{name}.downsample", channels, 1, stride).bn(f"{name}.downsample_bn")
    net.restore(main)
