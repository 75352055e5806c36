"""Activation recomputation (activation checkpointing): memory kept versus forward work redone.

Every strategy is described by three numbers per micro-batch and per pipeline stage of
``layers`` identical layers, computed from three per-layer activation sizes the caller supplies
(``perfmodel.models.memory.transformer_layer_activation_bytes`` for transformers):

``layer_bytes``     activations one layer keeps with no recomputation;
``selective_bytes`` what it keeps when only the attention core (scores, softmax, dropout, AV) is
                    recomputed (Korthikanti et al. 2022, Sec. 4.2);
``input_bytes``     what a fully recomputed layer keeps: its input (Korthikanti Table 2, "full").

* ``kept_bytes``: activations held between a micro-batch's forward and its backward (what the
  other in-flight micro-batches of a pipeline hold);
* ``working_bytes``: the extra needed while one micro-batch runs its backward and rematerialises
  what it dropped (peak of that micro-batch = kept + working);
* ``extra_forward_fraction``: forward FLOPs of the stage's layers run a second time, as a
  fraction of those layers' forward FLOPs.

Strategies (``STRATEGIES``):

``none``      keep everything.
``selective`` recompute the attention core of every layer (Korthikanti Sec. 4.2; with flash
              attention the kernel already recomputes it, so the caller passes
              ``attention_fraction=0`` and equal ``layer_bytes`` / ``selective_bytes``).
              Working set: one layer's attention core.
``full``      every layer keeps only its input and is rerun in the backward (Megatron-LM
              ``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``;
              Chen et al. 2016 with one layer per segment).  Working set: one layer.
``every_k``   one layer in every ``k`` keeps all its activations, the other ``k - 1`` are fully
              recomputed: ``ceil(layers / k)`` layers kept, the rest recomputed.  The recomputed
              layers are the *first* ones of the stage (Megatron-LM ``--recompute-method block``),
              so by the time their backward runs the kept layers' activations are freed and the
              working set adds nothing to the peak.  ``k = 1`` is ``none``.
``sqrt``      Chen et al. 2016, Sec. 4.1: segments of ``g = round(sqrt(layers))`` layers keep only
              their input and are rerun in the backward (all segments, as in Megatron-LM
              ``--recompute-method uniform --recompute-num-layers g``): kept ``ceil(layers/g)``
              inputs; working set one segment, ``g * layer_bytes - input_bytes`` (an upper bound:
              exact when ``g`` divides ``layers``); one extra forward pass.

All functions are pure and broadcast over numpy arrays (``strategy`` is one string).  The
plan-level helpers :func:`perfmodel.plans.recompute_options` and
:func:`perfmodel.plans.best_recompute` price each strategy with the memory model.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import checks
from perfmodel.vocabulary import RECOMPUTE_STRATEGIES

__all__ = ["STRATEGIES", "check_strategy", "segment_layers", "recomputed_layers", "kept_bytes",
           "working_bytes", "extra_forward_fraction", "recompute_forward_share", "recompute_candidates"]

STRATEGIES = RECOMPUTE_STRATEGIES


def check_strategy(strategy: str, every=1) -> None:
    """Raise a clear ValueError for an unknown strategy or a bad ``every`` (k of every_k)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"recompute strategy {strategy!r} is unknown; allowed: {', '.join(STRATEGIES)}")
    every = np.asarray(every)
    if strategy == "every_k" and (np.any(every < 1) or np.any(every != np.floor(every))):
        raise ValueError(f"recompute_every must be an integer >= 1 for every_k, got {every.tolist()}")


def segment_layers(layers):
    """Layers per segment for sqrt checkpointing: ``max(1, round(sqrt(layers)))`` (Chen 2016, Sec. 4.1)."""
    return np.maximum(1.0, np.round(np.sqrt(checks.count("layers", layers))))


def recomputed_layers(strategy: str, layers, every=1):
    """Number of layers whose whole forward is rerun in the backward pass."""
    check_strategy(strategy, every)
    layers = checks.count("layers", layers)
    if strategy in ("none", "selective"):
        return np.zeros_like(layers)
    if strategy == "every_k":
        return layers - np.ceil(layers / every)
    return layers  # full, sqrt: every layer sits in a recomputed segment


