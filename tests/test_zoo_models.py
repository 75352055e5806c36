"""The zoo's newer models against their published sizes and their own construction rules."""

import math

import numpy as np
import pytest

from perfmodel.workloads import get_workload, transformer
from perfmodel.workloads.vision import maskrcnn, nnunet, nnunet_strides, retinanet

# Tan & Le 2019, EfficientNet, Table 2: parameters and FLOPs (multiply-adds) per image.  The paper
# prints two significant digits; implementations at the stated resolutions land a few per cent
# above the printed FLOPs for B4/B7 (timm lists 4.49 / 38.2 GMACs), hence the FLOP tolerances.
EFFICIENTNET = [("efficientnet-b0", 5.3e6, 0.39e9, 0.01, 0.02),
                ("efficientnet-b4", 19e6, 4.2e9, 0.03, 0.06),
                ("efficientnet-b7", 66e6, 37e9, 0.01, 0.03)]


@pytest.mark.parametrize("name, params, macs, params_rel, macs_rel", EFFICIENTNET)
def test_efficientnet_against_the_paper(name, params, macs, params_rel, macs_rel):
    w = get_workload(name)
    assert w.params == pytest.approx(params, rel=params_rel)
    assert w.flops_per_sample() / 2 == pytest.approx(macs, rel=macs_rel)


def test_efficientnet_uses_depthwise_convolutions():
    table = get_workload("efficientnet-b0").ops(1)
    depthwise = [i for i, name in enumerate(table.name) if name.endswith(".depthwise")]
    assert len(depthwise) == 16  # 1 + 2 + 2 + 3 + 3 + 4 + 1 blocks (Table 1)
    for i in depthwise:  # one k x k filter per channel: batch_gemms = channels, n = 1
        assert table.n[i] == 1 and table.batch_gemms[i] > 1


def _norm_params(workload) -> float:
    return float(workload.ops(1).total("params", kind="norm"))


# torchvision's detection weights table (docs.pytorch.org/vision/stable/models.html, "Object
# Detection"): maskrcnn_resnet50_fpn 44,401,393 and retinanet_resnet50_fpn 34,014,999 parameters,
# with 91 COCO category ids; its backbone's batch norms are frozen (buffers, not parameters).
@pytest.mark.parametrize("build, torchvision_params", [(lambda: maskrcnn(classes=91), 44_401_393),
                                                       (lambda: retinanet(classes=91), 34_014_999)])
def test_detection_models_match_torchvision_parameter_counts(build, torchvision_params):
    w = build()
    assert w.params - _norm_params(w) == torchvision_params


def test_retinanet_heads_share_weights_across_levels_but_not_work():
    table = retinanet().ops(1)
    convs = {level: table.name.index(f"cls.conv0.p{level}") for level in range(3, 8)}
    assert table.params[convs[3]] == 256 * 256 * 9 + 256
    assert all(table.params[convs[level]] == 0 for level in range(4, 8))
    # work per level follows the level's positions: each level has a quarter of the one below
    flops = [table.flops[convs[level]] for level in range(3, 8)]
    positions = [math.ceil(800 / 2 ** level) * math.ceil(1344 / 2 ** level) for level in range(3, 8)]
    np.testing.assert_allclose(np.array(flops) / flops[0], np.array(positions) / positions[0], rtol=1e-12)


def test_maskrcnn_heads_run_per_roi():
    table = maskrcnn().ops(2)
    fc6 = table.name.index("box.fc6")
    assert (table.m[fc6], table.n[fc6], table.k[fc6]) == (2 * 512, 1024, 256 * 7 * 7)
    mask = table.name.index("mask.conv0")
    assert table.flops[mask] == pytest.approx(2 * 2 * 128 * 14 * 14 * 256 * 256 * 9)


def _dynunet_params(dims, in_channels, classes, filters):
    """Closed form of the DynUNet parameter count: two k^d convolutions + two affine norms per
    block, transposed 2^d convolutions with bias, a 1x1 output convolution with bias."""
    k = 3 ** dims

    def block(cin, cout):
        return cin * cout * k + cout * cout * k + 4 * cout

    total = block(in_channels, filters[0])
    total += sum(block(a, b) for a, b in zip(filters, filters[1:]))
    for low, high in zip(reversed(filters[:-1]), reversed(filters[1:])):
        total += high * low * 2 ** dims + low + block(2 * low, low)
    return total + filters[0] * classes + classes


