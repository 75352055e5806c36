"""Workloads against published numbers, the Korthikanti activation formula, Megatron's FLOP
formula, the vectorization contract and the error messages."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.cli
from perfmodel.cli import main
from perfmodel.scenario import WorkloadSpec
from perfmodel.workloads import (ZOO_NAMES, cnn, get_workload, load_workloads_yaml, register_workload,
                                 transformer, workload_from_spec)

# --- parameter counts (published) -------------------------------------------------------------


@pytest.mark.parametrize("name, published, rel", [
    ("resnet50", 25_557_032, 0),        # torchvision resnet50 (v1.5), He et al. 2016: 25.6 M
    ("resnet101", 44_549_160, 0),       # torchvision resnet101
    ("resnet152", 60_192_808, 0),       # torchvision resnet152
    ("gpt3-175b", 174.6e9, 1e-3),       # Brown et al. 2020, Table 2.1: 175.0 B (174.6 B counted)
    ("llama2-7b", 6_738_415_616, 0),    # Llama-2-7b-hf: 6.74 B
    ("llama2-70b", 68.98e9, 1e-3),      # Llama-2-70b-hf: 68.98 B
    ("llama3-8b", 8_030_261_248, 0),    # Meta-Llama-3-8B: 8.03 B
    ("llama3-70b", 70.55e9, 1e-3),      # Meta-Llama-3-70B: 70.6 B
    ("vit-b16", 86_567_656, 0),         # timm vit_base_patch16_224: 86.6 M
    ("vit-l16", 304_326_632, 0),        # timm vit_large_patch16_224: 304.3 M
])
def test_published_parameter_counts(name, published, rel):
    assert get_workload(name).params == pytest.approx(published, rel=rel, abs=0.5)


def test_bert_parameter_counts():
    # Devlin et al. 2019: BERT-base 110 M, BERT-large 340 M (335.1 M for the encoder + pooler,
    # 336.2 M with the MLM/NSP pretraining heads counted here)
    assert get_workload("bert-large").params == pytest.approx(336.2e6, rel=1e-3)
    assert 335e6 <= get_workload("bert-large").params <= 340e6
    assert get_workload("bert-base").params == pytest.approx(110.1e6, rel=1e-3)


def test_resnet50_forward_flops():
    # 4.09 G multiply-adds per 224x224 image (torchvision's 4.09 GFLOPS = MACs; He et al. 2016
    # Table 1: 3.8e9 FLOPs for v1); FLOP = 2 x MAC
    resnet = get_workload("resnet50")
    assert resnet.flops_per_sample() == pytest.approx(8.18e9, rel=0.005)
    assert resnet.flops_per_sample(training=True) == pytest.approx(3 * resnet.flops_per_sample())


def test_resnet_v15_puts_stride_on_the_3x3_conv():
    table = get_workload("resnet50").ops(1)
    m = dict(zip(table.name, table.m))
    assert m["layer2.0.conv1"] == 56 * 56 and m["layer2.0.conv2"] == 28 * 28


def test_cnn_counts_a_tensor_read_by_two_ops_once():
    # the max-pool output feeds layer1.0's conv1 and its shortcut conv: kept once, 64 x 56 x 56
    table = get_workload("resnet50").ops(1, precision="fp16")
    saved = dict(zip(table.name, table.saved_bytes))
    assert saved["layer1.0.conv1"] + saved["layer1.0.downsample"] == 2 * 64 * 56 * 56
    assert saved["layer2.0.conv1"] == saved["layer2.0.downsample"] == 0  # a ReLU output, kept by the ReLU
    assert saved["layer1.0.relu1"] == 2 * 64 * 56 * 56


def test_ssd300_has_8732_default_boxes_and_38px_features():
    table = get_workload("ssd300").ops(1)
    m = dict(zip(table.name, table.m))
    assert m["loc0"] == 38 * 38 and m["loc5"] == 1
    loss = table.name.index("loss")
    assert table.saved_bytes[loss] == 4 * 8732 * (81 + 4)


# --- FLOPs vs Megatron and 6N -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt3-125m", "gpt3-1.3b", "gpt3-175b"])
@pytest.mark.parametrize("seq_len, vocab", [(2048, 51200), (4096, 50257)])
def test_training_flops_match_megatron(name, seq_len, vocab):
    # Narayanan et al. 2021, eq. 3 without recomputation: 72 B s l h^2 (1 + s/6h + V/12lh)
    workload = workload_from_spec(WorkloadSpec(model=name, seq_len=seq_len, vocab=vocab))
    shape = workload.shape
    l, h = shape.layers, shape.hidden
    megatron = 72 * seq_len * l * h ** 2 * (1 + seq_len / (6 * h) + vocab / (12 * l * h))
    assert workload.flops_per_sample(training=True) == pytest.approx(megatron, rel=1e-9)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama2-70b", "llama3-8b"])
def test_training_flops_match_6n_plus_attention(name):
    # 6 N per token (Kaplan et al. 2020) leaves out attention (12 l s h per token, PaLM App. B)
    # and counts the parameters that do no GEMM (untied input embedding, positions, norms)
    workload = get_workload(name)
    shape = workload.shape
    attention = 12 * shape.layers * shape.seq_len * shape.hidden
    no_gemm = shape.seq_len * shape.hidden if shape.arch == "gpt" else shape.vocab * shape.hidden
    per_token = workload.flops_per_sample(training=True) / shape.seq_len
    assert per_token == pytest.approx(6 * (workload.params - no_gemm) + attention, rel=2e-3)
    assert per_token != pytest.approx(6 * workload.params, rel=2e-3)  # the terms do matter


def test_causal_flash_attention_executes_half_the_score_flops():
    gpt = get_workload("gpt3-1.3b")
    attn = lambda table: table.flops[table.name.index("attention")]  # noqa: E731
    assert attn(gpt.ops(2, flash_attention=True)) == pytest.approx(attn(gpt.ops(2, flash_attention=False)) / 2)
    bert = get_workload("bert-large")
    assert attn(bert.ops(2, flash_attention=True)) == attn(bert.ops(2, flash_attention=False))


# --- activation memory (Korthikanti et al. 2022) ------------------------------------------------


def _layer_saved(workload, **plan):
    table = workload.ops(**plan)
    return float((table.saved_bytes * table.mask(placement="layer")).sum(axis=0))


@pytest.mark.parametrize("name, b", [("gpt3-175b", 1), ("gpt3-1.3b", 4), ("bert-large", 8)])
def test_saved_bytes_per_layer_is_korthikanti(name, b):
    workload = get_workload(name)
    s, h, a = workload.shape.seq_len, workload.shape.hidden, workload.shape.heads
    saved = _layer_saved(workload, micro_batch=b, precision="bf16", flash_attention=False)
    assert saved == pytest.approx(s * b * h * (34 + 5 * a * s / h), rel=1e-12)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_saved_bytes_with_tensor_parallel_is_korthikanti(tp):
    # Sec. 4.2.1: s b h (10 + 24/t + 5 a s / (h t)) without sequence parallelism
    workload = get_workload("gpt3-175b")
    s, h, a, b = 2048, 12288, 96, 2
    saved = _layer_saved(workload, micro_batch=b, tp=tp, flash_attention=False)
    assert saved == pytest.approx(s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp)), rel=1e-12)


def test_flash_attention_keeps_no_score_matrix():
    # flash attention stores what selective recompute stores: 34 s b h (+ the fp32 log-sum-exp)
    workload = get_workload("gpt3-175b")
    s, h, a, b = 2048, 12288, 96, 1
    saved = _layer_saved(workload, micro_batch=b, flash_attention=True)
    assert saved == pytest.approx(34 * s * b * h + 4 * b * a * s, rel=1e-12)


def test_fp32_doubles_activation_bytes():
    workload = get_workload("gpt3-125m")
    bf16 = workload.ops(1, precision="bf16", flash_attention=False)
    fp32 = workload.ops(1, precision="fp32", flash_attention=False)
    qkv = bf16.name.index("qkv")
    assert fp32.bytes[qkv] == 2 * bf16.bytes[qkv] and fp32.flops[qkv] == bf16.flops[qkv]
    assert all(bf16.fp32[bf16.name.index(op)] for op in ("attn_norm", "final_norm", "loss"))


# --- the loss's kernels ------------------------------------------------------------------------


@pytest.mark.parametrize("precision, forward, backward", [
    ("bf16", 6 + 12 + 4, 4 + 4 + 12 + 6),   # cast up; max, sum and output passes; zero fill, sum pass, cast back
    ("fp16", 6 + 12 + 4, 4 + 4 + 12 + 6),
    ("fp32", 12 + 4, 4 + 4 + 12),           # no casts
])
def test_a_vocabulary_long_cross_entropy_moves_what_pytorchs_kernels_move(precision, forward, backward):
    workload = get_workload("gpt3-125m")  # 50,257 logits a row: 201 KB in fp32, not on chip
    table = workload.ops(2, precision=precision)
    loss = table.name.index("loss")
    logits = 2 * workload.shape.seq_len * workload.shape.vocab
    assert table.bytes[loss] == pytest.approx(forward * logits, rel=1e-12)
    assert table.backward_bytes()[loss] == pytest.approx(backward * logits, rel=1e-12)
    assert table.saved_bytes[loss] == 4 * logits  # the fp32 log-probabilities (Korthikanti et al. 2022)
    cast = precision != "fp32"
    assert (table.kernels_forward[loss], table.kernels_backward[loss]) == (2 + cast, 3 + cast)


def test_short_softmax_rows_are_read_once_and_tensor_parallelism_can_bring_the_vocabulary_on_chip():
    resnet = get_workload("resnet50").ops(4, precision="fp16")  # 1,000 classes a row
    loss = resnet.name.index("loss")
    assert resnet.bytes[loss] == (6 + 4 + 4) * 4 * 1000
    assert resnet.backward_bytes()[loss] == (4 + 12 + 6) * 4 * 1000
    gpt = get_workload("gpt3-350m")  # 16 heads: tp up to 16
    per_logit = {tp: float(table.bytes[table.name.index("loss")]) / (gpt.shape.seq_len * gpt.shape.vocab / tp)
                 for tp in (1, 2, 4, 8)
                 for table in [gpt.ops(1, tp=tp, precision="bf16")]}
    # 50,257 / 8 = 6,282 fp32 logits a row = 25 KB: on chip; / 4 = 50 KB: not
    assert per_logit == pytest.approx({1: 22.0, 2: 22.0, 4: 22.0, 8: 14.0})


@pytest.mark.parametrize("seq_len, masked", [(128, 20), (512, 77)])  # run_pretraining's max_predictions 20 / 80
def test_berts_masked_lm_head_runs_at_the_masked_positions_only(seq_len, masked):
    workload = workload_from_spec(WorkloadSpec(model="bert-large", seq_len=seq_len))
    table = workload.ops(8, precision="fp16")
    m = dict(zip(table.name, table.m))
    assert m["mlm_dense"] == m["logits"] == 8 * masked      # ceil(15 % of the tokens), Devlin et al. 2019
    assert m["qkv"] == 8 * seq_len                            # the encoder runs every token
    loss = table.name.index("loss")
    assert table.saved_bytes[loss] == 4 * 8 * masked * 30522
    from perfmodel.models.memory import output_layer_bytes
    every = output_layer_bytes(seq_len, 8, 1024, 30522, bytes_per_value=2)
    masked_only = output_layer_bytes(seq_len, 8, 1024, 30522, bytes_per_value=2, logit_positions=masked)
    assert every - masked_only == pytest.approx(4 * 8 * (seq_len - masked) * 30522)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 64), tp=st.sampled_from([1, 2, 4, 8]), precision=st.sampled_from(["bf16", "fp16", "fp32"]))
def test_the_losss_traffic_grows_with_the_batch_and_its_backward_moves_more_than_its_forward(b, tp, precision):
    workload = get_workload("llama3-8b")
    one, more = (workload.ops(n, tp=tp, precision=precision) for n in (b, b + 1))
    loss = one.name.index("loss")
    assert more.bytes[loss] > one.bytes[loss] and more.backward_bytes()[loss] > one.backward_bytes()[loss]
    assert one.backward_bytes()[loss] > one.bytes[loss]
    # every other op keeps the rule: backward moves twice the forward bytes
    others = [i for i in range(len(one)) if i != loss]
    assert np.array_equal(one.backward_bytes()[others], 2 * one.bytes[others])


# --- vectorization contract ---------------------------------------------------------------------

COLUMNS = ("m", "n", "k", "batch_gemms", "flops", "bytes", "params", "saved_bytes")


@pytest.mark.parametrize("name, flash", [("llama3-70b", True), ("gpt3-175b", False), ("bert-large", True)])
def test_ops_with_arrays_equal_ops_with_each_scalar(name, flash):
    workload = get_workload(name)
    b = np.array([1, 2, 4])[:, None, None]
    tp = np.array([1, 2, 8])[None, :, None]
    cp = np.array([1, 2])[None, None, :]
    table = workload.ops(b, tp=tp, cp=cp, flash_attention=flash)
    assert table.plan_shape == (3, 3, 2)
    for i, j, k in np.ndindex(3, 3, 2):
        scalar = workload.ops(int(b[i, 0, 0]), tp=int(tp[0, j, 0]), cp=int(cp[0, 0, k]), flash_attention=flash)
        for column in COLUMNS:
            np.testing.assert_array_equal(getattr(table, column)[:, i, j, k], getattr(scalar, column))


def test_cnn_ops_with_array_batch_equal_scalars():
    workload = get_workload("resnet50")
    table = workload.ops(np.array([1, 32, 256]), precision="fp16")
    for i, b in enumerate((1, 32, 256)):
        scalar = workload.ops(b, precision="fp16")
        for column in COLUMNS:
            np.testing.assert_array_equal(getattr(table, column)[:, i], getattr(scalar, column))


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 64), tp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2, 4]),
       name=st.sampled_from(["gpt3-6.7b", "llama3-8b", "llama2-70b"]))
def test_per_gpu_work_splits_over_tp_and_cp(b, tp, cp, name):
    # GEMM and attention FLOPs (the replicated norms aside) divide exactly by tp * cp; model
    # FLOPs grow linearly with the micro-batch; parameters per GPU never grow with tp
    workload = get_workload(name)
    one = workload.ops(b, flash_attention=False)
    split = workload.ops(b, tp=tp, cp=cp, flash_attention=False)
    kinds = ("matmul", "attention")
    if tp <= workload.shape.kv_heads:
        assert split.total("flops", kind=kinds, placement="layer") == pytest.approx(
            one.total("flops", kind=kinds, placement="layer") / (tp * cp))
    assert one.total("flops", kind=kinds) == pytest.approx(b * workload.ops(1, flash_attention=False).total(
        "flops", kind=kinds))
    assert split.total("params") <= one.total("params")
    for column in COLUMNS:
        values = getattr(split, column)
        assert np.all(np.isfinite(values)) and np.all(values >= 0)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 16), tp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2]),
       name=st.sampled_from(["gpt3-6.7b", "llama3-8b", "bert-large", "transformer-big"]))
def test_sequence_parallelism_splits_the_replicated_ops_over_tp(b, tp, cp, name):
    """Korthikanti et al. 2022, Sec. 4.2.2: with sequence parallelism each tensor-parallel rank runs
    a layer's norms and residual adds (which tensor parallelism replicates) and the final norm on
    1/tp of the tokens; every other op, and every parameter count, is unchanged."""
    workload = get_workload(name)
    whole = workload.ops(b, tp=tp, cp=cp)
    split = workload.ops(b, tp=tp, cp=cp, sequence_parallel=True)
    replicated = np.array([(place == "layer" and (kind == "norm" or op.endswith("residual"))) or op == "final_norm"
                           for kind, op, place in zip(whole.kind, whole.name, whole.placement)])
    assert replicated.sum() >= 3
    for column in ("flops", "bytes", "saved_bytes"):
        np.testing.assert_allclose(getattr(split, column)[replicated], getattr(whole, column)[replicated] / tp)
        np.testing.assert_array_equal(getattr(split, column)[~replicated], getattr(whole, column)[~replicated])
    np.testing.assert_array_equal(split.params, whole.params)


def test_sequence_parallelism_is_for_transformers_only():
    with pytest.raises(ValueError, match="sequence_parallel applies to transformers only, not to resnet50"):
        get_workload("resnet50").ops(32, sequence_parallel=True)


# --- zoo, overrides, registration ---------------------------------------------------------------


def test_every_zoo_model_builds_with_positive_totals():
    for name in ZOO_NAMES:
        workload = get_workload(name)
        table = workload.ops(2, precision="fp16")
        assert workload.params > 0 and workload.flops_per_sample() > 0, name
        assert table.total("saved_bytes") > 0 and table.total("bytes") > 0, name


def test_zoo_shapes_follow_their_papers():
    assert get_workload("vit-h14").tokens_per_sample == 257      # (224/14)^2 + 1
    assert get_workload("vit-b16").tokens_per_sample == 197
    llama = get_workload("llama3-405b").shape
    assert (llama.layers, llama.hidden, llama.kv_heads, llama.ffn_hidden, llama.vocab) == (126, 16384, 8, 53248, 128256)
    assert not llama.tied_embeddings and llama.norm == "rmsnorm" and llama.ffn_act == "swiglu"
    assert not get_workload("bert-large").shape.causal


def test_workload_from_spec_transformer_and_overrides():
    custom = workload_from_spec(WorkloadSpec(model="transformer", layers=32, hidden=4096, heads=32,
                                             ffn_hidden=11008, ffn_act="swiglu", seq_len=4096, vocab=32000))
    assert custom.params == get_workload("llama2-7b").params       # swiglu -> llama conventions
    bert128 = workload_from_spec(WorkloadSpec(model="bert-large", seq_len=128))
    assert bert128.tokens_per_sample == 128 and bert128.params == get_workload("bert-large").params
    resnet = workload_from_spec(WorkloadSpec(model="resnet50", image_size=128))
    assert resnet.params == get_workload("resnet50").params
    assert resnet.flops_per_sample() < get_workload("resnet50").flops_per_sample()


def test_user_workloads_from_yaml(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("""
workloads:
  - name: tiny-gpt
    transformer: {arch: gpt, layers: 2, hidden: 64, heads: 4, seq_len: 32, vocab: 100}
  - name: tiny-mlp
    cnn:
      - {op: fc, in_features: 10, out_features: 5}
      - {op: loss, classes: 5}
