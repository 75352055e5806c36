"""Pipeline stages: how many layers each stage holds when the stages do not divide the layers, and
how a framework that places stages by compute cost (nanotron) splits them."""

from __future__ import annotations

import numpy as np

__all__ = ["stage_layers", "cost_balanced_stages", "head_cost_in_layers"]


def stage_layers(layers: int, pp, vp=1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layers of the (first, middle, last) pipeline stages when ``pp`` stages of ``vp`` model
    chunks each (interleaving, Narayanan et al. 2021, Sec. 2.2: stage s holds chunks s, s + pp, ...)
    share ``layers``.

    Every chunk holds ``ceil(layers / (pp vp))`` layers, except that the first and last chunks
    give up the ``pp vp ceil(layers / (pp vp)) - layers`` layers too many (the first the larger
    half), as Megatron-LM's ``decoder_first_pipeline_num_layers`` /
    ``decoder_last_pipeline_num_layers`` (and its ``account_for_embedding_in_pipeline_split`` /
    ``account_for_loss_in_pipeline_split``, which count the embedding and the loss as a layer of the
    first and last chunk) and Llama 3 (Dubey et al. 2024, Sec. 3.3.2: one layer less on the first
    and last of 16 stages for 126 layers) do, so those chunks also fit the embedding and the output
    layer; each keeps at least one layer, unless there are more chunks than layers (at most two
    more: the first and last chunks then hold only the embedding and the loss, as Megatron-Bridge
    runs 126 layers on PP 16 x VP 8).  The middle chunk count is the largest middle chunk's
    when the remaining layers are spread evenly.  The first stage holds the first chunk and
    ``vp - 1`` middle ones, the last stage the last chunk and ``vp - 1`` middle ones, a middle stage
    ``vp`` middle ones (0 when pp < 3); pp = 1 is one stage of ``layers``; needs pp vp <= layers + 2.
    With ``vp`` 1 the chunks are the stages.
    """
    pp = np.asarray(pp, dtype=float)
    vp = np.asarray(vp, dtype=float)
    chunks = pp * vp
    full = np.ceil(layers / chunks)
    extra = chunks * full - layers
    floor = np.where(chunks <= layers, 1.0, 0.0)  # more chunks than layers: the end chunks hold none
    first_chunk = np.maximum(full - np.ceil(extra / 2.0), floor)
    last_chunk = np.maximum(full - np.floor(extra / 2.0), floor)
    middle_chunk = np.where(chunks > 2, np.ceil((layers - first_chunk - last_chunk) / np.maximum(chunks - 2.0, 1.0)),
                            0.0)
    first = np.where(pp > 1, first_chunk + (vp - 1.0) * middle_chunk, float(layers))
    last = np.where(pp > 1, last_chunk + (vp - 1.0) * middle_chunk, float(layers))
    middle = np.where(pp > 2, vp * middle_chunk, 0.0)
    return first, middle, last


def head_cost_in_layers(shape) -> float:
    """The output layer's cost in units of one transformer layer's, as nanotron weighs them to place
    its pipeline stages (``get_block_compute_costs`` of its models, huggingface/nanotron
    ``src/nanotron/models/llama.py``): a decoder layer ``4 heads d_head h + 3 ffn h`` (``2 ffn h`` for a
    two-matrix GELU MLP), the LM head ``vocab h``; embedding, norms and loss cost nothing."""
    mlp_matrices = 3 if shape.ffn_act == "swiglu" else 2
    layer = 4 * shape.heads * shape.head_dim * shape.hidden + mlp_matrices * shape.ffn_hidden * shape.hidden
    return shape.vocab * shape.hidden / layer


def cost_balanced_stages(layers: int, head_cost: float, pp: int) -> list[tuple[int, bool, bool]]:
    """``(layers, holds the embedding, holds the output layer)`` of each of ``pp`` stages when the
    blocks (embedding, ``layers`` layers of cost 1, output layer of cost ``head_cost``) are placed
    in order by cumulative cost, as nanotron's ``build_model`` does (huggingface/nanotron
    ``src/nanotron/models/base.py`` @ 01de8d9): a stage takes blocks until their cumulative cost
    passes ``total x (stage + 1) / pp``; the block that passes it stays on that stage.  A heavy
    output layer (a large vocabulary) then gets a stage with fewer layers, or none."""
    cumulative = np.cumsum([0.0] + [1.0] * layers + [float(head_cost)])
    total = cumulative[-1]
    stages = [[0, False, False] for _ in range(pp)]
    rank = 0
    for block, cost in enumerate(cumulative):
        if block == 0:
            stages[rank][1] = True
        elif block == layers + 1:
            stages[rank][2] = True
        else:
            stages[rank][0] += 1
        if cost > total * (rank + 1) / pp and rank < pp - 1:
            rank += 1
    return [tuple(stage) for stage in stages]
