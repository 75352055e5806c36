"""One training step of a one-layer GPT: the cost of a transformer layer at a given shape.

The model: token embedding, one pre-norm layer (``x + proj(attn(qkv(ln1(x))))`` then
``x + fc2(gelu(fc1(ln2(x))))``, causal ``scaled_dot_product_attention``, flash attention where
torch has it, biases on, MLP inner size ``ffn_hidden`` = 4 x hidden), final LayerNorm, an untied
``vocab``-way output layer and cross-entropy loss; the step is forward, backward and an AdamW
update, so the row is a complete ``train`` row (``layers`` = 1) that the model can predict.
Precision ``bf16``/``fp16`` is autocast over fp32 weights (mixed precision, as the measurement
format's ``precision`` means); ``fp32`` and ``tf32`` run plain fp32 (TF32 matmuls for ``tf32``).
Metric ``step_time_s``.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F
from torch import nn

from perfmodel.bench import DTYPES, Context, measure, method_note

GPU_SHAPES = [  # (hidden, heads, seq_len, micro_batch, vocab, precision)
    (2048, 16, 2048, 4, 32000, "bf16"), (4096, 32, 2048, 2, 32000, "bf16"),
    (4096, 32, 4096, 1, 32000, "bf16"), (8192, 64, 2048, 1, 32000, "bf16"),
    (4096, 32, 2048, 2, 32000, "fp16"),
]
GPU_QUICK_SHAPES = [(1024, 16, 1024, 2, 32000, "bf16")]
CPU_SHAPES = [(128, 4, 64, 2, 256, "fp32")]
CPU_QUICK_SHAPES = [(64, 4, 32, 2, 128, "fp32")]


class OneLayerGPT(nn.Module):
    """Embedding, one pre-norm transformer layer, final LayerNorm, output layer."""

    def __init__(self, hidden: int, heads: int, ffn_hidden: int, vocab: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} must be a multiple of heads {heads}")
        self.heads = heads
        self.embedding = nn.Embedding(vocab, hidden)
        self.ln1, self.ln2, self.ln_final = (nn.LayerNorm(hidden) for _ in range(3))
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, ffn_hidden), nn.Linear(ffn_hidden, hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(hidden, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, hidden))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(self.ln_final(x))


def layer(ctx: Context, hidden: int, heads: int, seq_len: int, micro_batch: int, vocab: int,
          precision: str) -> dict:
    """Measure one training step of a one-layer GPT and record a ``step_time_s`` row."""
    if precision not in DTYPES:
        raise ValueError(f"precision {precision!r} not supported by the harness; "
                         f"allowed: {', '.join(DTYPES)}")
    ffn_hidden = 4 * hidden
    model = OneLayerGPT(hidden, heads, ffn_hidden, vocab).to(ctx.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4,
                                  fused=ctx.device.type == "cuda")
    tokens = torch.randint(0, vocab, (micro_batch, seq_len + 1), device=ctx.device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    mixed = precision in ("bf16", "fp16")
    fp16 = precision == "fp16"  # loss scaling, as fp16 training does
    scaler = (torch.amp.GradScaler(ctx.device.type, enabled=fp16) if hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(enabled=fp16))  # torch < 2.3

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=DTYPES[precision], enabled=mixed):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        seconds = measure(ctx, step)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return ctx.row(id=f"bench-layer-{hidden}h-{heads}a-{seq_len}s-{micro_batch}b-{precision}",
                   kind="train", num_gpus=1, model="transformer", layers=1, hidden=hidden,
                   heads=heads, ffn_hidden=ffn_hidden, ffn_act="gelu", seq_len=seq_len,
                   vocab=vocab, precision=precision, tp=1, pp=1, dp=1, micro_batch=micro_batch,
                   global_batch=micro_batch, recompute="none", zero=0,
                   framework=f"PyTorch {torch.__version__} (plain modules, AdamW)",
                   metric="step_time_s", value=seconds,
                   notes=f"one-layer GPT training step: embedding, pre-norm layer with causal "
                         f"SDPA, untied output layer, cross-entropy, backward, AdamW"
                         f"{' (fused)' if ctx.device.type == 'cuda' else ''}; {method_note(ctx)}")


def run(ctx: Context, quick: bool = False) -> None:
    shapes = ctx.choose(quick, GPU_SHAPES, GPU_QUICK_SHAPES, CPU_SHAPES, CPU_QUICK_SHAPES)
    for shape in shapes:
        try:
            layer(ctx, *shape)
        except torch.cuda.OutOfMemoryError:  # a smaller GPU: skip the shape, keep the others
            print(f"perfmodel.bench: layer shape {shape} does not fit in memory, skipped",
                  file=sys.stderr)
            torch.cuda.empty_cache()
