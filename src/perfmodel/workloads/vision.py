"""Layer tables of the zoo's newer vision models: EfficientNet, Mask R-CNN, RetinaNet, nnU-Net.

* EfficientNet-B0..B7 (Tan & Le 2019, Table 1 and the reference implementation
  tensorflow/tpu models/official/efficientnet/efficientnet_builder.py): MBConv blocks (1x1
  expansion, depthwise k x k, squeeze-and-excitation on a quarter of the block's input channels,
  1x1 projection, residual when the shape allows), SiLU activations, stem 32 and head 1280
  channels; width/depth/resolution (1.0, 1.0, 224) for B0, (1.4, 1.8, 380) for B4, (2.0, 3.1,
  600) for B7; channels rounded to multiples of 8, repeats rounded up.
* Mask R-CNN and RetinaNet with a ResNet-50 v1.5 FPN backbone (He et al. 2017; Lin et al. 2017
  "Focal Loss", Sec. 4; FPN, Lin et al. 2017): 256-channel pyramid from C2..C5 (Mask R-CNN: P2-P6,
  P6 a stride-2 subsampling of P5) or C3..C5 (RetinaNet: P3-P7, P6 and P7 3x3 stride-2 convs on
  P5 and ReLU(P6) as torchvision builds them).  Heads shared across levels count their work at
  every level and their weights once.  Mask R-CNN's second stage as NVIDIA DeepLearningExamples
  (maskrcnn-benchmark) trains it: 512 sampled RoIs per image through the 2-layer 1024-wide box head
  (7x7x256 RoI features), class scores and class-specific boxes, and the mask head (four 3x3
  convolutions at 14x14, a 2x2 transposed convolution, a 1x1 class convolution at 28x28) on the
  at most 128 positive RoIs (25 % of 512), laid side by side along the width so that a
  convolution over them costs what it costs per RoI.  One sample is one image resized to 800
  pixels on its short side and padded to 1344 (the 1333-pixel cap rounded up to a multiple of
  32), the largest padded size a batch reaches.  RoIAlign, anchor matching, sampling and NMS are
  counted as host work only (``op: host``, :data:`DETECTION_HOST_OPS`): maskrcnn-benchmark runs
  them as hundreds of small PyTorch ops, many in Python loops over the images, so in an eager
  framework they cost the host one dispatch each; their GPU work is not counted.
* nnU-Net as DeepLearningExamples PyTorch/Segmentation/nnUNet builds it (nnunet/nn_unet.py:
  MONAI DynUNet, basic blocks of two convolutions with instance norm and leaky ReLU, strided
  convolutions down, transposed convolutions up, skip concatenation): the strides halve every
  spatial size that stays >= 8 (``min_fmap`` 4) for at most 5 levels, filters
  ``min(2^(5+i), 320 in 3D / 512 in 2D)``; for MSD Task01 (BraTS) the patch is 128^3 in 3D and
  192 x 160 in 2D (DeepLearningExamples data_preprocessing/configs.py), 4 input modalities, 4
  output classes.
"""

from __future__ import annotations

import math

from perfmodel.workloads.cnn import LayerTableBuilder, bottleneck, cnn
from perfmodel.workloads.workload import Workload

__all__ = ["efficientnet", "maskrcnn", "retinanet", "nnunet", "EFFICIENTNET_SCALING", "DETECTION_HOST_OPS"]

# (expand ratio, kernel, stride, output channels, repeats) per stage of EfficientNet-B0 (Table 1)
_B0_STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
              (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))
EFFICIENTNET_SCALING = {"b0": (1.0, 1.0, 224), "b1": (1.0, 1.1, 240), "b2": (1.1, 1.2, 260), "b3": (1.2, 1.4, 300),
                        "b4": (1.4, 1.8, 380), "b5": (1.6, 2.2, 456), "b6": (1.8, 2.6, 528), "b7": (2.0, 3.1, 600)}


def _round_filters(filters: int, width: float, divisor: int = 8) -> int:
    """Channels x width, rounded to a multiple of ``divisor``, never down by more than 10 %
    (efficientnet_builder.round_filters)."""
    scaled = filters * width
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * scaled else rounded