""")
    tiny_gpt, tiny_mlp = load_workloads_yaml(path)
    assert get_workload("tiny-gpt") is tiny_gpt
    assert tiny_mlp.params == 55 and tiny_mlp.flops_per_sample() == 2 * 10 * 5
    # 2 layers x (12 h^2 + 13 h) + (V + s) h + final norm 2h
    assert tiny_gpt.params == 2 * (12 * 64 ** 2 + 13 * 64) + (100 + 32) * 64 + 2 * 64
    bad = tmp_path / "bad.yaml"
    bad.write_text("workloads:\n  - name: x\n"
                   "    transformer: {layers: 2, hidden: 60, heads: 7, seq_len: 8, vocab: 9}\n")
    with pytest.raises(ValueError, match=r"workloads\[0\].*heads \(7\) must divide hidden \(60\)"):
        load_workloads_yaml(bad)


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: get_workload("maskrcnn-x101"), r"'maskrcnn-x101' is not in the zoo; known models: gpt3-125m"),
    (lambda: transformer(layers=2, hidden=100, heads=3, seq_len=8, vocab=10), r"heads \(3\) must divide hidden"),
    (lambda: transformer(layers=0, hidden=64, heads=4, seq_len=8, vocab=10), r"layers must be a positive integer"),
    (lambda: transformer(layers=2, hidden=64, heads=4, seq_len=-8, vocab=10), r"seq_len must be a positive"),
    (lambda: transformer(arch="t5", seq_len=8, vocab=10), r"arch 't5' is not known; allowed: gpt, llama"),
    (lambda: get_workload("resnet50").ops(8, tp=2), r"tp must be 1 for a CNN"),
    (lambda: get_workload("resnet50").ops(8, cp=np.array([1, 2])), r"cp must be 1 for a CNN"),
    (lambda: get_workload("gpt3-175b").ops(0), r"micro_batch must be positive"),
    (lambda: get_workload("gpt3-175b").ops(1, tp=5), r"tp=5 must divide heads \(96\)"),
    (lambda: get_workload("gpt3-175b").ops(1, cp=3), r"cp=3 must divide seq_len \(2048\)"),
    (lambda: get_workload("gpt3-175b").ops(1, precision="int4"), r"precision 'int4' is not known; allowed: fp32"),
    (lambda: workload_from_spec(WorkloadSpec(model="transformer", layers=2)), r"needs hidden, heads, seq_len, vocab"),
    (lambda: workload_from_spec(WorkloadSpec(model="unet3d", seq_len=4)),
     r"'unet3d' takes no override of seq_len"),
    (lambda: cnn("x", [{"op": "conv", "in_channels": 3}]), r"conv needs out_channels, kernel, input_size"),
    (lambda: cnn("x", [{"op": "warp"}]), r"op 'warp' is not known"),
    (lambda: register_workload(get_workload("resnet50")), r"taken by the zoo"),
    (lambda: workload_from_spec(WorkloadSpec(model="bert-large", seq_len=128, mean_seq_len=200)),
     r"mean_seq_len 200 exceeds seq_len 128"),
    (lambda: workload_from_spec(WorkloadSpec(model="vit-b16", mean_seq_len=100)), r"mean_seq_len does not apply to vit"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_plan_valid_flags_what_ops_rejects():
    llama = get_workload("llama2-70b")
    np.testing.assert_array_equal(llama.plan_valid(np.array([1, 3, 8, 16])), [True, False, True, True])
    np.testing.assert_array_equal(get_workload("resnet50").plan_valid(np.array([1, 2])), [True, False])


# --- CLI -------------------------------------------------------------------------------------------


@pytest.fixture
def only_workload_command(monkeypatch):
    """The real ``main`` with only this command registered (the others are tested on their own)."""
    monkeypatch.setattr(perfmodel.cli, "COMMANDS", ("workload",))


def test_cli_workload_show_json(capsys, only_workload_command):
    assert main(["workload", "show", "resnet50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == 25_557_032
    assert out["forward_flops_per_sample"] == pytest.approx(8.18e9, rel=0.005)
    assert out["training_flops_per_sample"] == pytest.approx(3 * out["forward_flops_per_sample"])
    assert out["by_kind"]["conv"]["flops"] > 0.99 * out["forward_flops_per_sample"]


def test_cli_workload_show_table_and_errors(capsys, only_workload_command):
    assert main(["workload", "show", "llama3-8b"]) == 0
    text = capsys.readouterr().out
    assert "params" in text and "attention" in text and "training_flops_per_sample" in text
    assert main(["workload", "show", "no-such-model"]) == 2
    assert "not in the zoo" in capsys.readouterr().err
    assert main(["workload", "list"]) == 0
    assert "unet3d" in capsys.readouterr().out


# --- samples shorter than seq_len (padding removed) ------------------------------------------------


def test_mean_seq_len_equal_to_seq_len_is_the_padded_workload():
    padded = workload_from_spec(WorkloadSpec(model="bert-large", seq_len=512))
    same = workload_from_spec(WorkloadSpec(model="bert-large", seq_len=512, mean_seq_len=512))
    for column in ("flops", "bytes", "params", "m", "n", "k"):
        assert np.array_equal(getattr(padded.ops(8), column), getattr(same.ops(8), column)), column
    assert same.params == padded.params and same.tokens_per_sample == 512


@given(mean=st.integers(16, 2048), name=st.sampled_from(["gpt3-1.3b", "llama2-7b", "bert-large"]))
@settings(max_examples=25, deadline=None)
def test_unpadded_samples_cost_their_own_tokens(mean, name):
    """GEMM work per sample is linear in the tokens a sample holds, attention's score work grows
    as their square; parameters and the position table do not change."""
    base = get_workload(name)
    mean = min(mean, base.shape.seq_len)
    short = workload_from_spec(WorkloadSpec(model=name, mean_seq_len=mean))
    full = base.ops(2, flash_attention=False)
    part = short.ops(2, flash_attention=False)
    assert short.params == base.params and short.tokens_per_sample == mean
    ratio = mean / base.shape.seq_len
    layer_matmul = [i for i, (kind, where) in enumerate(zip(full.kind, full.placement))
                    if kind == "matmul" and where == "layer"]
    attention = [i for i, kind in enumerate(full.kind) if kind == "attention"]
    assert np.allclose(part.flops[layer_matmul], full.flops[layer_matmul] * ratio)
    assert np.allclose(part.flops[attention], full.flops[attention] * ratio ** 2)


def test_unpadded_samples_keep_the_memory_of_the_longest_batch():
    """A binned loader's longest bin still holds seq_len-token samples: the memory a plan needs does
    not shrink with mean_seq_len, the step time does."""
    from perfmodel import estimate
    scenario = {"workload": {"model": "bert-large", "seq_len": 512},
                "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3"},
                "plan": {"precision": "fp16", "micro_batch": 32, "global_batch": 256, "tp": 1, "pp": 1}}
    padded = estimate(scenario)
    binned = estimate({**scenario, "workload": {**scenario["workload"], "mean_seq_len": 256}})
    assert binned.memory["total"] == padded.memory["total"]
    assert binned.step_time_s < padded.step_time_s
    for key in ("forward", "backward"):  # half the tokens: GEMMs halve, attention quarters, kernel latencies stay
        assert 0.25 < binned.breakdown_s[key] / padded.breakdown_s[key] < 1.0, key
    assert binned.tokens_per_s == pytest.approx(binned.samples_per_s * 256)