@pytest.mark.parametrize("dims, filters", [(3, [32, 64, 128, 256, 320, 320]), (2, [32, 64, 128, 256, 512, 512])])
def test_nnunet_follows_its_construction_rule(dims, filters):
    w = get_workload(f"nnunet-{dims}d")
    assert nnunet_strides((128, 128, 128) if dims == 3 else (192, 160)) == 5
    assert w.params == _dynunet_params(dims, 4, 4, filters)
    # every level halves the patch: the bottleneck works on (patch / 32) positions
    table = w.ops(1)
    bottleneck = table.name.index("down4.conv1")
    patch = (128, 128, 128) if dims == 3 else (192, 160)
    assert table.m[bottleneck] == math.prod(p // 32 for p in patch)


def test_nnunet_refuses_anisotropic_patches():
    with pytest.raises(ValueError, match="anisotropic downsampling is not modelled"):
        nnunet("x", dims=3, patch=(16, 128, 128))
    with pytest.raises(ValueError, match=r"does not have 2 dimensions"):
        nnunet("x", dims=2, patch=(64, 64, 64))


TXL_CUTOFFS = (19997, 39997, 199997)


def test_transformer_xl_paper_base_has_151m_parameters():
    """Dai et al. 2019, Table 1 (WikiText-103, Transformer-XL Standard: 151 M), with the
    reference code's base shape: 16 x 410, 10 heads of 41, inner 2100, div_val 1."""
    w = transformer("txl-paper", arch="txl", layers=16, hidden=410, heads=10, ffn_hidden=2100, seq_len=150,
                    mem_len=150, vocab=267735, adaptive_cutoffs=TXL_CUTOFFS, qkv_bias=False)
    assert w.params == pytest.approx(151e6, rel=0.005)


def test_transformer_xl_large_closed_form():
    """DeepLearningExamples' large model (wt103_large.yaml): div_val 4 embeddings with a projection
    per cluster, the softmax's head projection untied (tie_projs [false, true, true, true])."""
    h, f, V, layers = 1024, 4096, 267735, 18
    sizes = [19997, 20000, 160000, V - 199997]
    widths = [h // 4 ** i for i in range(4)]
    embedding = sum(n * w for n, w in zip(sizes, widths)) + sum(h * w for w in widths)
    layer = 3 * h * h + h * h + h * h + (h * f + f + f * h + h) + 4 * h  # qkv, out, r_net (no biases), FFN, 2 LN
    softmax = V + 3 * (h + 1) + h * h
    assert get_workload("transformer-xl-large").params == embedding + layers * layer + softmax


def test_transformer_xl_full_softmax_against_a_logged_run():
    """train.py from flags alone (no --adaptive, div_val 1), as lambdal/deeplearning-benchmark runs it:
    its stored log (pytorch/results/1080Ti/PyTorch_transformerxlbase_FP16) prints #params = 191948759
    and #non emb params = 54599680.  Our count leaves out the two 8 x 64 relative-position biases
    shared by all layers (1,024 parameters)."""
    w = get_workload("transformer-xl-base-full-softmax")
    assert w.params + 2 * 8 * 64 == pytest.approx(191948759, abs=1)
    h, V, s = 512, 267735, 192
    full = w.ops(1, precision="fp16", flash_attention=False)
    adaptive = get_workload("transformer-xl-base").ops(1, precision="fp16", flash_attention=False)
    for table, words in ((full, V), (adaptive, TXL_CUTOFFS[0] + len(TXL_CUTOFFS))):  # + one logit per tail
        logits = table.name.index("logits")
        assert table.flops[logits] == pytest.approx(2 * s * words * h)


def test_transformer_xl_attention_spans_memory_and_segment():
    w = get_workload("transformer-xl-base")
    s, mem, h = 192, 192, 512
    for flash in (True, False):  # no fused kernel computes the position term: the same table
        table = w.ops(4, precision="fp16", flash_attention=flash)
        attention = table.name.index("attention")
        assert table.flops[attention] == pytest.approx(6 * 4 * s * (s + mem) * h)
        qkv = table.name.index("qkv")
        assert table.m[qkv] == 4 * (s + mem)


def test_transformer_big_against_vaswani():
    """Vaswani et al. 2017, Table 3: Transformer (big) 213 M parameters, with a ~37,000-token
    shared vocabulary; forward GEMM work is 2 x tokens x the weights each token meets."""
    w = get_workload("transformer-big")
    assert w.params == pytest.approx(213e6, rel=0.01)
    h, f, V, s = 1024, 4096, 37000, 128
    table = w.ops(1, flash_attention=False)
    per_token = 6 * (4 * h * h + 2 * h * f) + 6 * (8 * h * h + 2 * h * f) + V * h
    assert float(table.total("flops", kind="matmul")) == pytest.approx(2 * s * per_token, rel=1e-12)
    attention = float(table.total("flops", kind="attention"))
    assert attention == pytest.approx(3 * 6 * 4 * s * s * h)  # encoder, decoder self, cross; 6 layers each


@pytest.mark.parametrize("shape, message", [
    (dict(arch="encdec", layers=12, encoder_layers=12), r"encoder_layers \(12\) must be fewer than layers"),
    (dict(arch="txl", layers=2, adaptive_cutoffs=(500, 100)), r"adaptive_cutoffs \(500, 100\) must increase"),
    (dict(arch="txl", layers=2, mem_len=-1), r"mem_len must be a non-negative integer"),
])
def test_bad_new_shapes_are_clear_errors(shape, message):
    with pytest.raises(ValueError, match=message):
        transformer("x", hidden=64, heads=4, seq_len=16, vocab=1000, **shape)


# parameter counts (with batch-norm affine parameters) of timm's resnext101_32x4d (44.18 M) and
# seresnext101_32x4d (48.96 M) model cards; multiply-adds of ResNeXt-101 32x4d: 8.0 G (Xie et al.
# 2017, Table 5), i.e. 2 x 8.0e9 forward FLOP per 224 px image
@pytest.mark.parametrize("name, params", [("resnext101-32x4d", 44.18e6), ("se-resnext101-32x4d", 48.96e6)])
def test_resnext_models_match_published_parameter_counts(name, params):
    w = get_workload(name)
    assert w.params == pytest.approx(params, rel=0.001)
    assert w.flops_per_sample() == pytest.approx(2 * 8.0e9, rel=0.01)


def test_resnext_blocks_are_grouped_and_se_adds_gates():
    plain, gated = get_workload("resnext101-32x4d").ops(1), get_workload("se-resnext101-32x4d").ops(1)
    grouped = [i for i, name in enumerate(plain.name) if name.endswith("conv2")]
    assert len(grouped) == 33 and all(plain.batch_gemms[i] == 32 for i in grouped)
    assert sum(name.endswith("se_reduce") for name in gated.name) == 33
    assert gated.total("flops") > plain.total("flops")