def efficientnet(name: str = "efficientnet-b0", variant: str = "b0", image_size: int | None = None,
                 classes: int = 1000) -> Workload:
    """EfficientNet-``variant`` (module docstring) at its resolution or ``image_size``."""
    width, depth, resolution = EFFICIENTNET_SCALING[variant]
    net = LayerTableBuilder(3, [image_size or resolution] * 2)
    net.conv("stem", _round_filters(32, width), 3, 2, 1).bn("stem_bn").relu("stem_silu")
    block = 0
    for expand, kernel, stride, out, repeats in _B0_STAGES:
        out = _round_filters(out, width)
        for i in range(int(math.ceil(depth * repeats))):
            _mbconv(net, f"block{block}", expand, kernel, stride if i == 0 else 1, out)
            block += 1
    net.conv("head", _round_filters(1280, width), 1).bn("head_bn").relu("head_silu")
    net.pool("avgpool", "avg", net.size[0], net.size[0]).fc("fc", classes).loss("loss", classes)
    return cnn(name, net.rows)


def _mbconv(net: LayerTableBuilder, name: str, expand: int, kernel: int, stride: int, out: int) -> None:
    channels_in = net.channels
    if expand != 1:
        net.conv(f"{name}.expand", channels_in * expand, 1).bn(f"{name}.expand_bn").relu(f"{name}.expand_silu")
    mid = net.channels
    net.conv(f"{name}.depthwise", mid, kernel, stride, kernel // 2, groups=mid)
    net.bn(f"{name}.depthwise_bn").relu(f"{name}.depthwise_silu")
    gated = net.state()
    squeeze = max(1, int(channels_in * 0.25))
    net.pool(f"{name}.se_pool", "avg", net.size[0], net.size[0])
    net.conv(f"{name}.se_reduce", squeeze, 1, bias=True).relu(f"{name}.se_silu")
    net.conv(f"{name}.se_expand", mid, 1, bias=True).relu(f"{name}.se_sigmoid")
    net.restore(gated)
    net.add(f"{name}.se_scale")
    net.conv(f"{name}.project", out, 1).bn(f"{name}.project_bn")
    if stride == 1 and channels_in == out:
        net.add(f"{name}.residual")


# --- detection --------------------------------------------------------------------------------------

DETECTION_IMAGE = (800, 1344)
ROIS_PER_IMAGE = 512  # ROI_BOX_HEAD batch per image (maskrcnn-benchmark / DeepLearningExamples default)
POSITIVE_ROIS = 128  # 25 % positive fraction of 512: the mask head's RoIs at most

DETECTION_HOST_OPS = {"forward_ops": 226, "forward_ops_per_sample": 154 + 2 * POSITIVE_ROIS, "backward_ops": 100}
"""PyTorch ops Mask R-CNN's training step dispatches outside its network layers, counted by reading
NVIDIA DeepLearningExamples PyTorch/Segmentation/MaskRCNN/pytorch/maskrcnn_benchmark (modeling/rpn/
anchor_generator.py, rpn/inference.py, rpn/loss.py, balanced_positive_negative_sampler.py,
matcher.py, box_coder.py, poolers.py, roi_heads/box_head/loss.py, roi_heads/mask_head/loss.py and
mask_head.py, structures/segmentation_mask.py; commits 7a8544e to 9a36fc3) with the
e2e_mask_rcnn_R_50_FPN_1x configuration, each torch call or custom CUDA extension call one op:

* per iteration, forward 226: anchor grids (6 per FPN level x 5), the RPN's batched pre-NMS
  selection (8 per level x 5), level concatenation and top-k (4), the RPN loss (35), the box and
  mask RoIAlign poolers (43 each: level mapping, and per level a gather, cast, RoIAlign and
  scatter), the box loss (23) and the mask loss (8); backward 100 (the losses' and poolers'
  gradients, about 30 + 22 + 17 + 22 + 6);
* per image, forward 154: anchor visibility (7 per level), the RPN's per-image NMS loop (5 per
  level) and proposal merge (7), RPN target matching (14) and sampling (12), the box head's
  proposal matching and sampling (29), pooler bookkeeping (6 + 6), positive selection (6) and
  mask-target generation (14);
* per image, 2 per positive RoI: ``SegmentationMask`` indexed with a CUDA index tensor iterates
  it element by element (``.item()`` each, a host-device synchronisation), once to match the
  targets and once to select the positives; counted at :data:`POSITIVE_ROIS`, the upper bound the
  mask head's work is counted at.

Graph-compiled implementations (DeepLearningExamples' TensorFlow 2 Mask R-CNN batches these steps
over the images at fixed sizes) run none of them from the host
(:func:`perfmodel.models.compute.framework_runs`)."""


def _backbone(net: LayerTableBuilder) -> list:
    """ResNet-50 v1.5 trunk; the states after each of the four stages (C2..C5)."""
    net.conv("conv1", 64, 7, 2, 3).bn("bn1").relu("relu").pool("maxpool", "max", 3, 2, 1)
    stages = []
    for stage, count in enumerate((3, 4, 6, 3)):
        width = 64 * 2 ** stage
        for i in range(count):
            stride = (1 if stage == 0 else 2) if i == 0 else 1
            bottleneck(net, f"layer{stage + 1}.{i}", width, stride, i == 0)
        stages.append(net.state())
    return stages


def _fpn(net: LayerTableBuilder, features: list, first_level: int) -> list:
    """Lateral 1x1 convolutions, top-down nearest upsampling + add, 3x3 output convolutions."""
    merged = None
    outputs = []
    for level, feature in reversed(list(enumerate(features, start=first_level))):
        net.restore(feature)
        net.conv(f"fpn.lateral{level}", 256, 1, bias=True)
        if merged is not None:
            net.add(f"fpn.merge{level}")
        merged = net.state()
        net.conv(f"fpn.output{level}", 256, 3, 1, 1, bias=True)
        outputs.append(net.state())
        net.restore(merged)
    return list(reversed(outputs))


def maskrcnn(name: str = "maskrcnn", classes: int = 81, image_size: tuple[int, int] = DETECTION_IMAGE) -> Workload:
    """Mask R-CNN, ResNet-50 FPN (module docstring); ``classes`` includes the background."""
    net = LayerTableBuilder(3, list(image_size))
    levels = _fpn(net, _backbone(net), first_level=2)
    net.restore(levels[-1])
    net.pool("fpn.p6", "max", 1, 2)
    levels.append(net.state())
    anchors = 0
    for i, level in enumerate(levels):  # RPN head shared by P2..P6: 3 anchors per position
        net.restore(level)
        net.conv(f"rpn.conv{i}", 256, 3, 1, 1, bias=True, shared=i > 0).relu(f"rpn.relu{i}")
        hidden = net.state()
        net.conv(f"rpn.objectness{i}", 3, 1, bias=True, shared=i > 0)
        net.restore(hidden)
        net.conv(f"rpn.box{i}", 12, 1, bias=True, shared=i > 0)
        anchors += 3 * level[1][0] * level[1][1]
    net.loss("rpn.loss", anchors)
    net.host("detection.bookkeeping", **DETECTION_HOST_OPS)
    net.new_tensor(256 * 7 * 7, [ROIS_PER_IMAGE])  # box head: RoIs as positions of a 1x1 convolution
    net.conv("box.fc6", 1024, 1, bias=True).relu("box.relu6").conv("box.fc7", 1024, 1, bias=True).relu("box.relu7")
    hidden = net.state()
    net.conv("box.cls", classes, 1, bias=True)
    net.restore(hidden)
    net.conv("box.reg", 4 * classes, 1, bias=True).loss("box.loss", ROIS_PER_IMAGE * classes)
    net.new_tensor(256, [14, 14 * POSITIVE_ROIS])  # mask head: positive RoIs side by side
    for i in range(4):
        net.conv(f"mask.conv{i}", 256, 3, 1, 1, bias=True).relu(f"mask.relu{i}")
    net.conv("mask.deconv", 256, 2, 2, bias=True, transposed=True).relu("mask.relu_deconv")
    net.conv("mask.logits", classes, 1, bias=True).loss("mask.loss", POSITIVE_ROIS * 28 * 28)
    return cnn(name, net.rows)


def retinanet(name: str = "retinanet", classes: int = 80, anchors: int = 9,
              image_size: tuple[int, int] = DETECTION_IMAGE) -> Workload:
    """RetinaNet, ResNet-50 FPN (module docstring); ``classes`` without background (focal loss)."""
    net = LayerTableBuilder(3, list(image_size))
    levels = _fpn(net, _backbone(net)[1:], first_level=3)
    net.restore(levels[-1])
    net.conv("fpn.p6", 256, 3, 2, 1, bias=True)
    levels.append(net.state())
    net.relu("fpn.p6_relu").conv("fpn.p7", 256, 3, 2, 1, bias=True)
    levels.append(net.state())
    positions = 0
    for i, level in enumerate(levels):  # both subnets shared by P3..P7
        for head, outputs in (("cls", anchors * classes), ("box", anchors * 4)):
            net.restore(level)
            for j in range(4):
                net.conv(f"{head}.conv{j}.p{i + 3}", 256, 3, 1, 1, bias=True, shared=i > 0)
                net.relu(f"{head}.relu{j}.p{i + 3}")
            net.conv(f"{head}.out.p{i + 3}", outputs, 3, 1, 1, bias=True, shared=i > 0)
        positions += level[1][0] * level[1][1]
    net.loss("loss", positions * anchors * (classes + 4))
    return cnn(name, net.rows)


# --- segmentation -----------------------------------------------------------------------------------

NNUNET_TASK01 = {2: (192, 160), 3: (128, 128, 128)}  # MSD Task01 BrainTumour patch sizes


def nnunet_strides(patch: tuple[int, ...], min_fmap: int = 4, depth: int = 5) -> int:
    """Downsampling levels: halve every size while it stays >= 2 min_fmap, at most ``depth`` times
    (isotropic spacing, as Task01's; nn_unet.py get_unet_params)."""
    sizes, levels = list(patch), 0
    while levels < depth and any(size >= 2 * min_fmap for size in sizes):
        if not all(size >= 2 * min_fmap for size in sizes):
            raise ValueError(f"nnU-Net patch {patch}: anisotropic downsampling is not modelled")
        sizes = [size // 2 for size in sizes]
        levels += 1
    return levels


def nnunet(name: str = "nnunet-3d", dims: int = 3, patch: tuple[int, ...] | None = None, in_channels: int = 4,
           classes: int = 4) -> Workload:
    """nnU-Net (DynUNet) for ``dims`` = 2 or 3 on ``patch`` (module docstring)."""
    patch = tuple(patch or NNUNET_TASK01[dims])
    if len(patch) != dims:
        raise ValueError(f"nnU-Net patch {patch} does not have {dims} dimensions")
    levels = nnunet_strides(patch)
    filters = [min(2 ** (5 + i), 320 if dims == 3 else 512) for i in range(levels + 1)]
    net = LayerTableBuilder(in_channels, list(patch))

    def block(prefix, out, stride):
        net.conv(f"{prefix}.conv1", out, 3, stride, 1).bn(f"{prefix}.norm1").relu(f"{prefix}.lrelu1")
        net.conv(f"{prefix}.conv2", out, 3, 1, 1).bn(f"{prefix}.norm2").relu(f"{prefix}.lrelu2")

    block("input", filters[0], 1)
    skips = [net.state()]
    for i, out in enumerate(filters[1:]):
        block(f"down{i}", out, 2)
        skips.append(net.state())
    skips.pop()  # the bottleneck feeds the first upsampling
    for i, out in enumerate(reversed(filters[:-1])):
        net.conv(f"up{i}.transpose", out, 2, 2, 0, bias=True, transposed=True)
        net.concat(f"up{i}.concat", skips.pop()[0])
        block(f"up{i}", out, 1)
    net.conv("output", classes, 1, bias=True).loss("loss", classes * math.prod(patch))
    return cnn(name, net.rows)
