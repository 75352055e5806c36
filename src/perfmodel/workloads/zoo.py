"""Named models, user-registered models, and workloads from scenario/measurement fields.

Transformer shapes and their sources:

* GPT-3 family: Brown et al. 2020, Table 2.1 (layers, d_model, heads), context 2048, vocabulary
  50257 (the GPT-2 BPE the paper uses; Megatron runs pad it to 51200 - give ``vocab: 51200`` to
  model those).  Two entries of the table are not self-consistent and are read through d_head:
  1.3B has d_model 2048 with d_head 128, so 16 heads (the table prints 24); 13B prints d_model
  5140 = 40 x 128.5, so we use 5120 = 40 x 128.
* Llama 2: Touvron et al. 2023 (Llama 2), Table 1 and the released config.json files: 7B
  32 x 4096, 32 heads, ffn 11008; 13B 40 x 5120, 40 heads, ffn 13824; 70B 80 x 8192, 64 heads,
  8 KV heads, ffn 28672; vocabulary 32000, context 4096.
* Llama 3 / 3.1: Dubey et al. 2024 (The Llama 3 Herd of Models), Table 3: 8B 32 x 4096, ffn
  14336; 70B 80 x 8192, ffn 28672; 405B 126 x 16384, 128 heads, ffn 53248; 8 KV heads;
  vocabulary 128256; pre-training context 8192.
* BERT: Devlin et al. 2019, Sec. 3: base 12 x 768, 12 heads; large 24 x 1024, 16 heads; ffn 4h;
  vocabulary 30522 (uncased WordPiece); sequence 512 by default (override ``seq_len``).
* ViT: Dosovitskiy et al. 2021, Table 1: B/16 12 x 768, 12 heads, MLP 3072; L/16 24 x 1024,
  16 heads, 4096; H/14 32 x 1280, 16 heads, 5120; 224 px, 1000 classes.
* Transformer-XL on WikiText-103 as NVIDIA DeepLearningExamples trains it (PyTorch/LanguageModeling/
  Transformer-XL, README "Model architecture" and pytorch/wt103_{base,large}.yaml), the source of the
  measurements: base 16 x 512, 8 heads of 64, inner 2048, tgt_len = mem_len = 192, adaptive softmax
  (div_val 1); large 18 x 1024, 16 heads of 64, inner 4096, tgt_len = mem_len = 384, div_val 4;
  vocabulary 267,735 words with cutoffs 19,997 / 39,997 / 199,997; no biases on qkv (Dai et al. 2019's
  reference code).  ``seq_len`` is ``tgt_len``, the tokens a sample predicts.
* ``transformer-xl-{base,large}-full-softmax``: the same layers as DeepLearningExamples' ``train.py``
  builds them from command-line flags alone, without a ``--config_file``: ``--adaptive`` is off and
  ``div_val`` is 1 by default, so the output is one softmax over all 267,735 words, tied to a
  full-width input embedding (train.py's argument defaults).  lambdal/deeplearning-benchmark runs it
  this way (``pytorch/scripts/config_v1/config_pytorch_80GB.sh``: model flags, no ``--adaptive``;
  its stored 2020 run log ``pytorch/results/1080Ti/PyTorch_transformerxlbase_FP16`` prints
  ``adaptive=False`` and ``#params = 191948759``); base ``tgt_len = mem_len = 192``, large 18 x 1024,
  16 heads, inner 4096, ``tgt_len = mem_len = 256``.  For base, the logits GEMM over the whole
  vocabulary is 52.6 of the 84.0 forward GFLOP per sample (the adaptive model: 35.0).
* ``transformer-big``: the WMT14 English-German Transformer (big) of Vaswani et al. 2017, Table 3
  (6 + 6 layers, d_model 1024, 16 heads, d_ff 4096, shared source/target vocabulary of about 37,000
  BPE tokens, 213 M parameters), as fairseq / DeepLearningExamples PyTorch/Translation/Transformer
  train it.  Translation batches are length-bucketed sentence pairs; ``seq_len`` 128 stands for one
  pair (source and target each 128 tokens); the per-token cost barely depends on it at these lengths
  (attention is s/6h = 2 % of the FLOPs); give ``seq_len`` to change it.

CNN tables:

* ResNet-50/101/152 v1.5 (He et al. 2016, Table 1; v1.5 = the stride-2 on the 3x3 conv of the
  first bottleneck of a stage, as torchvision and NVIDIA DeepLearningExamples build it), 224 px.
* ``resnext101-32x4d`` (Xie et al. 2017, "Aggregated Residual Transformations", Table 1 with
  cardinality 32 and group width 4): ResNet-101 v1.5 whose bottleneck 3x3 conv is grouped (32
  groups, widths 128/256/512/1024), outputs as ResNet's; ``se-resnext101-32x4d`` adds a
  squeeze-and-excitation gate after each block's last conv (Hu et al. 2018, reduction 16: global
  average pool, 1x1 conv to C/16, ReLU, 1x1 conv to C, sigmoid, channel scale), as NVIDIA
  DeepLearningExamples PyTorch/Classification/ConvNets builds both (the source of their rows).
* ``ssd300``: SSD300 with a ResNet-50 backbone truncated after conv4_x with its stride removed
  (38x38x1024 features), the five extra feature blocks and the 3x3 loc/conf heads over 4/6/6/6/4/4
  default boxes (8732 boxes, 81 COCO classes) - NVIDIA DeepLearningExamples
  PyTorch/Detection/SSD (``src/model.py``), which is the source of the SSD300 measurements.
  ``ssd300-r34`` is the MLPerf Training v0.7 variant with a ResNet-34 backbone (256 channels at
  38x38; the rest identical).
* ``unet3d``: the MLPerf Training 3D U-Net reference (KiTS19): one input channel, 128^3 patch,
  filters 32/64/128/256/320 with a 320-channel bottleneck, strided-conv downsampling, transposed
  conv (with bias) upsampling and skip concatenation, instance norm + ReLU after every 3x3x3 conv,
  a 1x1x1 output conv to 3 classes.
* ``efficientnet-b0/b4/b7``, ``maskrcnn``, ``retinanet``, ``nnunet-2d``/``nnunet-3d``: see
  :mod:`perfmodel.workloads.vision`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Callable

from perfmodel.workloads.cnn import LayerTableBuilder, cnn, projection_shortcut
from perfmodel.workloads.cnn import bottleneck as _bottleneck
from perfmodel.workloads.hf import load_hf_config
from perfmodel.workloads.vision import efficientnet, maskrcnn, nnunet, retinanet
from perfmodel.workloads.transformer import TransformerShape, transformer, workload_of
from perfmodel.workloads.workload import Workload

__all__ = ["ZOO_NAMES", "get_workload", "register_workload", "load_workloads_yaml", "workload_from_spec",
           "resnet", "resnext", "ssd300", "unet3d"]

_GPT3 = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 16), "1.3b": (24, 2048, 16),
         "2.7b": (32, 2560, 32), "6.7b": (32, 4096, 32), "13b": (40, 5120, 40), "175b": (96, 12288, 96)}
_LLAMA = {  # layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len
    "llama2-7b": (32, 4096, 32, 32, 11008, 32000, 4096), "llama2-13b": (40, 5120, 40, 40, 13824, 32000, 4096),
    "llama2-70b": (80, 8192, 64, 8, 28672, 32000, 4096), "llama3-8b": (32, 4096, 32, 8, 14336, 128256, 8192),
    "llama3-70b": (80, 8192, 64, 8, 28672, 128256, 8192),
    "llama3-405b": (126, 16384, 128, 8, 53248, 128256, 8192)}
_BERT = {"bert-base": (12, 768, 12), "bert-large": (24, 1024, 16)}
_VIT = {"vit-b16": (12, 768, 12, 3072, 16), "vit-l16": (24, 1024, 16, 4096, 16), "vit-h14": (32, 1280, 16, 5120, 14)}
_RESNET_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}

_TRANSFORMERS: dict[str, dict] = {}
for size, (l, h, a) in _GPT3.items():
    _TRANSFORMERS[f"gpt3-{size}"] = dict(arch="gpt", layers=l, hidden=h, heads=a, seq_len=2048, vocab=50257)
for key, (l, h, a, g, f, v, s) in _LLAMA.items():
    _TRANSFORMERS[key] = dict(arch="llama", layers=l, hidden=h, heads=a, kv_heads=g, ffn_hidden=f, vocab=v,
                              seq_len=s)
for key, (l, h, a) in _BERT.items():
    _TRANSFORMERS[key] = dict(arch="bert", layers=l, hidden=h, heads=a, seq_len=512, vocab=30522)
_TXL_CUTOFFS = (19997, 39997, 199997)
_TRANSFORMERS["transformer-xl-base"] = dict(arch="txl", layers=16, hidden=512, heads=8, ffn_hidden=2048, seq_len=192,
                                            mem_len=192, vocab=267735, adaptive_cutoffs=_TXL_CUTOFFS, qkv_bias=False)
_TRANSFORMERS["transformer-xl-large"] = dict(arch="txl", layers=18, hidden=1024, heads=16, ffn_hidden=4096,
                                             seq_len=384, mem_len=384, vocab=267735, adaptive_cutoffs=_TXL_CUTOFFS,
                                             adaptive_div=4, qkv_bias=False)
# the same models as train.py runs them from flags alone (no --adaptive, div_val 1: one tied softmax
# over all 267,735 words), lambdal/deeplearning-benchmark's configuration (module docstring)
_TRANSFORMERS["transformer-xl-base-full-softmax"] = dict(arch="txl", layers=16, hidden=512, heads=8, ffn_hidden=2048,
                                                         seq_len=192, mem_len=192, vocab=267735, qkv_bias=False)
_TRANSFORMERS["transformer-xl-large-full-softmax"] = dict(arch="txl", layers=18, hidden=1024, heads=16,
                                                          ffn_hidden=4096, seq_len=256, mem_len=256, vocab=267735,
                                                          qkv_bias=False)
_TRANSFORMERS["transformer-big"] = dict(arch="encdec", layers=12, encoder_layers=6, hidden=1024, heads=16,
                                        ffn_hidden=4096, seq_len=128, vocab=37000)
for key, (l, h, a, f, p) in _VIT.items():
    _TRANSFORMERS[key] = dict(arch="vit", layers=l, hidden=h, heads=a, ffn_hidden=f, patch_size=p,
                              image_size=224, vocab=1000)


def _basic(net: LayerTableBuilder, name: str, width: int, stride: int, downsample: bool) -> None:
    """ResNet-18/34 basic block: two 3x3 convs, shortcut, add, ReLU (He et al. 2016, Fig. 5 left)."""
    block_input = net.state()
    net.conv(f"{name}.conv1", width, 3, stride, 1).bn(f"{name}.bn1").relu(f"{name}.relu1")
    net.conv(f"{name}.conv2", width, 3, 1, 1).bn(f"{name}.bn2")
    if downsample:
        projection_shortcut(net, name, block_input, width, stride)
    net.add(f"{name}.add").relu(f"{name}.relu2")


def _resnet_trunk(net: LayerTableBuilder, blocks, bottleneck: bool, last_stride: int = 2) -> None:
    """Stem and stages; ``blocks`` lists the blocks per stage used (3 stages for SSD backbones)."""
    net.conv("conv1", 64, 7, 2, 3).bn("bn1").relu("relu").pool("maxpool", "max", 3, 2, 1)
    block = _bottleneck if bottleneck else _basic
    for stage, count in enumerate(blocks):
        width = 64 * 2 ** stage
        for i in range(count):
            stride = (1 if stage == 0 else (last_stride if stage == 2 else 2)) if i == 0 else 1
            out = 4 * width if bottleneck else width
            block(net, f"layer{stage + 1}.{i}", width, stride, i == 0 and (stride != 1 or net.channels != out))


def resnet(name: str = "resnet50", image_size: int = 224, classes: int = 1000) -> Workload:
    """ResNet-50/101/152 v1.5 at ``image_size`` px with a ``classes``-way classifier."""
    net = LayerTableBuilder(3, [image_size, image_size])
    _resnet_trunk(net, _RESNET_BLOCKS[name], bottleneck=True)
    net.pool("avgpool", "avg", net.size[0], net.size[0]).fc("fc", classes).loss("loss", classes)
    return cnn(name, net.rows)


def _resnext_block(net: LayerTableBuilder, name: str, stage: int, stride: int, downsample: bool,
                   squeeze_excite: bool) -> None:
    """ResNeXt 32x4d bottleneck (v1.5 stride on the grouped 3x3), optionally with an SE gate."""
    block_input = net.state()
    width, out = 128 * 2 ** stage, 256 * 2 ** stage
    net.conv(f"{name}.conv1", width, 1).bn(f"{name}.bn1").relu(f"{name}.relu1")
    net.conv(f"{name}.conv2", width, 3, stride, 1, groups=32).bn(f"{name}.bn2").relu(f"{name}.relu2")
    net.conv(f"{name}.conv3", out, 1).bn(f"{name}.bn3")
    if squeeze_excite:
        gated = net.state()
        net.pool(f"{name}.se_pool", "avg", net.size[0], net.size[0])
        net.conv(f"{name}.se_reduce", out // 16, 1, bias=True).relu(f"{name}.se_relu")
        net.conv(f"{name}.se_expand", out, 1, bias=True).relu(f"{name}.se_sigmoid")
        net.restore(gated)
        net.add(f"{name}.se_scale")
    if downsample:
        projection_shortcut(net, name, block_input, out, stride)
    net.add(f"{name}.add").relu(f"{name}.relu3")


def resnext(name: str = "resnext101-32x4d", squeeze_excite: bool = False, image_size: int = 224,
            classes: int = 1000) -> Workload:
    """ResNeXt-101 32x4d (``squeeze_excite``: SE-ResNeXt-101 32x4d) at ``image_size`` px."""
    net = LayerTableBuilder(3, [image_size, image_size])
    net.conv("conv1", 64, 7, 2, 3).bn("bn1").relu("relu").pool("maxpool", "max", 3, 2, 1)
    for stage, count in enumerate(_RESNET_BLOCKS["resnet101"]):
        for i in range(count):
            stride = (1 if stage == 0 else 2) if i == 0 else 1
            _resnext_block(net, f"layer{stage + 1}.{i}", stage, stride, i == 0, squeeze_excite)
    net.pool("avgpool", "avg", net.size[0], net.size[0]).fc("fc", classes).loss("loss", classes)
    return cnn(name, net.rows)


def ssd300(name: str = "ssd300", backbone: str = "resnet50", image_size: int = 300, classes: int = 81) -> Workload:
    """SSD300 (Liu et al. 2016) as NVIDIA DeepLearningExamples / MLPerf build it (module docstring)."""
    net = LayerTableBuilder(3, [image_size, image_size])
    if backbone == "resnet50":
        _resnet_trunk(net, (3, 4, 6), bottleneck=True, last_stride=1)
    else:
        _resnet_trunk(net, (3, 4, 6), bottleneck=False, last_stride=1)
    features = [net.state()]
    for i, (mid, out) in enumerate(zip((256, 256, 128, 128, 128), (512, 512, 256, 256, 256))):
        net.conv(f"extra{i}.conv1", mid, 1).bn(f"extra{i}.bn1").relu(f"extra{i}.relu1")
        net.conv(f"extra{i}.conv2", out, 3, 2 if i < 3 else 1, 1 if i < 3 else 0)
        net.bn(f"extra{i}.bn2").relu(f"extra{i}.relu2")
        features.append(net.state())
    boxes = 0
    for i, (feature, defaults) in enumerate(zip(features, (4, 6, 6, 6, 4, 4))):
        for head, per_box in (("loc", 4), ("conf", classes)):
            net.restore(feature)
            net.conv(f"{head}{i}", defaults * per_box, 3, 1, 1, bias=True)
        boxes += defaults * feature[1][0] * feature[1][1]
    net.loss("loss", boxes * (classes + 4))
    return cnn(name, net.rows)


def unet3d(name: str = "unet3d", patch: int = 128, in_channels: int = 1, classes: int = 3) -> Workload:
    """The MLPerf Training 3D U-Net (module docstring) on a ``patch``^3 input."""
    net = LayerTableBuilder(in_channels, [patch] * 3)

    def double_conv(prefix, out, first_stride):
        net.conv(f"{prefix}.conv1", out, 3, first_stride, 1).bn(f"{prefix}.norm1").relu(f"{prefix}.relu1")
        net.conv(f"{prefix}.conv2", out, 3, 1, 1).bn(f"{prefix}.norm2").relu(f"{prefix}.relu2")

    double_conv("input", 32, 1)
    skips = [net.state()]
    for i, out in enumerate((64, 128, 256, 320, 320)):
        double_conv(f"down{i}", out, 2)
        skips.append(net.state())
    skips.pop()  # the bottleneck output feeds the first upsampling, not a skip
    for i, out in enumerate((320, 256, 128, 64, 32)):
        net.conv(f"up{i}.transpose", out, 2, 2, 0, bias=True, transposed=True)
        net.concat(f"up{i}.concat", skips.pop()[0])
        double_conv(f"up{i}", out, 1)
    net.conv("output", classes, 1, bias=True).loss("loss", classes * patch ** 3)
    return cnn(name, net.rows)


_FACTORIES: dict[str, Callable[..., Workload]] = {
    **{key: (lambda key=key, **overrides: transformer(name=key, **{**_TRANSFORMERS[key], **overrides}))
       for key in _TRANSFORMERS},
    **{key: (lambda key=key, **overrides: resnet(key, **overrides)) for key in _RESNET_BLOCKS},
    "resnext101-32x4d": lambda **overrides: resnext("resnext101-32x4d", **overrides),
    "se-resnext101-32x4d": lambda **overrides: resnext("se-resnext101-32x4d", squeeze_excite=True, **overrides),
    "ssd300": lambda **overrides: ssd300("ssd300", **overrides),
    "ssd300-r34": lambda **overrides: ssd300("ssd300-r34", backbone="resnet34", **overrides),
    "unet3d": lambda **overrides: unet3d("unet3d", **overrides),
    **{f"efficientnet-{v}": (lambda v=v, **overrides: efficientnet(f"efficientnet-{v}", v, **overrides))
       for v in ("b0", "b4", "b7")},
    "maskrcnn": lambda **overrides: maskrcnn("maskrcnn", **overrides),
    "retinanet": lambda **overrides: retinanet("retinanet", **overrides),
    "nnunet-2d": lambda **overrides: nnunet("nnunet-2d", dims=2, **overrides),
    "nnunet-3d": lambda **overrides: nnunet("nnunet-3d", dims=3, **overrides),
}
ZOO_NAMES: list[str] = list(_FACTORIES)
_REGISTERED: dict[str, Workload] = {}
_CACHE: dict[str, Workload] = {}


def get_workload(name: str) -> Workload:
    """A zoo or user-registered workload by name; unknown name -> ValueError listing the known."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _FACTORIES:
        known = ZOO_NAMES + sorted(_REGISTERED)
        raise ValueError(f"model {name!r} is not in the zoo; known models: {', '.join(known)} "
                         f"(or model: transformer with its shape)")
    if name not in _CACHE:
        _CACHE[name] = _FACTORIES[name]()
    return _CACHE[name]


