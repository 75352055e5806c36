"""Transformer workloads (GPT, Llama, BERT, ViT) as op tables.

Per layer and forward pass, with tokens per GPU ``T = b*s/c`` (micro-batch ``b``, sequence
``s``, context-parallel degree ``c``), hidden ``h``, ``a`` query heads and ``g`` key/value
heads of size ``d = h/a``, MLP width ``f`` and tensor-parallel degree ``t``:

* GEMMs (Megatron-LM column/row split, Shoeybi et al. 2019, Sec. 3): qkv ``T x (a+2g)d/t x h``,
  attention output ``T x h x ad/t``, MLP up ``T x nf/t x h`` (``n = 2`` matrices for SwiGLU,
  Shazeer 2020), MLP down ``T x h x f/t``, logits ``T x V/t x h``; each ``2mnk`` FLOP.
* Attention: ``QK^T`` and ``PV``, ``4 b (s/c) s h / t`` FLOP (Narayanan et al. 2021, Sec. 5.1).
  We count what the kernel executes: causal flash attention skips the masked upper triangle
  (FlashAttention-2, Dao 2023, Sec. 3.1), so its count is halved; the unfused path computes the
  full score matrix and masks it.  Model FLOPs (``Workload.flops_per_sample``) always count the
  full ``s^2``, as Megatron's ``72 B s l h^2 (1 + s/6h + V/12lh)`` and PaLM's App. B do.
  Flash attention is one kernel forward and three backward (FlashAttention-2's ``dO . O``
  preprocess, main and ``dQ`` conversion kernels: Dao-AILab/flash-attention
  ``csrc/flash_attn/src/flash_bwd_launch_template.h``).  Unfused attention is the chain Megatron-LM's
  ``CoreAttention`` and the reference BERT code run: score GEMM(s), softmax (scale and mask fused
  into it, as Megatron's ``FusedScaleMaskSoftmax``), dropout, ``PV`` GEMM -- one kernel each, the
  softmax and dropout traffic (``pass_bytes``) timed as kernels of their own; backward two GEMMs
  per forward GEMM plus the softmax and dropout backward kernels.
* Activations saved for backward follow Korthikanti et al. 2022, Sec. 4.1, tensor by tensor, so
  that with 16-bit activations, dropout, ``f = 4h``, ``g = a`` and no flash attention one layer
  keeps ``s b h (34 + 5 a s / h)`` bytes, and ``s b h (10 + 24/t + 5 a s / (h t))`` with tensor
  parallelism (norm inputs, the inputs of qkv and MLP-up, and the dropout masks are replicated
  on every tensor-parallel rank; sequence parallelism, which divides them by ``t``, is the memory
  model's business).  Flash attention keeps Q, K, V and the fp32 log-sum-exp instead of the
  ``5 a s^2 b`` score-matrix tensors.
* Sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) splits the tokens of the ops that
  tensor parallelism replicates -- the norms, the residual adds with their dropouts and the final
  norm -- so each rank runs them on ``T/t`` tokens; its Table 4 (22B, TP 8) measures the saving:
  0.5 ms of a layer's 7.7 ms forward pass.

Architecture conventions: ``gpt`` (Megatron GPT: learned positions, LayerNorm, biases, dropout,
causal, tied output), ``llama`` (RoPE, RMSNorm, no biases, no dropout, untied output), ``bert``
(post-LN encoder, learned positions over 512 tokens plus token types, embedding LayerNorm,
dropout, bidirectional, MLM + NSP pretraining heads with the decoder tied to the word embedding,
the MLM head at the 15 % masked positions only; Devlin et al. 2019) and ``vit`` (patch embedding as a GEMM, class token, learned positions,
classifier on the class token; Dosovitskiy et al. 2021; no dropout, as in the timm recipes).
RoPE and bias-add costs are not modelled (fused into neighbouring kernels).

``txl`` (Transformer-XL, Dai et al. 2019, as NVIDIA DeepLearningExamples trains it): a causal
decoder whose keys and values run over ``mem_len`` cached tokens plus the segment (the qkv GEMM
over both, as the reference code concatenates them), a per-layer projection of the ``klen``
relative position embeddings, and three attention GEMMs (content ``AC``, position ``BD``, ``PV``;
Sec. 3.3), unfused whatever the plan says (the reference code's ``_rel_shift`` pads and re-slices
the ``BD`` scores, then adds them to ``AC``: 7 bytes moved per score element and byte of
precision, the ``rel_shift`` op); sinusoidal positions (no table); adaptive input and softmax
(Baevski & Auli 2019; Grave et al. 2017) with clusters at ``adaptive_cutoffs``, cluster ``i`` of width
``hidden / adaptive_div^i`` and projections to ``hidden`` when ``adaptive_div > 1``, tied to the
softmax.  The op table counts the head cluster's logits (``cutoffs[0]`` words and one per tail
cluster) for every token; the tail clusters' GEMMs run only for the tokens of rare words and are
not counted.  ``encdec`` (Transformer, Vaswani et al. 2017): ``encoder_layers`` bidirectional
layers, then ``layers - encoder_layers`` causal decoder layers with cross-attention over a
source as long as the target (``seq_len`` tokens each; a sample is a sentence pair), sinusoidal
positions, one embedding shared by source, target and output.

**Samples shorter than** ``seq_len`` (``mean_seq_len``): a dataset of variable-length samples
padded to ``seq_len`` wastes the padding's compute -- BERT's Wikipedia pretraining data at 512
tokens is more than half padding (Krell et al. 2021, "Efficient sequence packing without
cross-contamination", arXiv 2107.02027, Sec. 1) -- and a data loader that removes it (sequence
binning, each batch padded only to its own bin's longest sample, as NVIDIA's LDDL does;
unpadded or packed kernels) processes ``mean_seq_len`` tokens per sample on average.  The op table
then counts ``mean_seq_len`` tokens per sample and attention over ``mean_seq_len`` keys (a batch of
equal-length samples: the spread of lengths, whose attention work grows as the mean of the squared
length, is not counted); the memory a plan needs stays that of ``seq_len``-token samples (the batch
of the longest bin), and the position table stays ``seq_len`` long.

Per-shape variations read from HuggingFace configs (:mod:`perfmodel.workloads.hf`): ``qkv_bias``
(Qwen2 has biases on q, k, v only), ``learned_positions`` (GPT-NeoX is a GPT-style model with
rotary positions, so no position table).

Mixture of experts (``experts > 1``; Shazeer et al. 2017, Fedus et al. 2022 Switch Transformer
Sec. 2.1, Jiang et al. 2024 Mixtral Sec. 2.1): the MLP becomes ``experts`` MLPs of width
``ffn_hidden`` and a router ``T x E x h`` (replicated on tensor-parallel ranks) whose softmax
picks ``top_k`` experts per token.  Expert GEMMs are grouped GEMMs (``batch_gemms = E``) of
``m = cf k T / E`` rows each, where the capacity factor ``cf`` pads every expert's buffer to
``cf x`` its balanced share (Switch Sec. 2.1; ``None`` = dropless, as Mixtral/MegaBlocks run,
counted as 1): the table counts executed work, ``cf k T`` token-expert pairs per GPU.  All
experts sit on every GPU here (expert parallelism 1); with expert parallelism ``ep`` over the
data-parallel ranks each GPU keeps ``E/ep`` experts (``OpTable.total("params", expert=True) /
ep``) and, balanced, still computes ``cf k T`` pairs, exchanged by two all-to-alls per layer
forward and two backward (:func:`moe_all_to_all_bytes`).  ``Workload.active_params`` counts the
``top_k`` experts a token uses.  Routed experts may be narrower than the dense MLP
(``expert_ffn_hidden``; fine-grained experts, Dai et al. 2024 DeepSeekMoE Sec. 3.1) and a shared
expert of width ``shared_ffn_hidden`` may process every token beside them (DeepSeekMoE Sec. 3.2;
Qwen2-MoE, whose sigmoid gate of ``h`` parameters on it is not counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from perfmodel.workloads.workload import (GELU_FLOPS, LOSS_FLOPS, NORM_FLOPS, RESIDUAL_FLOPS, SWIGLU_FLOPS,
                                          OpSpec, Workload, activation_bytes, build_table, cross_entropy_op,
                                          plan_arrays, positive_int)

__all__ = ["TransformerShape", "transformer", "transformer_ops", "moe_all_to_all_bytes", "ARCHS",
           "MOE_ALL_TO_ALLS_PER_LAYER"]

ARCHS = ("gpt", "llama", "bert", "vit", "txl", "encdec")
FFN_ACTS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
BERT_MAX_POSITIONS = 512  # BERT's learned position table (Devlin et al. 2019, Sec. 3 / A.2)
# BERT masks 15 % of the tokens and predicts only those (Devlin et al. 2019, Sec. 3.1); its masked-LM
# head runs at the masked positions alone: the reference code gathers them before the transform and
# the tied decoder (google-research/bert run_pretraining.py gather_indexes, up to max_predictions_per_seq
# = 20 at 128 tokens and 80 at 512), as NVIDIA's implementations do (dense_seq_output).
BERT_MASKED_SHARE = 0.15
# dispatch + combine in the forward pass, their gradients in the backward pass (GShard, Lepikhin
# et al. 2021, Sec. 2.2; Megatron-Core MoE token dispatcher)
MOE_ALL_TO_ALLS_PER_LAYER = 4



@dataclass(frozen=True)
class TransformerShape:
    """Shape of a transformer.  For ViT ``seq_len`` = patches + 1 and ``vocab`` = classes."""

    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    ffn_act: str
    seq_len: int
    vocab: int
    causal: bool
    tied_embeddings: bool
    norm: str
    image_size: int | None = None
    patch_size: int | None = None
    qkv_bias: bool | None = None  # None: the architecture's convention (bias)
    learned_positions: bool | None = None  # None: gpt and bert have a position table, llama not
    experts: int = 1  # > 1: mixture of experts (module docstring)
    top_k: int = 1
    capacity_factor: float | None = None  # None: dropless
    expert_ffn_hidden: int | None = None  # one routed expert's width; None: ffn_hidden
    shared_ffn_hidden: int = 0  # width of the always-used shared expert MLP; 0: none
    mem_len: int = 0  # txl: cached tokens attended to
    encoder_layers: int | None = None  # encdec: the first ``encoder_layers`` of ``layers``
    adaptive_cutoffs: tuple[int, ...] = ()  # txl: adaptive softmax cluster boundaries
    adaptive_div: int = 1  # txl: width divisor per cluster
    mean_seq_len: int | None = None  # tokens a sample holds on average when padding is removed; None: seq_len

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"arch {self.arch!r} is not known; allowed: {', '.join(ARCHS)}")
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab"):
            positive_int(getattr(self, name), name)
        if self.ffn_act not in FFN_ACTS:
            raise ValueError(f"ffn_act {self.ffn_act!r} is not known; allowed: {', '.join(FFN_ACTS)}")
        if self.norm not in NORMS:
            raise ValueError(f"norm {self.norm!r} is not known; allowed: {', '.join(NORMS)}")
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        if self.arch == "vit":
            image = positive_int(self.image_size, "image_size")
            patch = positive_int(self.patch_size, "patch_size")
            if image % patch:
                raise ValueError(f"patch_size ({patch}) must divide image_size ({image})")
            if self.seq_len != (image // patch) ** 2 + 1:
                raise ValueError(f"seq_len for vit must be (image_size/patch_size)^2 + 1 = "
                                 f"{(image // patch) ** 2 + 1}, got {self.seq_len}")
        if self.arch == "txl":
            if isinstance(self.mem_len, bool) or not isinstance(self.mem_len, int) or self.mem_len < 0:
                raise ValueError(f"mem_len must be a non-negative integer, got {self.mem_len!r}")
            positive_int(self.adaptive_div, "adaptive_div")
            if list(self.adaptive_cutoffs) != sorted(set(self.adaptive_cutoffs)) or any(
                    not 0 < cut < self.vocab for cut in self.adaptive_cutoffs):
                raise ValueError(f"adaptive_cutoffs {self.adaptive_cutoffs!r} must increase strictly within "
                                 f"(0, vocab={self.vocab})")
        if self.arch == "encdec":
            encoder = positive_int(self.encoder_layers, "encoder_layers")
            if encoder >= self.layers:
                raise ValueError(f"encoder_layers ({encoder}) must be fewer than layers ({self.layers}), "
                                 "which count encoder and decoder layers")
        positive_int(self.experts, "experts")
        positive_int(self.top_k, "top_k")
        if self.expert_ffn_hidden is not None:
            positive_int(self.expert_ffn_hidden, "expert_ffn_hidden")
        if self.shared_ffn_hidden:
            positive_int(self.shared_ffn_hidden, "shared_ffn_hidden")
        if (self.expert_ffn_hidden is not None or self.shared_ffn_hidden) and not self.moe:
            raise ValueError("expert_ffn_hidden and shared_ffn_hidden need experts > 1")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.capacity_factor is not None and not (isinstance(self.capacity_factor, (int, float))
                                                     and not isinstance(self.capacity_factor, bool)
                                                     and self.capacity_factor > 0):
            raise ValueError(f"capacity_factor must be a positive number, got {self.capacity_factor!r}")
        if self.arch == "bert" and self.seq_len > BERT_MAX_POSITIONS:
            raise ValueError(f"seq_len {self.seq_len} exceeds BERT's {BERT_MAX_POSITIONS} positions")
        if self.mean_seq_len is not None:
            positive_int(self.mean_seq_len, "mean_seq_len")
            if self.mean_seq_len > self.seq_len:
                raise ValueError(f"mean_seq_len {self.mean_seq_len} exceeds seq_len {self.seq_len}: it is the "
                                 f"average length of samples padded or truncated to at most seq_len")
            if self.arch == "vit":
                raise ValueError("mean_seq_len does not apply to vit: every image has the same number of patches")

    @property
    def processed_len(self) -> int:
        """Tokens the GPU processes per sample on average: ``mean_seq_len`` when the data loader removes
        padding, else ``seq_len`` (every sample padded to it)."""
        return self.seq_len if self.mean_seq_len is None else self.mean_seq_len

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def dropout(self) -> bool:
        return self.arch in ("gpt", "bert", "txl", "encdec")

    @property
    def bias(self) -> bool:
        return self.arch != "llama"

    @property
    def has_qkv_bias(self) -> bool:
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def position_table(self) -> bool:
        return self.arch in ("gpt", "bert") if self.learned_positions is None else self.learned_positions

    @property
    def logit_positions(self) -> float:
        """Positions of a sequence whose output logits (and loss) are computed: all ``seq_len``, or
        BERT's masked positions, ``ceil(BERT_MASKED_SHARE x seq_len)``."""
        return float(np.ceil(BERT_MASKED_SHARE * self.seq_len)) if self.arch == "bert" else float(self.seq_len)

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def expert_width(self) -> int:
        """One routed expert's MLP width (``ffn_hidden`` unless ``expert_ffn_hidden`` says otherwise)."""
        return self.ffn_hidden if self.expert_ffn_hidden is None else self.expert_ffn_hidden

    @property
    def expert_rows_factor(self) -> float:
        """Token-expert pairs computed per token: ``cf x top_k`` (dropless: ``top_k``)."""
        return (1.0 if self.capacity_factor is None else float(self.capacity_factor)) * self.top_k

    def plan_valid(self, tp=1, cp=1) -> np.ndarray:
        """True where Megatron can split this shape: ``tp`` divides heads and ffn_hidden, ``tp``
        and kv_heads divide one another (kv heads are replicated when tp > kv_heads), ``cp``
        divides seq_len."""
        t, c = np.asarray(tp), np.asarray(cp)
        kv_ok = (self.kv_heads % t == 0) | (t % self.kv_heads == 0)
        widths_ok = (self.expert_width % t == 0) & (self.shared_ffn_hidden % t == 0)
        return (self.heads % t == 0) & (self.ffn_hidden % t == 0) & widths_ok & kv_ok & (self.seq_len % c == 0)


