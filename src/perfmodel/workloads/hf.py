"""HuggingFace ``config.json`` files as transformer workloads, read offline from the file.

A model's ``config.json`` (the ``transformers`` library's ``PretrainedConfig`` serialised) names
its family in ``model_type`` and its shape in family-specific keys.  :func:`hf_config_fields`
maps them to :func:`~perfmodel.workloads.transformer.transformer` arguments; the key names are
those of the ``transformers`` configuration classes (``LlamaConfig``, ``MistralConfig``,
``MixtralConfig``, ``Qwen2Config``, ``GPT2Config``, ``GPTNeoXConfig``, ``BertConfig``,
``ViTConfig``).  Where a class has a default for a key the files usually leave out, the same
default is used here and named in :data:`DEFAULTS`; a key with no default that is missing is an
error naming the file and the key.

* ``llama``, ``mistral``, ``qwen2``, ``mixtral`` -> ``arch="llama"`` (RMSNorm, RoPE, SwiGLU MLP
  ``intermediate_size`` wide, untied unless ``tie_word_embeddings``); Qwen2 adds q/k/v biases;
  Mixtral's ``num_local_experts`` / ``num_experts_per_tok`` make each MLP a mixture of experts;
  ``qwen2_moe`` (Qwen1.5-MoE, Qwen2-MoE) has ``num_experts`` routed experts of
  ``moe_intermediate_size`` and a shared expert of ``shared_expert_intermediate_size`` in every
  layer (configs with dense layers, ``decoder_sparse_step`` > 1 or ``mlp_only_layers``, are refused).
* ``gpt2`` -> ``arch="gpt"`` (learned positions over ``n_positions``, tied output, GELU MLP
  ``n_inner`` or 4h wide).
* ``gpt_neox`` -> ``arch="gpt"`` with rotary positions (no position table), untied by default.
* ``bert`` -> ``arch="bert"``; ``vit`` -> ``arch="vit"`` with ``image_size``/``patch_size`` and
  as many classes as ``id2label`` (or ``num_labels``) names.

``seq_len`` is the context the model was configured for (``max_position_embeddings`` /
``n_positions``), or its ``sliding_window`` when that is shorter (Mistral 7B v0.1: 4096 of
32768); give ``seq_len`` to model training at a shorter one.  Shapes the op tables do not
describe are refused, not approximated: a ``head_dim`` other than ``hidden/heads``, a ViT on
other than 3 channels, a ``seq_len`` longer than the sliding window (the tables count full
attention).
"""

from __future__ import annotations

import json
from pathlib import Path

from perfmodel.workloads.transformer import transformer
from perfmodel.workloads.workload import Workload

__all__ = ["SUPPORTED_MODEL_TYPES", "DEFAULTS", "hf_config_fields", "load_hf_config"]

_LLAMA_LIKE = ("llama", "mistral", "qwen2", "mixtral", "qwen2_moe")
SUPPORTED_MODEL_TYPES = (*_LLAMA_LIKE, "gpt2", "gpt_neox", "bert", "vit")

