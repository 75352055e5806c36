"""GPU memory per device: model state, activations, buffers; does a plan fit?

Pure functions over floats or numpy arrays that broadcast (strings such as ``precision`` are
one value), plus :func:`plan_memory`, which assembles them for a workload and a scenario plan.

Sources:
* Model state: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
  Parameter Models", Sec. 3.1 and Fig. 1 (mixed-precision Adam: 2 + 2 + 12 = 16 bytes/param;
  ZeRO stage 1 / 2 / 3 shards optimizer state / + gradients / + weights over the data-parallel
  group).
* Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", Sec. 4 and Table 2 (per layer, 16-bit activations, 1-byte dropout masks), Sec. 4.2.3
  (pipeline in-flight micro-batches), Sec. 4.3 (embedding dropout, output layer, loss).
* Recomputation strategies: :mod:`perfmodel.models.recompute`.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import checks
from perfmodel.models import recompute as rc
from perfmodel.models.stages import stage_layers
from perfmodel.workloads.ops import unique_plan_shapes
from perfmodel.units import format_memory
from perfmodel.vocabulary import ACTIVATION_BYTES, FULL_PRECISIONS, MIXED_PRECISIONS, OPTIMIZERS

__all__ = ["MIXED_PRECISIONS", "FULL_PRECISIONS", "OPTIMIZERS", "state_bytes_per_param",
           "model_state_bytes", "activation_bytes_per_value", "transformer_layer_activation_bytes",
           "transformer_activation_bytes", "transformer_recompute_working_bytes",
           "pipeline_inflight_microbatches", "embedding_dropout_bytes", "output_layer_bytes",
           "cnn_activation_bytes", "cnn_sqrt_activation_bytes", "gpu_capacity_bytes",
           "memory_per_gpu", "memory_reasons", "COMPONENTS", "plan_memory", "zero3_gathered_bytes"]


_STATE = {  # (weights, gradients, optimizer) bytes per parameter
    ("mixed", "adam"): (2.0, 2.0, 12.0),  # fp32 master + m + v (ZeRO Sec. 3.1)
    ("mixed", "sgd"): (2.0, 2.0, 8.0),    # fp32 master + momentum
    ("full", "adam"): (4.0, 4.0, 8.0),    # m + v
    ("full", "sgd"): (4.0, 4.0, 4.0),     # momentum
}


def _check_divides(name, value, divisor_name, divisor):
    if np.any(np.asarray(value) % np.asarray(divisor) != 0):
        raise ValueError(f"{divisor_name}={np.asarray(divisor).tolist()} does not divide "
                         f"{name}={np.asarray(value).tolist()}; choose {divisor_name} dividing {name}")


def state_bytes_per_param(precision: str = "bf16", optimizer: str = "adam") -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter.

    Mixed precision (fp16/bf16) with Adam: 2 + 2 + 12 = 16 (Rajbhandari et al. 2020, Sec. 3.1);
    with SGD + momentum 2 + 2 + 8 (fp32 master + momentum).  fp32/tf32 training: Adam 4 + 4 + 8,
    SGD 4 + 4 + 4.  fp8 training (Transformer Engine) keeps bf16 weights and fp32 master/optimizer
    state, so it is counted as bf16 mixed precision (its transient fp8 weight copies are ignored).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer {optimizer!r} is unknown; allowed: {', '.join(OPTIMIZERS)}")
    if precision in MIXED_PRECISIONS:
        return _STATE[("mixed", optimizer)]
    if precision in FULL_PRECISIONS:
        return _STATE[("full", optimizer)]
    raise ValueError(f"precision {precision!r} is unknown; allowed: "
                     f"{', '.join(MIXED_PRECISIONS + FULL_PRECISIONS)}")


def model_state_bytes(params, dp=1, zero=0, precision="bf16", optimizer="adam") -> dict:
    """Weights, gradients and optimizer state per GPU, in bytes.

    ``params`` are the parameters this GPU holds after tensor/pipeline parallelism.  ZeRO stage
    1 divides the optimizer state by ``dp``, stage 2 also the gradients, stage 3 also the weights
    (Rajbhandari et al. 2020, Fig. 1: 7.5B parameters on 64 GPUs, 120 GB -> 31.4 / 16.6 / 1.9 GB).
    """
    params = checks.nonnegative("params", params)
    dp = checks.count("dp", dp)
    zero = np.asarray(zero)
    if np.any(~np.isin(zero, (0, 1, 2, 3))):
        raise ValueError(f"zero stage must be 0, 1, 2 or 3, got {zero.tolist()}")
    weights, gradients, optimizer_state = state_bytes_per_param(precision, optimizer)
    return {
        "weights": params * weights / np.where(zero >= 3, dp, 1.0),
        "gradients": params * gradients / np.where(zero >= 2, dp, 1.0),
        "optimizer": params * optimizer_state / np.where(zero >= 1, dp, 1.0),
    }


def activation_bytes_per_value(precision: str) -> float:
    """Bytes per stored activation value: 2 for fp16/bf16 (and fp8 training, whose saved
    activations are mostly bf16), 4 for fp32/tf32."""
    if precision in ACTIVATION_BYTES:
        return float(ACTIVATION_BYTES[precision])
    raise ValueError(f"precision {precision!r} is unknown; allowed: {', '.join(MIXED_PRECISIONS + FULL_PRECISIONS)}")


def transformer_layer_activation_bytes(seq_len, micro_batch, hidden, heads, tp=1, cp=1,
                                       sequence_parallel=False, flash_attention=False,
                                       bytes_per_value=2.0) -> dict:
    """Activation bytes of ONE transformer layer for one micro-batch, per GPU.

    Korthikanti et al. 2022, Sec. 4.1-4.2 and Table 2 (s = sequence, b = micro-batch,
    h = hidden, a = heads, t = tensor parallel):

    * ``layer`` (no recomputation): ``s*b*h*(10/t_sp + 24/t + 5*a*s/(h*t))`` where ``t_sp = t``
      with sequence parallelism and 1 without.  That is ``sbh(34 + 5as/h)`` with no parallelism,
      ``sbh(10 + 24/t + 5as/(ht))`` with TP, ``sbh/t (34 + 5as/h)`` with TP + SP.  The 10
      ``sbh`` are the layer norms and dropouts that plain TP replicates; the 24 the sharded
      GEMM inputs; ``5as^2b`` the score matrix, softmax output and dropout mask and output.
    * ``selective``: the ``5as/h`` term dropped (attention core recomputed, Sec. 4.2):
      ``sbh(10 + 24/t)``, ``34 sbh/t`` with SP.  Flash attention never stores the score matrix,
      so with ``flash_attention`` ``layer`` equals ``selective`` (its log-sum-exp, 4 bytes per
      head and token, is neglected).
    * ``input``: what a fully recomputed layer keeps, its input ``2sbh`` (``/t`` with SP).

    Context parallelism ``cp`` splits the sequence: every term is divided by ``cp`` (each GPU
    holds s/cp queries against all s keys).  Values are for 16-bit activations and scale with
    ``bytes_per_value / 2`` (dropout masks, 1 byte in the paper, are scaled too).
    """
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("hidden", hidden),
                        ("heads", heads), ("tp", tp), ("cp", cp)):
        checks.count(name, value)
    bytes_per_value = np.asarray(bytes_per_value, dtype=float)
    if np.any(bytes_per_value <= 0):
        raise ValueError(f"bytes_per_value must be > 0, got {bytes_per_value.tolist()}")
    _check_divides("heads", heads, "tp", tp)
    t = np.asarray(tp, dtype=float)
    t_sp = np.where(sequence_parallel, t, 1.0)
    sbh = np.asarray(seq_len, dtype=float) / cp * micro_batch * hidden * bytes_per_value / 2.0
    scores = np.where(flash_attention, 0.0, 5.0 * heads * seq_len / (hidden * t))
    selective = sbh * (10.0 / t_sp + 24.0 / t)
    return {"layer": selective + sbh * scores, "selective": selective, "input": 2.0 * sbh / t_sp}


def transformer_activation_bytes(seq_len, micro_batch, hidden, heads, layers, tp=1, cp=1,
                                 sequence_parallel=False, recompute="none", recompute_every=1,
                                 flash_attention=False, bytes_per_value=2.0):
    """Activation bytes one micro-batch keeps over ``layers`` layers, per GPU.

    ``none``, ``selective`` and ``full`` are exactly Korthikanti et al. 2022 Table 2 times
    ``layers`` (see :func:`transformer_layer_activation_bytes`); ``every_k`` and ``sqrt`` as in
    :mod:`perfmodel.models.recompute`.  The extra working set of a backward that recomputes is
    :func:`transformer_recompute_working_bytes`.
    """
    per_layer = transformer_layer_activation_bytes(seq_len, micro_batch, hidden, heads, tp, cp,
                                                   sequence_parallel, flash_attention, bytes_per_value)
    return rc.kept_bytes(recompute, layers, per_layer["layer"], per_layer["selective"],
                         per_layer["input"], recompute_every)


def transformer_recompute_working_bytes(seq_len, micro_batch, hidden, heads, layers, tp=1, cp=1,
                                        sequence_parallel=False, recompute="none", recompute_every=1,
                                        flash_attention=False, bytes_per_value=2.0):
    """Extra bytes while one micro-batch's backward rematerialises dropped activations
    (one layer for ``full``, one attention core for ``selective``, one segment for ``sqrt``)."""
    per_layer = transformer_layer_activation_bytes(seq_len, micro_batch, hidden, heads, tp, cp,
                                                   sequence_parallel, flash_attention, bytes_per_value)
    return rc.working_bytes(recompute, layers, per_layer["layer"], per_layer["selective"],
                            per_layer["input"], recompute_every)


def pipeline_inflight_microbatches(pp, num_microbatches, vp=1, stage=0):
    """Micro-batches whose activations pipeline stage ``stage`` holds at once, counted in units
    of one stage's layers (``layers / pp``).

    1F1B (PipeDream-Flush; Narayanan et al. 2021 Sec. 2.2.1): stage ``r`` holds
    ``min(pp - r, m)``, so the first stage holds ``pp``.  Interleaved with ``vp`` model chunks
    per GPU (Sec. 2.2.2; Megatron-LM schedules.py warm-up ``2(pp - r - 1) + (vp - 1) pp`` chunks,
    plus the one in flight): ``(2(pp - r - 1) + (vp - 1) pp + 1) / vp``, which for the first stage
    is ``pp (1 + (pp - 1)/(pp vp))``, Korthikanti et al. 2022 Sec. 4.2.3.  Never more than the
    ``m`` micro-batches of the step (``num_microbatches`` may be ``inf`` when unknown).
    """
    pp = checks.count("pp", pp)
    vp = checks.count("vp", vp)
    stage = np.asarray(stage, dtype=float)
    if np.any(stage < 0) or np.any(stage >= pp):
        raise ValueError(f"stage must be in [0, pp), got stage={stage.tolist()} with pp={pp.tolist()}")
    m = np.asarray(num_microbatches, dtype=float)
    if np.any(m < 1):
        raise ValueError(f"num_microbatches must be >= 1, got {m.tolist()}")
    interleaved = (2.0 * (pp - stage - 1.0) + (vp - 1.0) * pp + 1.0) / vp
    return np.minimum(np.where(vp > 1, interleaved, pp - stage), m)


def embedding_dropout_bytes(seq_len, micro_batch, hidden, tp=1, cp=1, sequence_parallel=False):
    """Input-embedding dropout mask of one micro-batch on the first stage: ``sbh`` bytes (1-byte
    mask), ``/t`` with sequence parallelism (Korthikanti et al. 2022, Sec. 4.3), ``/cp``."""
    t_sp = np.where(sequence_parallel, np.asarray(tp, dtype=float), 1.0)
    return np.asarray(seq_len, dtype=float) / cp * micro_batch * hidden / t_sp


def output_layer_bytes(seq_len, micro_batch, hidden, vocab, tp=1, cp=1, sequence_parallel=False,
                       bytes_per_value=2.0, logit_positions=None):
    """Last stage, one micro-batch: final layer-norm input and output-projection input
    (``2sbh`` each, ``/t`` with SP, at ``bytes_per_value``) plus the logits kept by the
    cross-entropy loss in fp32, ``4 s b V / t`` (vocab-parallel; Korthikanti et al. 2022 Sec. 4.3:
    ``4sbh/t (1 + V/h)`` in all with SP).  ``/cp``.  ``logit_positions``: positions per sequence
    with logits (None: all ``seq_len``; BERT: its masked positions), which scale the loss term."""
    t = np.asarray(tp, dtype=float)
    t_sp = np.where(sequence_parallel, t, 1.0)
    sb = np.asarray(seq_len, dtype=float) / cp * micro_batch
    share = 1.0 if logit_positions is None else np.divide(logit_positions, seq_len)
    return 2.0 * sb * hidden * bytes_per_value / t_sp + 4.0 * sb * share * vocab / t


def cnn_activation_bytes(table):
    """Activations one micro-batch of a CNN keeps: the sum of ``saved_bytes x repeat`` over the
    op table (per GPU; shape ``table.plan_shape``)."""
    return table.total("saved_bytes")


def cnn_sqrt_activation_bytes(saved_bytes):
    """Chen et al. 2016 Sec. 4.1 on a chain of ops (axis 0, in execution order): segments of
    ``g = round(sqrt(n))`` ops keep only their input (taken as the saved bytes of the segment's
    first op); the backward reruns one segment at a time.  Returns ``(kept, peak)`` per
    micro-batch: kept between forward and backward, and the peak during the backward,
    ``max_j (inputs of segments before j + all saved bytes of segment j)``."""
    saved = np.asarray(saved_bytes, dtype=float)
    n = saved.shape[0]
    if n == 0:
        raise ValueError("cnn_sqrt_activation_bytes needs at least one op")
    g = max(1, int(round(np.sqrt(n))))
    starts = np.arange(0, n, g)
    inputs = saved[starts]
    segments = np.add.reduceat(saved, starts, axis=0)
    before = np.cumsum(inputs, axis=0) - inputs
    return inputs.sum(axis=0), (before + segments).max(axis=0)


def gpu_capacity_bytes(memory, mig_slices=1):
    """Memory one training process can use: the GPU's memory, or its share on a MIG slice
    (``memory / mig_slices``; NVIDIA MIG user guide: memory is partitioned with the SMs)."""
    memory = checks.nonnegative("memory", memory)
    return memory / checks.count("mig_slices", mig_slices)


def zero3_gathered_bytes(params, units, zero, dp, precision, profile):
    """ZeRO-3/FSDP buffers of gathered units (Zhao et al. 2023, PyTorch FSDP, Sec. 3.3): the unit
    computing and ``zero3_prefetch_units`` prefetched ones hold full 16-bit (or fp32) parameters,
    and one unit's unsharded gradients (``gradient_reduce_bytes`` each) wait for their
    reduce-scatter.  ``params`` per GPU over ``units`` units (layers); 0 for ZeRO < 3 and for one
    data-parallel rank (nothing is sharded, nothing gathered)."""
    unit_params = np.asarray(params, dtype=float) / np.maximum(units, 1.0)
    held = (1.0 + profile.get("zero3_prefetch_units")) * activation_bytes_per_value(precision)
    sharded = (np.asarray(zero) == 3) & (np.asarray(dp) > 1)
    return np.where(sharded, unit_params * (held + profile.get("gradient_reduce_bytes")), 0.0)


def memory_per_gpu(params, activations, capacity, *, dp=1, zero=0, precision="bf16", optimizer="adam",
                   logits=0.0, bucket_bytes, framework_bytes, fragmentation, gathered_bytes=0.0) -> dict:
    """Memory per GPU by component, in bytes, and whether it fits in ``capacity``.

    ``params``: parameters on this GPU after TP/PP; ``activations``: activation bytes with the
    in-flight micro-batches and recompute working set (see :func:`plan_memory`); ``logits``:
    output-layer/loss buffers.  ``bucket_bytes``, ``framework_bytes``, ``fragmentation`` are the
    profile's ``ddp_bucket_bytes``, ``framework_memory_bytes``, ``allocator_fragmentation``.

    Components: weights, gradients, optimizer, activations, logits, comm_buckets (two DDP buckets
    when ``dp > 1``, plus ``gathered_bytes``: ZeRO-3's gathered units, :func:`zero3_gathered_bytes`),
    framework (CUDA context and workspaces), allocator (fragmentation x all tensor bytes); ``total``
    is their sum, ``headroom = capacity - total`` (negative = shortfall), ``fits = headroom >= 0``.
    ``reasons`` (scalar inputs only; ``None`` for arrays) lists every reason it does not fit, with
    numbers.
    """
    activations = checks.nonnegative("activations", activations)
    logits = checks.nonnegative("logits", logits)
    capacity = checks.nonnegative("capacity", capacity)
    fragmentation = checks.nonnegative("fragmentation", fragmentation)
    result = model_state_bytes(params, dp, zero, precision, optimizer)
    result["activations"] = activations + 0.0
    result["logits"] = logits + 0.0
    result["comm_buckets"] = np.where(np.asarray(dp) > 1, 2.0 * bucket_bytes, 0.0) + checks.nonnegative(
        "gathered_bytes", gathered_bytes)
    tensors = sum(result.values())
    result["framework"] = checks.nonnegative("framework_bytes", framework_bytes) + 0.0
    result["allocator"] = fragmentation * tensors
    result["total"] = tensors + result["framework"] + result["allocator"]
    result["capacity"] = capacity + 0.0
    result["headroom"] = capacity - result["total"]
    result["fits"] = result["headroom"] >= 0
    result["reasons"] = memory_reasons(result) if np.ndim(result["total"]) == 0 else None
    return result


COMPONENTS = ("weights", "gradients", "optimizer", "activations", "logits", "comm_buckets",
              "framework", "allocator")


def memory_reasons(breakdown: dict) -> list[str]:
    """Why one (scalar) memory breakdown does not fit; empty when it fits."""
    capacity = float(breakdown["capacity"])
    total = float(breakdown["total"])
    if total <= capacity:
        return []

    def size(value):
        return format_memory(float(value))

    parts = [f"{name} {size(breakdown[name])}" for name in COMPONENTS if float(breakdown[name]) > 0]
    reasons = [f"needs {size(total)} per GPU ({' + '.join(parts)}) but the GPU has {size(capacity)}: "
               f"short by {size(total - capacity)}"]
    state = sum(float(breakdown[name]) for name in ("weights", "gradients", "optimizer"))
    if state > capacity:
        reasons.append(f"model state alone (weights {size(breakdown['weights'])} + gradients "
                       f"{size(breakdown['gradients'])} + optimizer {size(breakdown['optimizer'])} = "
                       f"{size(state)}) exceeds the {size(capacity)} per GPU")
    for name in COMPONENTS:
        if float(breakdown[name]) > capacity:
            reasons.append(f"{name} alone ({size(breakdown[name])}) exceeds the {size(capacity)} per GPU")
    return reasons


# --- plan level: a workload and arrays of plans --------------------------------------------------

def _by_strategy(codes, function, *args, every):
    """``function(strategy, *args)`` chosen per plan by its strategy code."""
    out = 0.0
    for code, name in enumerate(rc.STRATEGIES):
        chosen = codes == code
        if np.any(chosen):
            out = np.where(chosen, function(name, *args, every=every), out)
    return out


def plan_memory(workload, gpu, plans, *, precision, optimizer, flash_attention, profile,
                params_local=None, saved_bytes=None, capacity=None, with_reasons=None) -> dict:
    """Memory per GPU for arrays of plans: the :func:`memory_per_gpu` breakdown of the pipeline
    stage that needs most, each entry an array over plans.

    ``plans``: equal-length integer arrays ``tp, pp, dp, cp, vp, micro_batch, global_batch,
    recompute`` (codes: index in :data:`perfmodel.models.recompute.STRATEGIES`),
    ``recompute_every, zero, sequence_parallel`` (valid plans; see
    :func:`perfmodel.plans.plan_settings` for one).
    ``capacity`` defaults to ``gpu.memory_capacity`` (what the driver reports, where the catalog has
    it).  ``params_local`` (parameters per GPU) defaults to the
    op table's: first stage embedding + ``layers/pp`` layers, last stage ``layers/pp`` layers +
    output layer (+ the tied embedding copy Megatron keeps there).  ``saved_bytes`` is unused for
    transformers, whose activations follow Korthikanti et al. 2022 for a GPT-style layer (4h GELU
    MLP, multi-head attention); CNNs use the op table's ``saved_bytes`` (``none``) or
    :func:`cnn_sqrt_activation_bytes` (``sqrt``).

    Stages hold :func:`perfmodel.models.stages.stage_layers` layers (uneven when pp does not divide
    them).  First stage: ``pipeline_inflight_microbatches(stage=0)`` micro-batches of kept
    activations and embedding-dropout masks plus one recompute working set; the largest middle
    stage (pp > 2) as the second stage, with its in-flight count; last stage: its own in-flight
    count, the output layer and loss buffers.  Returns the components, ``total``, ``capacity``,
    ``headroom``, ``fits``, ``stage`` ("first"/"middle"/"last") and, when ``with_reasons`` (default: at most
    1000 plans), ``reasons_text``: one list of reasons per plan.
    """
    tp, pp, dp, cp, vp, mb, gb, codes, every, zero, sp = (
        np.atleast_1d(np.asarray(plans[k])) for k in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch",
                                                      "recompute", "recompute_every", "zero", "sequence_parallel"))
    every = np.maximum(every, 1)
    capacity = gpu.memory_capacity if capacity is None else capacity
    m = gb / (mb * dp)
    common = {"dp": dp, "zero": zero, "precision": precision, "optimizer": optimizer,
              "bucket_bytes": profile.get("ddp_bucket_bytes"),
              "framework_bytes": profile.get("framework_memory_bytes"),
              "fragmentation": profile.get("allocator_fragmentation")}
    unique_mb, unique_tp, unique_cp, inverse = unique_plan_shapes(mb, tp, cp)
    table = workload.ops(unique_mb, unique_tp, unique_cp, precision=precision, flash_attention=flash_attention)

    if workload.family != "transformer":
        saved = table.saved_bytes * table.per_op("repeat")
        plain = saved.sum(axis=0)[inverse]
        segmented = cnn_sqrt_activation_bytes(saved)[1][inverse]
        acts = np.where(codes == rc.STRATEGIES.index("sqrt"), segmented, plain)
        params = table.total("params")[inverse] if params_local is None else params_local
        gathered = zero3_gathered_bytes(params, workload.layers, zero, dp, precision, profile)
        result = memory_per_gpu(params, acts, capacity, gathered_bytes=gathered, **common)
        result["stage"] = np.full(len(tp), "first")
        return _with_reasons(result, with_reasons)

    shape = workload.shape
    bpv = activation_bytes_per_value(precision)
    first_layers, middle_layers, last_layers = stage_layers(shape.layers, pp, vp)
    middle_layers = np.where(pp > 2, middle_layers, first_layers)  # no middle stage below pp = 3 (masked below)
    per_layer = transformer_layer_activation_bytes(shape.seq_len, mb, shape.hidden, shape.heads, tp, cp,
                                                   sp > 0, flash_attention, bpv)
    kept, working = {}, {}
    for stage, layers in (("first", first_layers), ("middle", middle_layers), ("last", last_layers)):
        sizes = (layers, per_layer["layer"], per_layer["selective"], per_layer["input"])
        kept[stage] = _by_strategy(codes, rc.kept_bytes, *sizes, every=every)
        working[stage] = _by_strategy(codes, rc.working_bytes, *sizes, every=every)
    embedding = embedding_dropout_bytes(shape.seq_len, mb, shape.hidden, tp, cp, sp > 0)
    logits = output_layer_bytes(shape.seq_len, mb, shape.hidden, shape.vocab, tp, cp, sp > 0, bpv,
                                logit_positions=shape.logit_positions)
    single = pp == 1
    if params_local is None:
        pre = table.total("params", placement="pre")[inverse]
        post = table.total("params", placement="post")[inverse]
        per_layer_params = table.total("params", placement="layer")[inverse] / shape.layers
        tied = pre if getattr(shape, "tied_embeddings", False) else 0.0
        params = {"first": np.where(single, pre + first_layers * per_layer_params + post,
                                    pre + first_layers * per_layer_params),
                  "middle": middle_layers * per_layer_params}
        params["last"] = np.where(single, params["first"], last_layers * per_layer_params + post + tied)
    else:
        params = {"first": params_local, "middle": params_local, "last": params_local}
    layers = {"first": first_layers, "middle": middle_layers, "last": last_layers}
    # the second stage holds the most in-flight micro-batches of the middle ones (1F1B)
    activations = {"first": pipeline_inflight_microbatches(pp, m, vp, 0) * (kept["first"] + embedding),
                   "middle": pipeline_inflight_microbatches(pp, m, vp, np.minimum(1, pp - 1)) * kept["middle"],
                   "last": pipeline_inflight_microbatches(pp, m, vp, pp - 1) * kept["last"]}
    stage_logits = {"first": np.where(single, logits, 0.0), "middle": 0.0, "last": logits}
    stages = {stage: memory_per_gpu(
        params[stage], activations[stage] + working[stage], capacity, logits=stage_logits[stage],
        gathered_bytes=zero3_gathered_bytes(params[stage], layers[stage], zero, dp, precision, profile), **common)
        for stage in ("first", "middle", "last")}
    # the stage that needs most (pp = 1: the first is the only one; pp = 2: no middle stage)
    totals = np.stack(np.broadcast_arrays(stages["first"]["total"],
                                          np.where(pp > 2, stages["middle"]["total"], -np.inf),
                                          np.where(pp > 1, stages["last"]["total"], -np.inf)))
    pick = np.argmax(totals, axis=0)
    result = {key: np.choose(pick, [np.broadcast_to(stages[stage][key], pick.shape)
                                    for stage in ("first", "middle", "last")])
              for key in COMPONENTS + ("total", "headroom", "fits")}
    result["capacity"] = stages["first"]["capacity"]
    result["stage"] = np.array(["first", "middle", "last"])[pick]
    return _with_reasons(result, with_reasons)


def _with_reasons(result: dict, with_reasons) -> dict:
    """Every entry as an array over plans, plus the reasons of each plan when asked."""
    result.pop("reasons", None)
    n = max(np.size(value) for value in result.values())
    result = {key: np.broadcast_to(value, (n,)).copy() for key, value in result.items()}
    if with_reasons if with_reasons is not None else n <= 1000:
        result["reasons_text"] = [memory_reasons({key: result[key][i] for key in COMPONENTS + ("total", "capacity")})
                                  for i in range(n)]
    return result
