"""HuggingFace config.json files as workloads, and mixture-of-experts op tables."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.cli
from perfmodel.cli import main
from perfmodel.scenario import ScenarioError, load_scenario
from perfmodel.workloads import get_workload, load_hf_config, moe_all_to_all_bytes, transformer, workload_from_spec
from perfmodel.workloads.hf import SUPPORTED_MODEL_TYPES, hf_config_fields

HF = Path(__file__).parent / "data" / "hf"


def config(name: str) -> Path:
    return HF / name / "config.json"


# Published totals.  Llama 2: Touvron et al. 2023 (6.74 B for "7B", as Meta's model card and the
# paper's released weights count it).  Mixtral: Mistral AI, "Mixtral of experts" (2023-12-11
# announcement: 46.7 B total, 12.9 B used per token).  GPT-NeoX-20B: Black et al. 2022, Table 1
# (20,554,567,680).  GPT-2 small: 124 M (HuggingFace gpt2 model card; Radford et al. 2019 print 117 M
# for the same shape).  BERT-base 110 M (Devlin et al. 2019, Sec. 3).  ViT-B/16 86 M (Dosovitskiy et
# al. 2021, Table 1).  Mistral 7B: 7.3 B (Mistral AI announcement, 2023-09-27).
PUBLISHED = [
    ("llama-2-7b", 6.74e9, 0.001),
    ("mixtral-8x7b", 46.7e9, 0.001),
    ("gpt-neox-20b", 20_554_567_680, 1e-9),
    ("gpt2", 124e6, 0.005),
    ("bert-base-uncased", 110e6, 0.01),
    ("vit-base-patch16-224", 86e6, 0.01),
    ("mistral-7b-v0.1", 7.3e9, 0.01),
]


@pytest.mark.parametrize("name, published, rel", PUBLISHED)
def test_published_parameter_counts(name, published, rel):
    assert load_hf_config(config(name)).params == pytest.approx(published, rel=rel)


def test_qwen_moe_with_fine_grained_and_shared_experts():
    """Qwen team 2024 (Qwen1.5-MoE blog): 14.3 B parameters, 2.7 B activated."""
    w = load_hf_config(config("qwen1.5-moe-a2.7b"))
    assert w.params == pytest.approx(14.3e9, rel=0.005)
    assert w.active_params == pytest.approx(2.7e9, rel=0.005)
    table = w.ops(2, tp=2)
    h, tokens = 2048, 2 * 8192
    shared = sum(float(table.flops[table.name.index(n)]) for n in ("shared_up", "shared_down"))
    assert shared == pytest.approx(2 * tokens * 3 * h * 5632 / 2)         # a dense SwiGLU MLP of 5632 on tp 2
    routed = sum(float(table.flops[table.name.index(n)]) for n in ("expert_up", "expert_down"))
    assert routed == pytest.approx(2 * tokens * 4 * 3 * h * 1408 / 2)     # top-4 experts of 1408
    assert not table.expert[table.name.index("shared_up")]


@pytest.mark.parametrize("change, message", [
    ({"decoder_sparse_step": 2}, r"key 'decoder_sparse_step' = 2 is not supported"),
    ({"mlp_only_layers": [0]}, r"key 'mlp_only_layers' = \[0\] is not supported"),
    ({"num_experts": None}, r"key 'num_experts' is missing"),
])
def test_qwen_moe_refuses_what_it_does_not_model(tmp_path, change, message):
    data = {**json.loads(config("qwen1.5-moe-a2.7b").read_text()), **change}
    data = {key: value for key, value in data.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        load_hf_config(_write(tmp_path, data))


def test_mixtral_active_parameters():
    mixtral = load_hf_config(config("mixtral-8x7b"))
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.002)
    assert mixtral.shape.experts == 8 and mixtral.shape.top_k == 2
    dense = load_hf_config(config("llama-2-7b"))
    assert dense.active_params == dense.params


def test_llama2_config_is_the_zoo_llama2_7b():
    from_file, zoo = load_hf_config(config("llama-2-7b")), get_workload("llama2-7b")
    assert from_file.shape == zoo.shape
    a, b = from_file.ops(2, tp=2), zoo.ops(2, tp=2)
    for column in ("flops", "bytes", "params", "saved_bytes"):
        np.testing.assert_allclose(getattr(a, column), getattr(b, column))


def test_qwen2_counts_qkv_biases_and_follows_the_closed_form():
    w = load_hf_config(config("qwen2-7b"))
    l, h, a, g, f, v = 28, 3584, 28, 4, 18944, 152064
    d = h // a
    qkv = h * (a + 2 * g) * d + (a + 2 * g) * d  # weights + q/k/v biases
    per_layer = qkv + h * h + 3 * h * f + 2 * h
    assert w.params == l * per_layer + 2 * v * h + h
    assert w.shape.has_qkv_bias and not w.shape.bias


def test_gpt_neox_has_no_position_table_and_gpt2_has_one():
    neox, gpt2 = load_hf_config(config("gpt-neox-20b")), load_hf_config(config("gpt2"))
    assert not neox.shape.position_table and not neox.shape.tied_embeddings
    embed = neox.ops(1).params[neox.ops(1).name.index("embedding")]
    assert embed == 50432 * 6144
    assert gpt2.shape.position_table and gpt2.shape.tied_embeddings
    assert gpt2.ops(1).params[0] == (50257 + 1024) * 768


def test_mistral_sliding_window_bounds_seq_len():
    mistral = load_hf_config(config("mistral-7b-v0.1"))
    assert mistral.shape.seq_len == 4096
    assert load_hf_config(config("mistral-7b-v0.1"), seq_len=2048).shape.seq_len == 2048
    with pytest.raises(ValueError, match=r"mistral-7b-v0.1/config.json: seq_len 8192 exceeds the sliding_window 4096"):
        load_hf_config(config("mistral-7b-v0.1"), seq_len=8192)


def test_vit_classes_from_id2label(tmp_path):
    data = json.loads(config("vit-base-patch16-224").read_text())
    del data["num_labels"]
    data["id2label"] = {str(i): f"class{i}" for i in range(21)}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    assert load_hf_config(path).shape.vocab == 21
    del data["id2label"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"config.json: key 'id2label' is missing"):
        load_hf_config(path)


def _write(tmp_path, data) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


LLAMA = json.loads(config("llama-2-7b").read_text())


@pytest.mark.parametrize("change, message", [
    ({"model_type": "t5"}, r"key 'model_type' = 't5' is not supported; supported: llama, mistral"),
    ({"model_type": None}, r"key 'model_type' is missing"),
    ({"hidden_size": None}, r"key 'hidden_size' is missing \(model_type 'llama'\)"),
    ({"num_hidden_layers": "32"}, r"key 'num_hidden_layers' = '32' must be a positive integer"),
    ({"tie_word_embeddings": "no"}, r"key 'tie_word_embeddings' = 'no' must be true or false"),
    ({"hidden_act": "relu"}, r"key 'hidden_act' = 'relu' is not supported; allowed: silu"),
    ({"head_dim": 256}, r"key 'head_dim' = 256 differs from hidden_size / num_attention_heads = 128"),
    ({"num_attention_heads": 30}, r"config.json: heads \(30\) must divide hidden \(4096\)"),
])
def test_bad_config_names_the_file_and_key(tmp_path, change, message):
    data = {**LLAMA, **change}
    data = {key: value for key, value in data.items() if value is not None}
    with pytest.raises(ValueError, match=message) as error:
        load_hf_config(_write(tmp_path, data))
    assert str(tmp_path / "config.json") in str(error.value)


def test_unreadable_config_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"config.json: not valid JSON"):
        load_hf_config(_write(tmp_path, "{not json"))
    with pytest.raises(ValueError, match=r"nothing.json: cannot read config.json"):
        load_hf_config(tmp_path / "nothing.json")
    with pytest.raises(ValueError, match=r"a config.json is a JSON object"):
        hf_config_fields([1, 2], "x.json")


def test_a_model_folder_reads_its_config_json(tmp_path, capsys, only_workload_command):
    # the layout huggingface-cli download leaves: the folder is the model's name
    assert load_hf_config(HF / "llama-2-7b").summary() == load_hf_config(config("llama-2-7b")).summary()
    assert main(["workload", "show", str(HF / "mixtral-8x7b"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["active_params"] == pytest.approx(12.9e9, rel=0.002)
    with pytest.raises(ValueError, match=rf"{tmp_path}: a folder without a config.json"):
        load_hf_config(tmp_path)


def test_every_supported_family_has_a_test_config():
    types = {json.loads(path.read_text())["model_type"] for path in HF.glob("*/config.json")}
    assert types == set(SUPPORTED_MODEL_TYPES)


# --- mixture of experts ------------------------------------------------------------------------------

def _moe(experts=8, top_k=2, capacity_factor=None, **shape):
    base = dict(arch="llama", layers=2, hidden=256, heads=4, kv_heads=2, ffn_hidden=512, vocab=1000, seq_len=64)
    return transformer("moe", **{**base, **shape}, experts=experts, top_k=top_k, capacity_factor=capacity_factor)


@settings(max_examples=40, deadline=None)
@given(experts=st.integers(2, 16), top_k=st.integers(1, 4), b=st.integers(1, 4), tp=st.sampled_from([1, 2, 4]),
       cf=st.one_of(st.none(), st.floats(1.0, 2.0)))
def test_moe_flops_and_params_against_the_dense_model(experts, top_k, b, tp, cf):
    top_k = min(top_k, experts)
    moe, dense = _moe(experts, top_k, cf), _moe(1, 1)
    m, d = moe.ops(b, tp=tp), dense.ops(b, tp=tp)

    def of(table, names, column="flops"):
        return sum(float(getattr(table, column)[table.name.index(n)]) for n in names)

    # executed expert work: cf x top_k tokens' worth of the dense MLP
    factor = (1.0 if cf is None else cf) * top_k
    assert of(m, ("expert_up", "expert_down")) == pytest.approx(factor * of(d, ("mlp_up", "mlp_down")), rel=1e-9)
    assert of(m, ("router",)) == pytest.approx(2 * b * 64 * experts * 256)
    # every expert holds the dense MLP's weights; a token uses top_k of them
    layers = 2
    per_expert = of(d, ("mlp_up", "mlp_down"), "params")
    assert float(m.total("params", expert=True)) == pytest.approx(layers * experts * per_expert, rel=1e-9)
    whole_expert_params = layers * experts * of(dense.ops(1), ("mlp_up", "mlp_down"), "params")
    assert moe.active_params == pytest.approx(moe.params - whole_expert_params * (experts - top_k) / experts)
    assert moe.params == pytest.approx(dense.params + whole_expert_params * (experts - 1) / experts
                                       + layers * 256 * experts)


def test_moe_params_split_over_tensor_parallel_ranks():
    moe = _moe()
    whole, split = moe.ops(1, tp=1), moe.ops(1, tp=4)
    assert float(split.total("params", expert=True)) * 4 == pytest.approx(float(whole.total("params", expert=True)))
    assert whole.params[whole.name.index("router")] == split.params[split.name.index("router")] == 256 * 8


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 8), cp=st.sampled_from([1, 2, 4]), cf=st.one_of(st.none(), st.floats(1.0, 2.0)),
       precision=st.sampled_from(["bf16", "fp32"]))
def test_all_to_all_bytes_are_the_routed_token_copies(b, cp, cf, precision):
    moe = _moe(capacity_factor=cf)
    A = 2 if precision == "bf16" else 4
    expected = A * (1.0 if cf is None else cf) * 2 * b * 64 / cp * 256
    assert float(moe_all_to_all_bytes(moe.shape, b, cp, precision)) == pytest.approx(expected)
    np.testing.assert_allclose(moe_all_to_all_bytes(moe.shape, np.array([b, 2 * b]), cp, precision),
                               [expected, 2 * expected])
    assert float(moe_all_to_all_bytes(_moe(1, 1).shape, b, cp, precision)) == 0.0


@pytest.mark.parametrize("shape, message", [
    (dict(experts=2, top_k=3), r"top_k \(3\) exceeds experts \(2\)"),
    (dict(experts=0), r"experts must be a positive integer"),
    (dict(capacity_factor=-1.0), r"capacity_factor must be a positive number"),
])
def test_bad_moe_shape_is_a_clear_error(shape, message):
    with pytest.raises(ValueError, match=message):
        _moe(**{"experts": 8, "top_k": 2, **shape})


# --- scenario and CLI -------------------------------------------------------------------------------

def test_scenario_hf_config_is_relative_to_the_scenario_file(tmp_path):
    folder = tmp_path / "models" / "gpt2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config("gpt2").read_text())
    scenario_path = tmp_path / "run.yaml"
    scenario_path.write_text("workload: {hf_config: models/gpt2/config.json, seq_len: 512}\n"
                             "hardware: {gpu: A100-SXM4-80GB, num_gpus: 1}\n")
    scenario = load_scenario(scenario_path)
    assert Path(scenario.workload.hf_config) == folder / "config.json"
    workload = workload_from_spec(scenario.workload)
    assert workload.shape.seq_len == 512 and workload.params == pytest.approx(124e6 - 512 * 768, rel=0.005)


def test_scenario_needs_exactly_one_of_model_and_hf_config(tmp_path):
    with pytest.raises(ScenarioError, match="give one of 'model'"):
        load_scenario({"workload": {"model": "gpt2", "hf_config": "x.json"}, "hardware": {"gpu": "A100"}})
    with pytest.raises(ScenarioError, match="give one of 'model'"):
        load_scenario({"workload": {"seq_len": 128}, "hardware": {"gpu": "A100"}})
    with pytest.raises(ValueError, match=r"missing.json: cannot read config.json"):
        workload_from_spec({"hf_config": str(tmp_path / "missing.json")})


def test_estimate_of_an_hf_config_scenario():
    from perfmodel import estimate
    result = estimate({"workload": {"hf_config": str(config("gpt2"))},
                       "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 1},
                       "plan": {"micro_batch": 4, "global_batch": 32, "precision": "bf16"}})
    assert result.feasible and result.step_time_s > 0
    assert result.workload == "gpt2"


@pytest.fixture
def only_workload_command(monkeypatch):
    monkeypatch.setattr(perfmodel.cli, "COMMANDS", ("workload",))


def test_cli_workload_show_a_config_json(capsys, only_workload_command):
    assert main(["workload", "show", str(config("mixtral-8x7b")), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == pytest.approx(46.7e9, rel=0.001)
    assert out["active_params"] == pytest.approx(12.9e9, rel=0.002)
    assert out["shape"]["experts"] == 8
    assert main(["workload", "show", str(config("llama-2-7b"))]) == 0
    text = capsys.readouterr().out
    assert "active_params" in text and "6.73842e+09" in text
    assert main(["workload", "show", str(HF / "none" / "config.json")]) == 2
    assert "cannot read config.json" in capsys.readouterr().err


def test_mixtral_on_64_h100_estimates_with_the_assumed_fabric():
    from perfmodel import estimate
    result = estimate({"workload": {"hf_config": str(config("mixtral-8x7b")), "seq_len": 4096},
                       "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 64},
                       "plan": {"precision": "bf16", "tp": 8, "pp": 2, "micro_batch": 1, "global_batch": 512,
                                "recompute": "full", "zero": 1}})
    assert result.feasible and result.step_time_s > 0
    assert result.assumptions["assumed"][0].startswith("inter = 8 x ib-ndr")
    # MFU counts the FLOPs a token meets: the two routed experts, not all eight
    mixtral = load_hf_config(config("mixtral-8x7b"), seq_len=4096)
    assert mixtral.flops_per_sample(training=True) < 6 * 4096 * 0.3 * mixtral.params


def test_scenario_describes_a_mixture_of_experts_by_its_shape():
    spec = {"model": "transformer", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
            "ffn_act": "swiglu", "seq_len": 4096, "vocab": 32000, "experts": 8, "top_k": 2}
    from_shape = workload_from_spec(load_scenario({"workload": spec, "hardware": {"gpu": "H100"}}).workload)
    from_file = load_hf_config(config("mixtral-8x7b"), seq_len=4096)
    assert from_shape.params == from_file.params and from_shape.active_params == from_file.active_params
    padded = workload_from_spec({**spec, "capacity_factor": 1.25})
    assert padded.flops_per_sample() > from_shape.flops_per_sample()
    with pytest.raises(ScenarioError, match="top_k"):
        load_scenario({"workload": {**spec, "top_k": 0}, "hardware": {"gpu": "H100"}})