# Defaults of the transformers configuration classes for keys config.json files often omit.
DEFAULTS = {
    "llama": {"tie_word_embeddings": False, "hidden_act": "silu"},
    "mistral": {"tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None},
    "qwen2": {"tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False},
    "mixtral": {"tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None},
    "qwen2_moe": {"tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "shared_expert_intermediate_size": 0},
    "gpt2": {"n_inner": None, "tie_word_embeddings": True, "activation_function": "gelu_new"},
    "gpt_neox": {"tie_word_embeddings": False, "hidden_act": "gelu"},
    "bert": {"hidden_act": "gelu"},
    "vit": {"num_channels": 3, "hidden_act": "gelu"},
}
_GELUS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu")


class _Config:
    """Typed access to one config.json's keys; every error names the file, the key and the value."""

    def __init__(self, data: dict, where: str, model_type: str):
        self.data, self.where, self.model_type = data, where, model_type

    def _fail(self, key: str, problem: str):
        raise ValueError(f"{self.where}: key '{key}' {problem} (model_type {self.model_type!r})")

    def get(self, key: str):
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        defaults = DEFAULTS.get(self.model_type, {})
        if key in defaults:
            return defaults[key]
        self._fail(key, "is missing")

    def count(self, key: str, default_key: str | None = None) -> int:
        """A positive integer; ``default_key``'s value when ``key`` is absent or null."""
        if default_key is not None and self.data.get(key) is None:
            return self.count(default_key)
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self._fail(key, f"= {value!r} must be a positive integer")
        return value

    def flag(self, key: str) -> bool:
        value = self.get(key)
        if not isinstance(value, bool):
            self._fail(key, f"= {value!r} must be true or false")
        return value

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        value = self.get(key)
        if value not in allowed:
            self._fail(key, f"= {value!r} is not supported; allowed: {', '.join(allowed)}")
        return value


def hf_config_fields(data: dict, where: str = "config.json") -> dict:
    """Keyword arguments of :func:`~perfmodel.workloads.transformer.transformer` for a parsed
    ``config.json`` (mapping in the module docstring); ``where`` names the file in errors."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a config.json is a JSON object with 'model_type'")
    model_type = data.get("model_type")
    if model_type is None:
        raise ValueError(f"{where}: key 'model_type' is missing; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"{where}: key 'model_type' = {model_type!r} is not supported; "
                         f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    config = _Config(data, where, model_type)
    if model_type == "gpt2":
        hidden = config.count("n_embd")
        config.choice("activation_function", _GELUS)
        fields = dict(arch="gpt", layers=config.count("n_layer"), hidden=hidden, heads=config.count("n_head"),
                      ffn_hidden=config.count("n_inner") if data.get("n_inner") is not None else 4 * hidden,
                      seq_len=config.count("n_positions"), vocab=config.count("vocab_size"),
                      tied_embeddings=config.flag("tie_word_embeddings"))
    else:
        fields = dict(layers=config.count("num_hidden_layers"), hidden=config.count("hidden_size"),
                      heads=config.count("num_attention_heads"), ffn_hidden=config.count("intermediate_size"))
        _check_head_dim(config, fields)
        if model_type in _LLAMA_LIKE:
            config.choice("hidden_act", ("silu",))
            fields.update(arch="llama", kv_heads=config.count("num_key_value_heads", "num_attention_heads"),
                          seq_len=config.count("max_position_embeddings"), vocab=config.count("vocab_size"),
                          tied_embeddings=config.flag("tie_word_embeddings"))
            if model_type in ("qwen2", "qwen2_moe"):
                fields["qkv_bias"] = True  # Qwen2Attention: q_proj, k_proj, v_proj with bias=True
            if model_type == "qwen2_moe":
                if config.count("decoder_sparse_step") != 1:
                    config._fail("decoder_sparse_step", f"= {data['decoder_sparse_step']!r} is not supported; "
                                 "allowed: 1 (every layer a mixture of experts)")
                if config.get("mlp_only_layers"):
                    config._fail("mlp_only_layers", f"= {data['mlp_only_layers']!r} is not supported; allowed: []")
                shared = config.get("shared_expert_intermediate_size")
                fields.update(experts=config.count("num_experts"), top_k=config.count("num_experts_per_tok"),
                              expert_ffn_hidden=config.count("moe_intermediate_size"),
                              shared_ffn_hidden=config.count("shared_expert_intermediate_size") if shared else 0)
            if model_type == "mixtral":
                fields.update(experts=config.count("num_local_experts"), top_k=config.count("num_experts_per_tok"))
        elif model_type == "gpt_neox":
            config.choice("hidden_act", _GELUS)
            fields.update(arch="gpt", seq_len=config.count("max_position_embeddings"),
                          vocab=config.count("vocab_size"), tied_embeddings=config.flag("tie_word_embeddings"),
                          learned_positions=False)
        elif model_type == "bert":
            config.choice("hidden_act", _GELUS)
            fields.update(arch="bert", seq_len=config.count("max_position_embeddings"),
                          vocab=config.count("vocab_size"))
        else:  # vit
            config.choice("hidden_act", _GELUS)
            if config.count("num_channels") != 3:
                config._fail("num_channels", f"= {data['num_channels']!r} is not supported; allowed: 3")
            fields.update(arch="vit", image_size=config.count("image_size"), patch_size=config.count("patch_size"),
                          vocab=_vit_classes(config))
    _check_sliding_window(config, fields)
    return fields


def _check_head_dim(config: _Config, fields: dict) -> None:
    head_dim = config.data.get("head_dim")
    if head_dim is not None and head_dim * fields["heads"] != fields["hidden"]:
        config._fail("head_dim", f"= {head_dim!r} differs from hidden_size / num_attention_heads = "
                     f"{fields['hidden'] / fields['heads']:g}; such shapes are not supported")


def _attention_window(data: dict) -> int | None:
    """The sliding-window width when the model uses one (Qwen2 only with ``use_sliding_window``)."""
    if data.get("model_type") in ("qwen2", "qwen2_moe") and not data.get("use_sliding_window", False):
        return None
    window = data.get("sliding_window")
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def _check_sliding_window(config: _Config, fields: dict) -> None:
    """Default ``seq_len`` to the window when it is shorter than the context (module docstring)."""
    window = _attention_window(config.data)
    if window is not None and "seq_len" in fields and window < fields["seq_len"]:
        fields["seq_len"] = window


def _vit_classes(config: _Config) -> int:
    labels = config.data.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    if config.data.get("num_labels") is not None:
        return config.count("num_labels")
    config._fail("id2label", "is missing (nor num_labels): the classifier's size is unknown")


def load_hf_config(path: str | Path, name: str | None = None, **overrides) -> Workload:
    """The transformer described by a HuggingFace ``config.json`` at ``path``.

    ``path`` may also be the model's folder (as ``huggingface-cli download`` leaves it), whose
    ``config.json`` is read.  ``name`` defaults to the config's ``_name_or_path`` or the folder
    name; ``overrides`` replace mapped fields (``seq_len=2048``).  Errors name the file and the key."""
    if Path(path).is_dir():
        if not (Path(path) / "config.json").is_file():
            raise ValueError(f"{path}: a folder without a config.json (a HuggingFace model folder holds one)")
        path = Path(path) / "config.json"
    where = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"{where}: cannot read config.json ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error})") from None
    fields = {**hf_config_fields(data, where), **overrides}
    window = _attention_window(data)
    if window is not None and isinstance(fields.get("seq_len"), int) and fields["seq_len"] > window:
        raise ValueError(f"{where}: seq_len {fields['seq_len']} exceeds the sliding_window {window}; "
                         f"the op tables count full attention, so give seq_len <= {window}")
    if name is None:
        name = data.get("_name_or_path") or Path(path).resolve().parent.name or Path(path).stem
    try:
        return transformer(name=str(name), **fields)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