def transformer(name: str = "transformer", arch: str = "gpt", layers: int = 12, hidden: int = 768,
                heads: int = 12, kv_heads: int | None = None, ffn_hidden: int | None = None,
                ffn_act: str | None = None, seq_len: int | None = None, vocab: int | None = None,
                causal: bool | None = None, tied_embeddings: bool | None = None, norm: str | None = None,
                image_size: int | None = None, patch_size: int | None = None, qkv_bias: bool | None = None,
                learned_positions: bool | None = None, experts: int = 1, top_k: int = 1,
                capacity_factor: float | None = None, expert_ffn_hidden: int | None = None,
                shared_ffn_hidden: int = 0, mem_len: int = 0, encoder_layers: int | None = None,
                adaptive_cutoffs: tuple[int, ...] = (), adaptive_div: int = 1,
                mean_seq_len: int | None = None) -> Workload:
    """A transformer workload; unset fields take the architecture's convention (module docstring):
    ``kv_heads = heads``, ``ffn_hidden = 4 hidden``, ``ffn_act`` swiglu for llama else gelu, causal
    for gpt/llama, tied for gpt/bert, RMSNorm for llama.  ViT takes ``image_size``/``patch_size``
    (``seq_len`` follows) and ``vocab`` = classes (default 1000).  ``experts > 1`` makes every MLP
    a mixture of experts with ``top_k`` routing (``ffn_hidden`` is one expert's width).  ``txl``
    takes ``mem_len`` and the adaptive softmax (``adaptive_cutoffs``, ``adaptive_div``); ``encdec``
    splits ``layers`` into ``encoder_layers`` (default half) and decoder layers; both are causal
    decoders with tied embeddings and no position table by default."""
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r} is not known; allowed: {', '.join(ARCHS)}")
    hidden_int = positive_int(hidden, "hidden")
    if arch == "vit":
        image_size = 224 if image_size is None else image_size
        patch_size = 16 if patch_size is None else patch_size
        positive_int(image_size, "image_size")
        positive_int(patch_size, "patch_size")
        seq_len = (image_size // patch_size) ** 2 + 1 if seq_len is None else seq_len
        vocab = 1000 if vocab is None else vocab
    if seq_len is None or vocab is None:
        raise ValueError(f"transformer {name!r} needs seq_len and vocab")
    shape = TransformerShape(
        arch=arch, layers=layers, hidden=hidden_int, heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        ffn_hidden=4 * hidden_int if ffn_hidden is None else ffn_hidden,
        ffn_act=ffn_act or ("swiglu" if arch == "llama" else "gelu"),
        seq_len=seq_len, vocab=vocab,
        causal=arch in ("gpt", "llama", "txl", "encdec") if causal is None else causal,
        tied_embeddings=arch in ("gpt", "bert", "txl", "encdec") if tied_embeddings is None else tied_embeddings,
        norm=norm or ("rmsnorm" if arch == "llama" else "layernorm"),
        image_size=image_size, patch_size=patch_size, qkv_bias=qkv_bias,
        learned_positions=learned_positions, experts=experts, top_k=top_k, capacity_factor=capacity_factor,
        expert_ffn_hidden=expert_ffn_hidden, shared_ffn_hidden=shared_ffn_hidden, mem_len=mem_len, adaptive_cutoffs=tuple(adaptive_cutoffs), adaptive_div=adaptive_div,
        mean_seq_len=mean_seq_len, encoder_layers=(layers // 2 if arch == "encdec" and encoder_layers is None else encoder_layers))
    return workload_of(name, shape)


def workload_of(name: str, shape: TransformerShape) -> Workload:
    """Wrap a shape into a :class:`Workload` (parameters counted from its op table)."""
    builder = partial(transformer_ops, shape)
    table = builder(micro_batch=1, tp=1, cp=1, precision="bf16", flash_attention=True)
    params = float(table.total("params"))
    unused_experts = 1.0 - shape.top_k / shape.experts if shape.moe else 0.0
    active = params - unused_experts * float(table.total("params", expert=True))
    return Workload(name=name, family="transformer", shape=shape, params=params,
                    tokens_per_sample=shape.processed_len, layers=shape.layers, builder=builder, active_params=active)


def moe_all_to_all_bytes(shape: TransformerShape, micro_batch=1, cp=1, precision: str = "bf16"):
    """Bytes one GPU sends in one MoE all-to-all of one layer and one micro-batch (the buffer size
    as nccl-tests counts it): its ``cf x top_k x b s / c`` routed token copies of ``h`` values.

    One layer runs :data:`MOE_ALL_TO_ALLS_PER_LAYER` of them per micro-batch (dispatch and combine,
    forward and backward); over an expert-parallel group of ``ep`` GPUs the share ``(ep-1)/ep``
    leaves the GPU.  Dense shapes -> 0.  Floats or arrays that broadcast."""
    A = activation_bytes(precision)
    b, c = np.asarray(micro_batch, dtype=float), np.asarray(cp, dtype=float)
    if not shape.moe:
        return np.zeros(np.broadcast_shapes(b.shape, c.shape))
    return A * shape.expert_rows_factor * b * shape.processed_len / c * shape.hidden


def transformer_ops(shape: TransformerShape, micro_batch=1, tp=1, cp=1, precision: str = "bf16",
                    flash_attention: bool = True, sequence_parallel: bool = False):
    """The op table of ``shape`` for a plan (formulas in the module docstring); with
    ``sequence_parallel`` the norms and residual adds run on ``T/t`` tokens per rank."""
    A = activation_bytes(precision)
    b, t, c, plan_shape = plan_arrays(micro_batch, tp, cp)
    if not np.all(shape.plan_valid(t.astype(int), c.astype(int))):
        _explain_invalid(shape, t.astype(int), c.astype(int))
    s, h, d = shape.processed_len, shape.hidden, shape.head_dim
    T = b * s / c                                        # tokens per GPU
    R = T / t if sequence_parallel else T                # tokens of a norm or residual add per GPU
    q_heads = shape.heads / t
    kv_heads = np.maximum(shape.kv_heads / t, 1.0)      # replicated when tp > kv_heads
    qkv_n = (q_heads + 2 * kv_heads) * d
    f = shape.ffn_hidden / t
    up_mats = 2 if shape.ffn_act == "swiglu" else 1
    mask = 1.0 if shape.dropout else 0.0                 # 1-byte dropout mask per element
    bias = 1.0 if shape.bias else 0.0
    norm_params = h * (2 if shape.norm == "layernorm" else 1)

    def matmul(name, m, n, k, params, saved, placement="layer", column_parallel=False):
        return OpSpec(name, "matmul", placement, m=m, n=n, k=k, flops=2 * m * n * k,
                      bytes=A * (m * k + k * n + m * n), params=params, saved_bytes=saved,
                      column_parallel=column_parallel)

    def norm(name, tokens, placement="layer"):
        return OpSpec(name, "norm", placement, fp32=True, flops=NORM_FLOPS * tokens * h,
                      bytes=2 * A * tokens * h, params=norm_params, saved_bytes=A * tokens * h)

    def residual(name):
        return OpSpec(name, "elementwise", flops=RESIDUAL_FLOPS * R * h,
                      bytes=(3 * A + mask) * R * h, saved_bytes=mask * R * h)

    def attention(name, kv_len, causal, score_gemms=2):
        """Scores and PV of ``T`` queries over ``kv_len`` keys: ``2 score_gemms`` FLOP per score
        element and head dimension (2 GEMMs: QK^T, PV; Transformer-XL adds the position term BD)."""
        scores = b * q_heads * (s / c) * kv_len          # score-matrix elements per GPU
        flops = 2 * score_gemms * scores * d
        qkv_bytes = A * (T * q_heads * d + 2 * T * (kv_len / s) * kv_heads * d)
        io_bytes = A * (2 * T * q_heads * d + 2 * b * kv_len * kv_heads * d)
        fused = flash_attention and shape.arch != "txl"  # no fused kernel computes TXL's position term
        if fused:  # one kernel forward; backward: dO.O preprocess, the main kernel, the dQ conversion
            byte_count, saved = io_bytes, qkv_bytes + 4 * b * q_heads * (s / c)     # Q, K, V + fp32 LSE
            flops = flops / 2 if causal else flops
            return OpSpec(name, "attention", m=s / c, n=kv_len, k=d, batch_gemms=b * q_heads, flops=flops,
                          bytes=byte_count, saved_bytes=saved, implicit=True, kernels_backward=3.0)
        # unfused, kernel by kernel: the score GEMMs write S (+ BD, added to it), softmax reads S and
        # writes P, dropout reads P and writes P' and its mask, the PV GEMM reads P'; softmax and mask
        # are kept for the backward pass, which runs two GEMMs per forward GEMM and the softmax and
        # dropout backward kernels
        side_passes = 1 + mask + (score_gemms - 2)       # softmax, dropout, the score add (TXL)
        pass_bytes = scores * (2 * A + (2 * A + 1) * mask + 2 * A * (score_gemms - 2))
        byte_count = io_bytes + 2 * A * scores + pass_bytes
        saved = qkv_bytes + scores * (A + (A + 1) * mask)
        return OpSpec(name, "attention", m=s / c, n=kv_len, k=d, batch_gemms=b * q_heads, flops=flops,
                      bytes=byte_count, saved_bytes=saved, pass_bytes=pass_bytes,
                      kernels_forward=score_gemms + side_passes, kernels_backward=2 * score_gemms + 1 + mask)

    act_flops = (SWIGLU_FLOPS if up_mats == 2 else GELU_FLOPS) * T * f
    qkv_bias = 1.0 if shape.has_qkv_bias else 0.0

    def self_attention(prefix, causal):
        if shape.arch == "txl":  # keys over the cached memory and the segment (Dai et al. 2019, Sec. 3.3)
            klen = s + shape.mem_len
            tokens = T * klen / s
            return [norm(prefix + "attn_norm", R),
                    matmul(prefix + "qkv", tokens, qkv_n, h, h * qkv_n + qkv_bias * qkv_n, A * tokens * h,
                           column_parallel=True),
                    matmul(prefix + "pos_proj", klen, q_heads * d, h, h * q_heads * d, A * klen * h),
                    attention(prefix + "attention", klen, causal, score_gemms=3),
                    OpSpec(prefix + "rel_shift", "elementwise", flops=b * q_heads * (s / c) * klen,
                           bytes=7 * A * b * q_heads * (s / c) * klen),
                    matmul(prefix + "attn_out", T, h, q_heads * d, h * q_heads * d, A * T * q_heads * d),
                    residual(prefix + "attn_residual")]           # qkv_net, r_net, o_net: no biases
        return [norm(prefix + "attn_norm", R),
                matmul(prefix + "qkv", T, qkv_n, h, h * qkv_n + qkv_bias * qkv_n, A * T * h, column_parallel=True),
                attention(prefix + "attention", s, causal),
                matmul(prefix + "attn_out", T, h, q_heads * d, h * q_heads * d + bias * h, A * T * q_heads * d),
                residual(prefix + "attn_residual")]

    def cross_attention(prefix):
        """Decoder queries over the encoder output (source as long as the target; Vaswani et al. 2017)."""
        q_n, kv_n = q_heads * d, 2 * kv_heads * d
        return [norm(prefix + "attn_norm", R),
                matmul(prefix + "q", T, q_n, h, h * q_n + bias * q_n, A * T * h, column_parallel=True),
                matmul(prefix + "kv", T, kv_n, h, h * kv_n + bias * kv_n, A * T * h),
                attention(prefix + "attention", s, causal=False),
                matmul(prefix + "attn_out", T, h, q_n, h * q_n + bias * h, A * T * q_n),
                residual(prefix + "attn_residual")]

    def mlp(prefix):
        return [norm(prefix + "mlp_norm", R),
                *(_moe_ops(shape, T, t, up_mats, A, bias, matmul) if shape.moe else [
                    matmul(prefix + "mlp_up", T, up_mats * f, h, up_mats * (h * f + bias * f), A * T * h,
                           column_parallel=True),
                    OpSpec(prefix + "mlp_act", "elementwise", flops=act_flops, bytes=A * (up_mats + 1) * T * f,
                           saved_bytes=A * up_mats * T * f),
                    matmul(prefix + "mlp_down", T, h, f, h * f + bias * h, A * T * f)]),
                residual(prefix + "mlp_residual")]

    if shape.arch == "encdec":
        encoder = self_attention("enc_", causal=False) + mlp("enc_")
        decoder = self_attention("dec_", causal=True) + cross_attention("dec_cross_") + mlp("dec_")
        layer, layer_repeat = encoder + decoder, ([shape.encoder_layers] * len(encoder)
                                                  + [shape.layers - shape.encoder_layers] * len(decoder))
    else:
        layer = self_attention("", shape.causal) + mlp("")
        layer_repeat = [shape.layers] * len(layer)
    pre, post = _pre_ops(shape, b, t, c, T, A, mask, matmul, norm), _post_ops(shape, b, t, T, R, A, matmul, norm)
    ops = pre + layer + post
    repeat = [1] * len(pre) + layer_repeat + [1] * len(post)
    return build_table(ops, repeat, plan_shape)


def _moe_ops(shape: TransformerShape, T, t, up_mats, A, bias, matmul):
    """Router, its top-k softmax, the routed experts' grouped GEMMs, the weighted combine and, when
    the shape has one, the shared expert every token also passes (module docstring); widths are
    per tensor-parallel rank."""
    h, E = shape.hidden, shape.experts
    f = shape.expert_width / t
    act = SWIGLU_FLOPS if up_mats == 2 else GELU_FLOPS
    pairs = shape.expert_rows_factor * T               # token-expert pairs computed per GPU
    rows = pairs / E                                   # rows of each expert's GEMM

    def grouped(name, n, k, params, saved):
        return OpSpec(name, "matmul", m=rows, n=n, k=k, batch_gemms=E, flops=2 * pairs * n * k,
                      bytes=A * (pairs * k + E * k * n + pairs * n), params=params, saved_bytes=saved,
                      expert=True)

    ops = [
        OpSpec("router", "matmul", m=T, n=E, k=h, flops=2 * T * E * h, bytes=A * (T * h + h * E + T * E),
               params=h * E, saved_bytes=0.0),          # its input is mlp_norm's output, kept by the experts
        OpSpec("router_softmax", "softmax", fp32=True, flops=LOSS_FLOPS * T * E, bytes=(A + 4) * T * E,
               saved_bytes=4 * T * E),
        grouped("expert_up", up_mats * f, h, E * up_mats * (h * f + bias * f), A * pairs * h),
        OpSpec("expert_act", "elementwise", flops=act * pairs * f, bytes=A * (up_mats + 1) * pairs * f,
               saved_bytes=A * up_mats * pairs * f),
        grouped("expert_down", h, f, E * (h * f + bias * h), A * pairs * f),
        OpSpec("expert_combine", "elementwise", flops=2 * pairs * h, bytes=A * (pairs + T) * h,
               saved_bytes=A * pairs * h),            # weighted sum of the top-k expert outputs
    ]
    if shape.shared_ffn_hidden:                        # Qwen2-MoE / DeepSeekMoE shared expert
        g = shape.shared_ffn_hidden / t
        ops += [matmul("shared_up", T, up_mats * g, h, up_mats * (h * g + bias * g), 0.0),  # input kept above
                OpSpec("shared_act", "elementwise", flops=act * T * g, bytes=A * (up_mats + 1) * T * g,
                       saved_bytes=A * up_mats * T * g),
                matmul("shared_down", T, h, g, h * g + bias * h, A * T * g)]
    return ops


def _pre_ops(shape, b, t, c, T, A, mask, matmul, norm):
    h, s, V = shape.hidden, shape.seq_len, shape.vocab
    if shape.arch == "vit":
        patches = s - 1
        pixels = 3 * shape.patch_size ** 2
        params = pixels * h + h + h + s * h           # patch GEMM + bias, class token, positions
        return [matmul("patch_embed", b * patches / c, h, pixels, params, A * b * patches / c * pixels, "pre")]
    if shape.arch == "txl":
        return [_adaptive_embedding(shape, t, T, A, mask)]
    if shape.arch == "encdec":  # source and target tokens through one table, scaled, plus sinusoids
        return [OpSpec("embedding", "embedding", "pre", flops=2 * 2 * T * h, bytes=2 * (2 * A + mask) * T * h,
                       params=V * h / t, saved_bytes=2 * mask * T * h)]
    positions = {"gpt": s, "bert": BERT_MAX_POSITIONS + 2, "llama": 0}[shape.arch]  # bert: + 2 token types
    learned = shape.position_table
    positions = positions if learned else 0
    lookups = 1 + learned + (shape.arch == "bert")
    ops = [OpSpec("embedding", "embedding", "pre", flops=(lookups - 1) * T * h,
                  bytes=(A * (lookups + 1) + mask * (shape.arch != "bert")) * T * h,
                  params=V * h / t + positions * h,
                  saved_bytes=mask * T * h * (shape.arch != "bert"))]
    if shape.arch == "bert":  # embedding LayerNorm, then dropout
        ops.append(norm("embed_norm", T, "pre"))
        ops.append(OpSpec("embed_dropout", "elementwise", "pre", flops=T * h,
                          bytes=(2 * A + mask) * T * h, saved_bytes=mask * T * h))
    return ops


def _post_ops(shape, b, t, T, R, A, matmul, norm):
    h, V = shape.hidden, shape.vocab
    if shape.arch == "vit":  # final norm on every token, classifier on the class token
        return [norm("final_norm", T, "post"),
                matmul("head", b, V, h, V * h + V, A * b * h, "post"),
                cross_entropy_op("loss", b * V, A, row_length=V)]
    if shape.arch == "txl":
        return _adaptive_softmax(shape, t, T, A, matmul)
    decoder_bias = V / t if shape.arch == "bert" else 0
    logits_params = (0 if shape.tied_embeddings else V * h / t) + decoder_bias
    P = T * shape.logit_positions / shape.seq_len  # tokens whose logits are computed (BERT: the masked)
    if shape.arch == "bert":  # MLM transform (dense, GELU, LayerNorm), tied decoder; pooler + NSP
        ops = [matmul("mlm_dense", P, h, h, h * h + h, A * P * h, "post"),
               OpSpec("mlm_act", "elementwise", "post", flops=GELU_FLOPS * P * h, bytes=2 * A * P * h,
                      saved_bytes=A * P * h),
               norm("mlm_norm", P, "post"),
               matmul("pooler", b, h, h, h * h + h, A * b * h, "post"),
               matmul("nsp", b, 2, h, 2 * h + 2, A * b * h, "post")]
    else:
        ops = [norm("final_norm", R, "post")]
    return ops + [matmul("logits", P, V / t, h, logits_params, A * P * h, "post"),
                  cross_entropy_op("loss", P * V / t, A, row_length=V / t)]


def _adaptive_clusters(shape: TransformerShape) -> list[tuple[int, int]]:
    """(words, width) of each adaptive cluster: the head, then one per tail (Baevski & Auli 2019)."""
    bounds = [0, *shape.adaptive_cutoffs, shape.vocab]
    return [(hi - lo, shape.hidden // shape.adaptive_div ** i) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def _adaptive_embedding(shape, t, T, A, mask):
    """Adaptive input: each cluster's table at its width, projected to ``hidden`` when the widths
    differ (``adaptive_div > 1``: every cluster has a projection); one lookup, scale and dropout."""
    h = shape.hidden
    clusters = _adaptive_clusters(shape)
    params = sum(words * width for words, width in clusters)
    if shape.adaptive_div > 1:
        params += sum(h * width for _, width in clusters)
    return OpSpec("embedding", "embedding", "pre", flops=T * h, bytes=(2 * A + mask) * T * h,
                  params=params / t, saved_bytes=mask * T * h)


def _adaptive_softmax(shape, t, T, A, matmul):
    """Head-cluster logits for every token (module docstring; tails not counted).  Tied to the
    embedding: its own parameters are the per-word biases, the cluster vectors and, with
    ``adaptive_div > 1``, the untied head projection (DeepLearningExamples ``tie_projs``)."""
    h, V = shape.hidden, shape.vocab
    tails = len(shape.adaptive_cutoffs)
    head = (shape.adaptive_cutoffs[0] if tails else V) + tails
    params = V + tails * (h + 1)
    ops = []
    if shape.adaptive_div > 1:
        ops.append(matmul("softmax_proj", T, h, h, h * h, A * T * h, "post"))
    return ops + [matmul("logits", T, head / t, h, params / t, A * T * h, "post"), cross_entropy_op("loss", T * head / t, A, row_length=head / t)]




def _explain_invalid(shape: TransformerShape, t, c):
    for value in np.unique(t):
        if shape.heads % value or shape.ffn_hidden % value:
            raise ValueError(f"tp={value} must divide heads ({shape.heads}) and ffn_hidden ({shape.ffn_hidden})")
        if shape.kv_heads % value and value % shape.kv_heads:
            raise ValueError(f"tp={value} and kv_heads ({shape.kv_heads}) must divide one another")
    for value in np.unique(c):
        if shape.seq_len % value:
            raise ValueError(f"cp={value} must divide seq_len ({shape.seq_len})")