def register_workload(workload: Workload) -> None:
    """Make ``workload`` available to :func:`get_workload` (and to scenarios) by its name."""
    if not isinstance(workload, Workload):
        raise ValueError(f"register_workload needs a Workload, got {type(workload).__name__}")
    if workload.name in _FACTORIES:
        raise ValueError(f"model name {workload.name!r} is taken by the zoo; choose another name")
    _REGISTERED[workload.name] = workload


def load_workloads_yaml(path: str | Path, register: bool = True) -> list[Workload]:
    """Read user models from YAML and (by default) register them.

    The file holds ``workloads:``, a list of entries, each with ``name`` and either
    ``transformer:`` (keyword arguments of :func:`~perfmodel.workloads.transformer.transformer`)
    or ``cnn:`` (a layer table, format in :mod:`perfmodel.workloads.cnn`)."""
    from perfmodel.inputs import load_structured

    data = load_structured(path, "workloads file") or {}
    entries = data.get("workloads") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a mapping with a 'workloads' list")
    workloads = []
    for i, entry in enumerate(entries):
        where = f"{path}: workloads[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{where}: each entry needs a 'name' and 'transformer' or 'cnn'")
        try:
            if isinstance(entry.get("transformer"), dict):
                workloads.append(transformer(name=entry["name"], **entry["transformer"]))
            elif isinstance(entry.get("cnn"), list):
                workloads.append(cnn(entry["name"], entry["cnn"]))
            else:
                raise ValueError("needs 'transformer' (a mapping) or 'cnn' (a list of layers)")
        except TypeError as error:
            raise ValueError(f"{where} ({entry['name']}): {error}") from None
        except ValueError as error:
            raise ValueError(f"{where} ({entry['name']}): {error}") from None
    if register:
        for workload in workloads:
            register_workload(workload)
    return workloads


_SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act", "seq_len", "mean_seq_len", "vocab",
                 "image_size", "experts", "top_k", "capacity_factor")


@functools.lru_cache(maxsize=64)
def _hf_cached(path: str, modified_ns: int, overrides: tuple) -> Workload:
    return load_hf_config(path, **dict(overrides))


def _hf_workload(path: str, given: dict) -> Workload:
    """A HuggingFace config.json's workload (cached per file version and overrides)."""
    if "image_size" in given:
        raise ValueError("image_size does not apply to hf_config (the file gives it)")
    try:
        modified = os.stat(path).st_mtime_ns
    except OSError as error:
        raise ValueError(f"{path}: cannot read config.json ({error.strerror})") from None
    return _hf_cached(str(path), modified, tuple(sorted(given.items())))


def workload_from_spec(spec) -> Workload:
    """A :class:`~perfmodel.scenario.WorkloadSpec` (or the same fields in a mapping) as a workload
    (:func:`_workload_of_fields`); ``top_k`` or ``capacity_factor`` on a model that ends up dense
    (no ``experts`` > 1) is an error, not a field quietly ignored."""
    fields = spec if isinstance(spec, dict) else spec.model_dump()
    workload = _workload_of_fields(fields)
    moe_only = [f"{key} = {fields[key]}" for key in ("top_k", "capacity_factor") if fields.get(key) is not None]
    if moe_only and not getattr(getattr(workload, "shape", None), "moe", False):
        raise ValueError(f"workload: {' and '.join(moe_only)} only mean something for a mixture of experts; "
                         f"{workload.name} is dense (give experts > 1, or leave them out)")
    return workload