def kept_bytes(strategy: str, layers, layer_bytes, selective_bytes, input_bytes, every=1):
    """Activation bytes one micro-batch keeps for its backward, over ``layers`` layers."""
    check_strategy(strategy, every)
    layers = checks.count("layers", layers)
    if strategy == "none":
        return layers * layer_bytes
    if strategy == "selective":
        return layers * selective_bytes
    if strategy == "full":
        return layers * input_bytes
    if strategy == "every_k":
        kept_layers = np.ceil(layers / every)
        return kept_layers * layer_bytes + (layers - kept_layers) * input_bytes
    return np.ceil(layers / segment_layers(layers)) * input_bytes  # sqrt


def working_bytes(strategy: str, layers, layer_bytes, selective_bytes, input_bytes, every=1):
    """Extra bytes live while one micro-batch's backward rematerialises what it dropped."""
    check_strategy(strategy, every)
    layers = checks.count("layers", layers)
    zero = np.zeros(np.broadcast(layers, layer_bytes, selective_bytes, input_bytes).shape)
    if strategy in ("none", "every_k"):
        return zero
    if strategy == "selective":
        return zero + (layer_bytes - selective_bytes)
    if strategy == "full":
        return zero + (layer_bytes - input_bytes)
    return zero + segment_layers(layers) * layer_bytes - input_bytes  # sqrt


def extra_forward_fraction(strategy: str, layers, attention_fraction=0.0, every=1):
    """Forward FLOPs rerun, as a fraction of the layers' forward FLOPs.

    ``attention_fraction`` is the share of one layer's forward FLOPs in the attention core
    (scores and AV: 4*b*s^2*h of 24*b*s*h^2 + 4*b*s^2*h for a GPT layer, Narayanan et al. 2021
    Sec. 5.1), used by ``selective``; Korthikanti Sec. 5 quotes 2.7 % for GPT-3 175B at s = 2048.
    """
    check_strategy(strategy, every)
    layers = checks.count("layers", layers)
    if strategy == "selective":
        return np.zeros_like(layers) + attention_fraction
    return recomputed_layers(strategy, layers, every) / layers


def recompute_forward_share(strategy, codes=None, layers=None, every=1):
    """:func:`extra_forward_fraction` for arrays of strategy codes (``codes`` maps names to codes;
    default: the index in :data:`STRATEGIES`), for the layer-level strategies only: ``selective``
    gives 0 here (its attention-core work is priced by the caller from the attention ops).
    ``layers`` (per pipeline stage) and ``every`` are needed when any plan uses ``every_k``."""
    codes = codes or {name: index for index, name in enumerate(STRATEGIES)}
    strategy = np.asarray(strategy)
    share = np.where((strategy == codes["full"]) | (strategy == codes["sqrt"]), 1.0, 0.0)
    every_k = strategy == codes["every_k"]
    if np.any(every_k):
        if layers is None:
            raise ValueError("recompute 'every_k' needs the layers per stage and recompute_every "
                             "(recompute_forward_share(..., layers=, every=))")
        every = np.maximum(every, 1)
        share = np.where(every_k, extra_forward_fraction("every_k", layers, every=every), share)
    return share


def recompute_candidates(workload, layers_per_stage: int, every: int | None = None) -> list[tuple[str, int]]:
    """(strategy, k) pairs worth pricing: CNNs none and sqrt; transformers none, selective,
    every_k for k = 2, 4, 8, ... below the layers per stage (and ``every``), sqrt, full."""
    if workload.family != "transformer":
        return [("none", 1), ("sqrt", 1)]
    ks = {2**i for i in range(1, 64) if 2**i < layers_per_stage} | ({every} if every and every > 1 else set())
    return [("none", 1), ("selective", 1), *[("every_k", k) for k in sorted(ks)], ("sqrt", 1), ("full", 1)]