def _workload_of_fields(fields: dict) -> Workload:
    """The workload of a WorkloadSpec's fields.

    ``hf_config: path`` reads a HuggingFace config.json (:mod:`perfmodel.workloads.hf`); shape
    fields given with it override the file's.

    ``model: transformer`` needs layers, hidden, heads, seq_len and vocab; it is a Llama-style
    model (RMSNorm, untied, no biases/dropout) when ``ffn_act`` is swiglu, else GPT-style;
    ``experts``/``top_k``/``capacity_factor`` make its MLPs a mixture of experts.  A zoo
    name takes the given shape fields as overrides (``seq_len: 128`` on ``bert-large``); CNNs take
    only ``image_size``."""
    model = fields.get("model")
    given = {key: fields[key] for key in _SHAPE_FIELDS if fields.get(key) is not None}
    if fields.get("hf_config") is not None:
        if model is not None:
            raise ValueError("give one of 'model' and 'hf_config', not both")
        return _hf_workload(fields["hf_config"], given)
    if model == "transformer":
        missing = [key for key in ("layers", "hidden", "heads", "seq_len", "vocab") if key not in given]
        if missing:
            raise ValueError(f"model: transformer needs {', '.join(missing)}")
        if "image_size" in given:
            raise ValueError("image_size applies to zoo ViT and CNN models, not to model: transformer")
        arch = "llama" if given.get("ffn_act") == "swiglu" else "gpt"
        name = f"transformer-{given['layers']}x{given['hidden']}"
        return transformer(name=name, arch=arch, **given)
    if not given or model in _REGISTERED:
        if given:
            raise ValueError(f"model {model!r} is user-registered; shape overrides are not supported for it")
        return get_workload(model)
    base = get_workload(model)
    if base.family == "cnn":
        extra = sorted(set(given) - {"image_size"})
        if extra or model not in _RESNET_BLOCKS and model not in ("ssd300", "ssd300-r34"):
            raise ValueError(f"model {model!r} takes no override of {', '.join(sorted(given))}")
        return _FACTORIES[model](**given)
    shape: TransformerShape = base.shape
    if shape.arch == "vit":
        overrides = {**_TRANSFORMERS[model], **given}
        if "image_size" in given and "seq_len" not in given:
            overrides.pop("seq_len", None)
        return transformer(name=model, **overrides)
    if "image_size" in given:
        raise ValueError(f"image_size does not apply to {model!r} (a {shape.arch} transformer)")
    return workload_of(model, dataclasses.replace(shape, **given))
