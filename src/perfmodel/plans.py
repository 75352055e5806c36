"""Parallel plans as columns of numbers, their defaults and their validity rules.

A plan fixes how a job is laid out on ``num_gpus`` GPUs: tensor (``tp``), pipeline (``pp``), context
(``cp``) and data (``dp``) parallel degrees with ``tp * pp * cp * dp = num_gpus``, virtual pipeline
stages (``vp``, interleaving), the micro-batch and global batch, activation recomputation and the
ZeRO stage.  ``estimate`` evaluates one plan and ``search`` many: both hold plans as a dict of numpy
arrays (:data:`PLAN_FIELDS`) so the same formulas run on one or a million candidates.

This module owns the plan: its array form, its defaults (:func:`settings`, :func:`resolve_plan`),
its rules (:func:`check_plans`, used for arrays of candidates and, through :func:`plan_settings`,
for one plan) and its candidates (:func:`enumerate_plans`: the search grid and what
:func:`perfmodel.choice.choose_plans` chooses from).  Invalid plans are not errors:
:func:`check_plans` returns a bit mask per plan whose bits index :data:`INVALID_REASONS`, so that
search can count them by reason.  :func:`recompute_options` and :func:`best_recompute` price the
recomputation strategies of one plan without a cluster (the memory planner).  What a practitioner
would run among plans the model cannot tell apart is :func:`conventional_order` (with
:data:`PLAN_TIE_FRACTION`), and the memory a plan must leave free is :func:`within_headroom`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.models import memory, recompute
from perfmodel.scenario import Plan
from perfmodel.vocabulary import (CONV_TRANSPOSE_PRECISIONS, FRAMEWORK_CHANNELS_LAST, FRAMEWORK_FLASH_ATTENTION,
                                  FRAMEWORK_FLASH_ATTENTION_ASSUMED, FRAMEWORK_LACKS, FRAMEWORK_SEQUENCE_PARALLEL,
                                  FRAMEWORK_ZERO, OFFLOAD_TARGETS)
from perfmodel.vocabulary import RECOMPUTE_STRATEGIES as RECOMPUTE

PLAN_FIELDS = ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute",
               "recompute_every", "zero", "sequence_parallel", "offload")

# recompute strategies are carried as integer codes in plan arrays
RECOMPUTE_CODES = {name: code for code, name in enumerate(RECOMPUTE)}
# what a plan offloads to host memory, carried as integer codes (bit 0 optimizer, bit 1 weights)
OFFLOAD_CODES = {name: code for code, name in enumerate(OFFLOAD_TARGETS)}
# strategies that work layer by layer (transformers only); CNNs take none or sqrt (Chen et al. 2016)
LAYER_STRATEGIES = ("selective", "full", "every_k")

INVALID_REASONS = (
    "tp*pp*cp*dp does not equal the number of GPUs",
    "tp does not divide the attention heads",
    "tp does not divide the key/value heads",
    "pp exceeds the layers (every pipeline stage needs a layer)",
    "dp*micro_batch does not divide the global batch",
    "interleaving (vp > 1) needs pp*vp at most the layers + 2 (only the first and last model chunks may hold no layer)",
    "cp does not divide the sequence length",
    "interleaving (vp > 1) needs pipeline parallelism (pp > 1)",
    "tensor/pipeline/context parallelism needs a transformer",
    "recompute 'selective', 'full' or 'every_k' needs a transformer (CNNs: none or sqrt)",
)


def default_precision(gpu) -> str:
    """bf16 where the GPU has it, else fp16 (V100, T4), else fp32."""
    for precision in ("bf16", "fp16", "fp32"):
        if getattr(gpu.peak_flops, precision) is not None:
            return precision
    raise ValueError(f"{gpu.name} has no bf16, fp16 or fp32 peak in the catalog")


def can_fuse_attention(gpu) -> bool:
    """Whether ``gpu`` runs FlashAttention: Ampere and newer (it needs the tensor cores of sm80+;
    Dao 2023).  Without a ``gpu`` (the memory planner): yes."""
    return gpu is None or gpu.architecture not in ("Pascal", "Volta", "Turing")


def default_flash_attention(gpu, framework: str | None = None) -> bool:
    """Whether attention runs fused (FlashAttention) when the plan does not say: off where the GPU
    cannot run it (:func:`can_fuse_attention`), else the framework's default where it has one
    (:data:`perfmodel.vocabulary.FRAMEWORK_FLASH_ATTENTION`), else the kernel assumed for it
    (:data:`~perfmodel.vocabulary.FRAMEWORK_FLASH_ATTENTION_ASSUMED`: unfused for Megatron-LM), else
    on -- the last two an assumption (:func:`flash_attention_assumed`).  Without a ``gpu`` (the
    memory planner): the framework's, else on."""
    if not can_fuse_attention(gpu):
        return False
    if framework in FRAMEWORK_FLASH_ATTENTION:
        return FRAMEWORK_FLASH_ATTENTION[framework]
    return FRAMEWORK_FLASH_ATTENTION_ASSUMED.get(framework, True)


def flash_attention_assumed(plan: Plan, gpu, framework: str | None) -> bool:
    """True when the attention kernel was assumed rather than known: the plan does not set
    ``flash_attention``, the GPU could run either (Ampere or newer) and ``framework`` (None: not
    stated) has no default of its own; :func:`default_flash_attention` says which was assumed."""
    return (plan.flash_attention is None and framework not in FRAMEWORK_FLASH_ATTENTION
            and can_fuse_attention(gpu))


def default_channels_last(framework: str | None, precision: str) -> bool:
    """Whether a CNN's activations are held channels-last (NHWC) when the plan does not say: where
    ``framework``'s recipes do at ``precision`` (:data:`perfmodel.vocabulary.FRAMEWORK_CHANNELS_LAST`),
    else NCHW, the default memory format of PyTorch, MXNet and PaddlePaddle."""
    return precision in FRAMEWORK_CHANNELS_LAST.get(framework, ())


def channels_last_assumed(plan: Plan, framework: str | None, family: str, precision: str) -> bool:
    """True when a CNN's layout was assumed and matters: the plan does not set ``channels_last``,
    ``framework`` (None: not stated) has no recipe default for it, and ``precision`` is one whose
    convolutions pay transposes when NCHW (:data:`~perfmodel.vocabulary.CONV_TRANSPOSE_PRECISIONS`);
    :func:`default_channels_last` says which was assumed."""
    return (plan.channels_last is None and family == "cnn" and precision in CONV_TRANSPOSE_PRECISIONS
            and framework not in FRAMEWORK_CHANNELS_LAST)


def check_layout(plan: Plan, workload) -> None:
    """Refuse ``plan.channels_last`` for a workload without convolutions (a transformer), where it
    would be ignored."""
    if plan.channels_last is not None and workload.family != "cnn":
        raise ValueError(f"plan.channels_last {str(plan.channels_last).lower()} applies to a CNN's convolutions "
                         f"only, not to {workload.name} (a {workload.family}); leave it out")


def default_sequence_parallel(plan: Plan, framework: str | None = None) -> bool | None:
    """Sequence parallelism for a plan that does not say: ``framework``'s default where it has one
    (:data:`perfmodel.vocabulary.FRAMEWORK_SEQUENCE_PARALLEL`: off for Megatron-LM), else None (on
    whenever tp > 1).  A plan that states it keeps it."""
    if plan.sequence_parallel is not None:
        return plan.sequence_parallel
    return FRAMEWORK_SEQUENCE_PARALLEL.get(framework)


def sequence_parallel_assumed(plan: Plan, framework: str | None, tp: int) -> bool:
    """True when a tensor-parallel plan's sequence parallelism is the framework's default rather
    than stated (:func:`default_sequence_parallel`)."""
    return plan.sequence_parallel is None and framework in FRAMEWORK_SEQUENCE_PARALLEL and tp > 1


def within_framework(plan: Plan, framework: str | None) -> Plan:
    """The plan with every field it leaves open that ``framework``'s code lacks set to the one value
    that code runs (:data:`perfmodel.vocabulary.FRAMEWORK_LACKS`: Megatron-LM of 2019 has no
    pipeline parallelism, so a choice or a search for it keeps ``pp = 1``).  Stated values are the
    scenario's to check (:class:`perfmodel.scenario.Scenario` refuses one the framework lacks)."""
    lacks = FRAMEWORK_LACKS.get(framework, {})
    update = {field: allowed for field, (allowed, _) in lacks.items() if getattr(plan, field) is None}
    return plan.model_copy(update=update) if update else plan


def default_zero(plan: Plan, framework: str | None = None) -> int | None:
    """The ZeRO stage of a plan that does not say: ``framework``'s default where it has one
    (:data:`perfmodel.vocabulary.FRAMEWORK_ZERO`), else None (chosen).  A plan that states it keeps it."""
    if plan.zero is not None:
        return plan.zero
    return FRAMEWORK_ZERO.get(framework)


def zero_assumed(plan: Plan, framework: str | None, dp: int) -> bool:
    """True when a data-parallel plan's ZeRO stage is the framework's default rather than stated
    (:func:`default_zero`)."""
    return plan.zero is None and framework in FRAMEWORK_ZERO and dp > 1


def settings(plan: Plan, gpu, framework: str | None = None) -> dict:
    """The plan fields that are one value for every candidate: precision (:func:`default_precision`),
    flash attention (:func:`default_flash_attention` of the GPU and ``framework``), the optimizer
    (Adam), CUDA graphs (off: eager PyTorch, as Megatron-LM runs by default) and a CNN's layout
    (:func:`default_channels_last` of ``framework`` and the precision).  Without a ``gpu`` (the
    memory planner): bf16 and flash attention on."""
    flash = plan.flash_attention
    if flash is None:
        flash = default_flash_attention(gpu, framework)
    precision = plan.precision or (default_precision(gpu) if gpu is not None else "bf16")
    channels_last = plan.channels_last
    if channels_last is None:
        channels_last = default_channels_last(framework, precision)
    return {"precision": precision, "flash_attention": bool(flash), "optimizer": plan.optimizer or "adam",
            "cuda_graphs": bool(plan.cuda_graphs), "channels_last": bool(channels_last)}


def default_micro_batch(family: str) -> int:
    """Micro-batch a plan that leaves it open starts from: 1 for transformers, 32 for CNNs."""
    return 1 if family == "transformer" else 32


def resolve_plan(plan: Plan, num_gpus: int, gpu, family: str, framework: str | None = None) -> dict:
    """Fill the plan fields a scenario leaves out with estimate's documented defaults.

    Defaults: no tensor/pipeline/context parallelism, all remaining GPUs data-parallel, micro-batch
    1 for transformers and 32 for CNNs, one micro-batch per step, no recomputation, ``framework``'s
    ZeRO stage (:func:`default_zero`; none where it has no default), sequence parallelism whenever
    tp > 1 (Korthikanti et al. 2022) unless ``framework`` defaults to it off
    (:func:`default_sequence_parallel`), flash attention as
    :func:`default_flash_attention` of the GPU and ``framework``, Adam, and
    :func:`default_precision` (:func:`settings`).  :func:`enumerate_plans` gives
    the candidates a choice ranges over; this is the plan that explains why when none is valid.
    """
    tp, pp, cp, vp = (plan.tp or 1), (plan.pp or 1), (plan.cp or 1), (plan.vp or 1)
    dp = plan.dp or max(1, num_gpus // (tp * pp * cp))
    micro_batch = plan.micro_batch or default_micro_batch(family)
    if plan.micro_batch is None and plan.global_batch is not None and family == "cnn":
        micro_batch = max(1, plan.global_batch // dp)
    global_batch = plan.global_batch or dp * micro_batch
    sequence_parallel = default_sequence_parallel(plan, framework)
    return {
        **settings(plan, gpu, framework),
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
        "micro_batch": micro_batch, "global_batch": global_batch,
        "recompute": plan.recompute or "none",
        "recompute_every": plan.recompute_every or 1,
        "zero": default_zero(plan, framework) or 0,
        "sequence_parallel": tp > 1 if sequence_parallel is None else sequence_parallel,
        "offload": plan.offload or "none",
    }


def as_arrays(plan: dict) -> dict[str, np.ndarray]:
    """One resolved plan (a dict of scalars) as length-1 arrays of :data:`PLAN_FIELDS`."""
    arrays = {}
    for field in PLAN_FIELDS:
        value = plan[field]
        if field == "recompute":
            if value not in RECOMPUTE_CODES:
                raise ValueError(f"plan.recompute {value!r} is unknown; allowed: {', '.join(RECOMPUTE)}")
            value = RECOMPUTE_CODES[value]
        if field == "offload":
            if value not in OFFLOAD_CODES:
                raise ValueError(f"plan.offload {value!r} is unknown; allowed: {', '.join(OFFLOAD_TARGETS)}")
            value = OFFLOAD_CODES[value]
        arrays[field] = np.atleast_1d(np.asarray(value, dtype=np.int64))
    return arrays


def check_plans(plans: dict[str, np.ndarray], workload, num_gpus: int | None, gpus_per_node: int | None) -> np.ndarray:
    """Bit mask of violated rules per plan (0 = valid); bit i is ``INVALID_REASONS[i]``.  Without a
    cluster (``num_gpus`` None) the rule that needs one is skipped.

    Allowed, as practitioners run them: pipeline stages or interleaved model chunks that do not
    divide the layers (the first and last chunks hold fewer; :func:`perfmodel.models.stages.stage_layers`);
    ZeRO-2/3 (FSDP) on the data-parallel axis together with tensor and pipeline parallelism
    (Llama 3's 4D parallelism, Dubey et al. 2024, Sec. 3.3.2); tensor parallelism wider than a
    node (its collectives then cross the inter-node network), so no rule reads ``gpus_per_node``."""
    tp, pp, dp, cp, vp = (plans[k] for k in ("tp", "pp", "dp", "cp", "vp"))
    transformer = workload.family == "transformer"
    shape = workload.shape
    rules = [
        (tp * pp * cp * dp != num_gpus) if num_gpus is not None else np.zeros_like(tp, dtype=bool),
        (shape.heads % tp != 0) if transformer else np.zeros_like(tp, dtype=bool),
        (shape.kv_heads % tp != 0) & (tp % shape.kv_heads != 0) if transformer else np.zeros_like(tp, dtype=bool),
        pp > workload.layers,
        plans["global_batch"] % (dp * plans["micro_batch"]) != 0,
        (vp > 1) & (pp * vp > workload.layers + 2),
        (shape.seq_len % cp != 0) if transformer else np.zeros_like(cp, dtype=bool),
        (vp > 1) & (pp == 1),
        ((tp > 1) | (pp > 1) | (cp > 1)) & (not transformer),
        np.isin(plans["recompute"], [RECOMPUTE_CODES[name] for name in LAYER_STRATEGIES]) & (not transformer),
    ]
    # shaped like the whole plan grid, also along axes (zero, recompute_every) no rule reads
    mask = np.zeros(np.broadcast_shapes(*(np.shape(rule) for rule in rules),
                                        *(np.shape(values) for values in plans.values())), dtype=np.int64)
    for bit, rule in enumerate(rules):
        mask |= np.asarray(rule, dtype=np.int64) << bit
    return mask


def reasons_from_mask(mask: int) -> list[str]:
    """The reasons a plan mask stands for, in :data:`INVALID_REASONS` order."""
    return [reason for bit, reason in enumerate(INVALID_REASONS) if int(mask) >> bit & 1]


# --- plans a practitioner would run: memory headroom and the conventional preference -------------

# Share of GPU memory an automatically chosen plan leaves unused for allocator spikes and
# fragmentation beyond the modelled mean (the ``allocator_fragmentation`` parameter), and for what
# the driver keeps (up to 0.5 % of an HBM part, 1/16 of a GDDR part with ECC on; the catalog's GPU
# memory is the binary datasheet figure).  From the shipped training rows (no row reports memory
# use, so the model's accounting of the plans the published runs state): 95 % of 722 runs need at
# most 0.898 of their GPU's memory, 36 need more than 90 % and the largest 0.994
# (``scripts/plan_evidence.py``).  A plan chosen for the user keeps the margin 95 % of published
# runs keep; a plan the user fixes may use more (with a warning).  Tools that size work to GPU
# memory default to the same 90 % of what the driver reports: vLLM's ``gpu_memory_utilization``
# 0.9 (docs.vllm.ai, Engine Arguments), YOLOv5's AutoBatch ``fraction=0.9`` (ultralytics/yolov5
# utils/autobatch.py).  ``plan.memory_headroom`` overrides it.
DEFAULT_MEMORY_HEADROOM = 0.10

# The headroom of a measured run's plan (``validate`` and ``calibrate``): the run happened, so the
# plan it used fitted in its GPU's memory, whatever margin it kept; the fields its source leaves
# out are chosen among every plan that fits at all.  The default above is a margin to recommend,
# not a fact about a run: 36 of the 722 published runs need more than 90 % of
# their GPU's memory by the model's accounting of their plans (as stated, open fields chosen with
# no headroom; the largest 0.994, scripts/plan_evidence.py), and with the default
# headroom the runs that state no recomputation were given it where the run could do without
# (Megatron-Bridge's Llama-3.1-405B fp8 runs on 1,024 H100, never fitted: 0.73x and 0.75x of the
# measured throughput with full recomputation, 1.00x and 1.02x without; docs/accuracy.md, session 40).
MEASURED_RUN_HEADROOM = 0.0

# Plans whose step times differ by less than this fraction are ties the model cannot resolve
# (at most: the 80 % prediction interval's half-width when it is narrower,
# :func:`perfmodel.choice.tie_band`).  A round value below the model's spread between plans of
# one job: over 427 shipped training rows of 128 jobs (same source, model, GPU and GPU count,
# different plans), the 80th percentile of |log(measured/predicted) - the job's mean| is 0.142
# (``scripts/plan_evidence.py``; tests/test_plan_choice.py checks the fraction stays below it).
PLAN_TIE_FRACTION = 0.10

# sequences up to this many tokens need no context parallelism (Megatron-LM enables it for long
# context, 32k and beyond; at 2k-8k one GPU holds a sequence's activations under TP)
SHORT_SEQUENCE = 8192

# every_k strides a chosen plan may use when its recomputation is open: half or three quarters of
# the layers recomputed, the partial recomputation practitioners run when full recomputation is
# more than memory needs (Megatron-LM's --recompute-num-layers, torchtitan's activation checkpointing
# of every k-th layer).  Without them the choice had none or full only: NVIDIA's fp8 Llama-3-70B
# and 405B runs on 64-256 B200/GB200 (checks, recomputation not stated) were predicted with full
# recomputation at 0.67-0.87x their measured throughput, 0.73-1.00x with them (docs/accuracy.md,
# session 40); no fitted row's choice changes.  ``search`` ranges over every power of two.
PARTIAL_RECOMPUTE_EVERY = (2, 4)

# recomputation from least to most recomputed work (ties share a rank)
RECOMPUTE_RANK = {"none": 0, "selective": 1, "every_k": 2, "sqrt": 3, "full": 3}


def memory_headroom(plan: Plan) -> float:
    """The share of GPU memory a chosen plan leaves free: ``plan.memory_headroom`` or
    :data:`DEFAULT_MEMORY_HEADROOM`."""
    return DEFAULT_MEMORY_HEADROOM if plan.memory_headroom is None else float(plan.memory_headroom)


def within_headroom(total_bytes, capacity_bytes, headroom: float):
    """Whether a plan's memory ``total_bytes`` stays within ``(1 - headroom) x capacity_bytes``
    (arrays broadcast)."""
    return np.asarray(total_bytes) <= (1.0 - headroom) * np.asarray(capacity_bytes)


def conventional_order(plans: dict[str, np.ndarray], seq_len: int | None, gpus_per_node: int) -> np.ndarray:
    """Indices of 1-D plan arrays, most conventional first: the rule that breaks ties between plans
    the model cannot tell apart (:func:`perfmodel.choice.choose_plans`, ``search``).

    Keys, in order (each only decides among plans equal on the keys before it):

    1. no offload to host memory (ZeRO-Offload is a last resort for memory);
    2. fewer parallel dimensions above 1 among tensor, pipeline and context parallelism;
    3. tensor parallelism within a node (NVLink), not across nodes;
    4. no context parallelism at sequences up to :data:`SHORT_SEQUENCE` tokens;
    5. the lowest ZeRO stage (ZeRO-3 / FSDP only when it is needed or clearly faster); ZeRO-1
       ranks with none: it shards only the optimizer state at data parallelism's communication
       volume (Rajbhandari et al. 2020, Sec. 7) and is Megatron-LM's distributed optimizer;
    6. the least recomputation (:data:`RECOMPUTE_RANK`);
    7. the largest micro-batch;
    8. the fewest virtual pipeline stages (no interleaving unless it pays);
    9. the shortest step time (``step_time_s`` when the arrays have it).
    """
    tp, pp, cp = (np.asarray(plans[k]) for k in ("tp", "pp", "cp"))
    recompute = np.asarray(plans["recompute"])
    if recompute.dtype.kind not in "iu":  # names -> codes
        names, inverse = np.unique(recompute, return_inverse=True)
        recompute = np.array([RECOMPUTE_CODES[name] for name in names], dtype=np.int64)[inverse]
    recompute_rank = np.array([RECOMPUTE_RANK[name] for name in RECOMPUTE])[recompute]
    offload = np.asarray(plans["offload"])
    offloads = offload != ("none" if offload.dtype.kind in "UO" else OFFLOAD_CODES["none"])
    short = seq_len is not None and seq_len <= SHORT_SEQUENCE
    keys = [
        offloads,
        (tp > 1).astype(int) + (pp > 1) + (cp > 1),
        tp > gpus_per_node,
        (cp > 1) & short,
        np.maximum(np.asarray(plans["zero"]) - 1, 0),
        recompute_rank,
        -np.asarray(plans["micro_batch"]),
        np.asarray(plans["vp"]),
        np.asarray(plans.get("step_time_s", np.zeros(len(tp)))),
    ]
    return np.lexsort([np.broadcast_to(key, tp.shape) for key in reversed(keys)])


POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def recompute_options_of(plan: Plan, workload, flash_attention: bool, strides, transformer_sqrt: bool) -> list:
    """The ``(strategy, k)`` pairs a plan's recomputation ranges over (k is 1 but for every_k).

    A fixed strategy is itself; every_k with ``recompute_every`` open takes each of ``strides``
    below the layer count.  An open strategy ranges over none and full (selective too without
    flash attention, whose kernel already recomputes the attention core; sqrt too when
    ``transformer_sqrt``) and every_k for the plan's ``recompute_every`` or else each of
    ``strides`` below the layer count; a CNN over none and sqrt.  ``recompute_every`` is
    refused where it cannot apply (a CNN, or a fixed strategy other than every_k), never
    dropped."""
    transformer = workload.family == "transformer"
    given = plan.recompute_every
    if given is not None and given != 1 and (not transformer or plan.recompute not in (None, "every_k")):
        what = f"recompute {plan.recompute!r}" if plan.recompute else f"a {workload.family} (no layer stack)"
        raise ValueError(f"plan.recompute_every {given} applies to recompute 'every_k' of a transformer only, "
                         f"not to {what}; leave recompute_every out or set recompute: every_k")
    if plan.recompute and plan.recompute != "every_k":
        return [(plan.recompute, 1)]
    if not transformer:
        return [("none", 1), ("sqrt", 1)]
    if given == 1 and plan.recompute is None:
        raise ValueError("plan.recompute_every 1 with recompute open names no partial recomputation (every_k "
                         "with k = 1 recomputes nothing); give k >= 2, or set recompute")
    ks = [given] if given is not None else [k for k in strides if 1 < k < workload.layers]
    if plan.recompute == "every_k":
        if not ks:
            raise ValueError(f"plan.recompute 'every_k' needs recompute_every: the model's {workload.layers} "
                             f"layers leave no stride of {list(strides)} below them to choose")
        return [("every_k", k) for k in ks]
    strategies = ("none", "full") + (("sqrt",) if transformer_sqrt else ())
    if not flash_attention:
        strategies = ("none", "selective") + strategies[1:]
    return [(name, 1) for name in strategies] + [("every_k", k) for k in ks]


def _divisors(n: int, limit: int) -> list[int]:
    """The divisors of ``n`` up to ``limit``, ascending (trial division up to sqrt(n))."""
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return [d for d in sorted(set(small + [n // d for d in small])) if d <= limit]


def _choices(fixed, default: list[int]) -> list[int]:
    return [fixed] if fixed is not None else default


def enumerate_plans(plan: Plan, workload, num_gpus: int, gpus_per_node: int,
                    flash_attention: bool = True) -> dict[str, np.ndarray]:
    """Candidate plans (before validity checks) as a grid of :data:`PLAN_FIELDS`.

    Open fields range over: tp and cp powers of two up to a node, pp the divisors of the layer
    count up to the GPU count, vp 1/2/4, micro-batch powers of two up to the global batch,
    recompute none/selective/full and every_k for k in :data:`PARTIAL_RECOMPUTE_EVERY` (CNNs:
    none/sqrt; selective only without flash attention, whose kernel already recomputes the
    attention core), ZeRO 0-3.  ``dp`` follows from the
    others.  With a micro-batch but no global batch, one micro-batch per data-parallel rank at the
    largest data-parallel degree the fixed degrees allow, so every plan trains on the same number
    of samples per step.  With neither (the batch is open, as in a throughput benchmark that does
    not say its batch), the micro-batch ranges over :data:`POWERS_OF_TWO` with one micro-batch per
    data-parallel rank (global batch = dp x micro-batch, per plan): a choice ranks such plans by
    time per sample, so it takes the batch of the highest throughput that fits in memory.

    Each field is an integer array shaped to broadcast over the grid (one axis per open field),
    so rules can be checked without materialising the grid; :func:`select` gathers plans from it.
    """
    transformer = workload.family == "transformer"
    node_powers = [p for p in POWERS_OF_TWO if p <= gpus_per_node]
    tp = _choices(plan.tp, node_powers if transformer else [1])
    cp = _choices(plan.cp, [p for p in node_powers if p <= 8] if transformer else [1])
    pp = _choices(plan.pp, _divisors(workload.layers, num_gpus) if transformer else [1])
    vp = _choices(plan.vp, [1, 2, 4] if transformer else [1])
    check_layout(plan, workload)
    options = recompute_options_of(plan, workload, flash_attention, PARTIAL_RECOMPUTE_EVERY, transformer_sqrt=False)
    recompute = [RECOMPUTE_CODES[name] for name, _ in options]
    zero = _choices(plan.zero, [0, 1, 2, 3])
    widest_dp = plan.dp or max(1, num_gpus // ((plan.tp or 1) * (plan.pp or 1) * (plan.cp or 1)))
    open_batch = plan.global_batch is None and plan.micro_batch is None
    global_batch = plan.global_batch or widest_dp * (plan.micro_batch or default_micro_batch(workload.family))
    micro = _choices(plan.micro_batch, list(POWERS_OF_TWO) if open_batch
                     else [p for p in POWERS_OF_TWO if p <= max(1, global_batch)])
    axes = (tp, pp, cp, vp, micro, recompute, zero)
    plans = {name: np.asarray(values, dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(axes))])
             for axis, (name, values) in enumerate(zip(("tp", "pp", "cp", "vp", "micro_batch", "recompute", "zero"),
                                                       axes))}
    plans["dp"] = np.maximum(1, num_gpus // (plans["tp"] * plans["pp"] * plans["cp"]))
    if plan.dp is not None:
        plans["dp"] = np.full_like(plans["dp"], plan.dp)
    plans["global_batch"] = (plans["dp"] * plans["micro_batch"] if open_batch
                             else np.array(global_batch, dtype=np.int64))
    plans["recompute_every"] = np.asarray([k for _, k in options], dtype=np.int64).reshape(plans["recompute"].shape)
    sequence_parallel = plan.sequence_parallel if plan.sequence_parallel is not None else True
    plans["sequence_parallel"] = ((plans["tp"] > 1) & sequence_parallel).astype(np.int64)
    plans["offload"] = np.array(OFFLOAD_CODES[plan.offload or "none"], dtype=np.int64)
    return {name: plans[name] for name in PLAN_FIELDS}


@dataclass(frozen=True)
class PlanGrid:
    """The search space as independent axes, enumerated block by block.

    ``axes``: one dict per axis, field -> 1-D values (fields on one axis vary together, e.g.
    ``recompute`` and ``recompute_every``); the last ``inner_axes`` of them (the settings) are
    enumerated whole in every block, the others (the layout) a range of their flat index at a time.
    ``constants``: fields with one value; ``dp`` follows from the GPU count (or ``fixed_dp``).
    Candidate ``i`` is the C-order grid point ``np.unravel_index(i, shape)``: layout
    ``i // inner_size``, settings ``i % inner_size``, so any split into blocks gives the same plans.
    """

    axes: tuple[dict[str, np.ndarray], ...]
    inner_axes: int
    constants: dict[str, int]
    num_gpus: int
    fixed_dp: int | None
    layers: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(next(iter(axis.values()))) for axis in self.axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def inner_size(self) -> int:
        """Settings per layout (candidates per unit of the layout index)."""
        return int(np.prod(self.shape[len(self.axes) - self.inner_axes:], dtype=np.int64))

    @property
    def layouts(self) -> int:
        return self.size // self.inner_size

    def block(self, first: int, last: int) -> dict[str, np.ndarray]:
        """Layouts ``first`` .. ``last - 1`` x every setting, as :data:`PLAN_FIELDS` arrays that
        broadcast to ``(last - first, inner_size)`` (layout fields ``(n, 1)``, settings ``(1, m)``),
        so :func:`check_plans` runs on the block without materialising it."""
        split = len(self.axes) - self.inner_axes
        outer = np.unravel_index(np.arange(first, last, dtype=np.int64), self.shape[:split])
        inner = np.unravel_index(np.arange(self.inner_size, dtype=np.int64), self.shape[split:])
        plans = {}
        for axes, index, shape in ((self.axes[:split], outer, (-1, 1)), (self.axes[split:], inner, (1, -1))):
            for axis, position in zip(axes, index):
                plans.update({name: values[position].reshape(shape) for name, values in axis.items()})
        plans.update({name: np.array([[value]], dtype=np.int64) for name, value in self.constants.items()})
        plans["dp"] = (np.array([[self.fixed_dp]], dtype=np.int64) if self.fixed_dp is not None
                       else np.maximum(1, self.num_gpus // (plans["tp"] * plans["pp"] * plans["cp"])))
        return {name: plans[name] for name in PLAN_FIELDS}

    @staticmethod
    def take(plans: dict[str, np.ndarray], rows: np.ndarray, columns: np.ndarray) -> dict[str, np.ndarray]:
        """The plans at (layout row, setting column) of a :meth:`block`, as 1-D arrays."""
        taken = {}
        for name, values in plans.items():
            picked = values[rows if values.shape[0] > 1 else 0, columns if values.shape[1] > 1 else 0]
            taken[name] = picked if np.ndim(picked) else np.full(len(rows), picked, dtype=np.int64)
        return taken

    def duplicates(self, plans: dict[str, np.ndarray]) -> np.ndarray:
        """Bit mask of the reasons a candidate repeats another one (bits index :data:`DUPLICATE_REASONS`):
        sequence parallelism on without tensor parallelism, and every_k with ``k >= 2 x`` the
        layers per stage (the same plan as ``k / 2``)."""
        every_k = plans["recompute"] == RECOMPUTE_CODES["every_k"]
        return ((plans["sequence_parallel"] > 0) & (plans["tp"] == 1)).astype(np.int64) | (
            (every_k & (plans["recompute_every"] * plans["pp"] >= 2 * self.layers)).astype(np.int64) << 1)


DUPLICATE_REASONS = (
    "duplicate: sequence parallelism without tensor parallelism (the plan with it off)",
    "duplicate: every_k with k at least twice the layers per stage (the plan with k/2)",
)


def search_grid(plan: Plan, workload, num_gpus: int, gpus_per_node: int, flash_attention: bool = True) -> PlanGrid:
    """The search space of :func:`perfmodel.plan_search.search` (before validity checks).

    Open fields range over: tp powers of two up to a node, cp powers of two up to 8, pp the
    divisors of the layer count up to the GPU count, vp every divisor of the layer count (the
    rules keep those with ``pp * vp`` at most the layers + 2; chunks that do not divide them are uneven), every micro-batch dividing the global batch
    (the rules keep those dividing the per-replica batch ``global_batch / dp``), sequence
    parallelism on and off, recomputation none / full / sqrt / every_k for k = 2, 4, 8, ... below
    the layer count (selective too without flash attention; CNNs none / sqrt), ZeRO 0-3, and
    offload of the optimizer state and/or the weights to host memory
    (:data:`perfmodel.vocabulary.OFFLOAD_TARGETS`).  ``dp`` follows from the others; the global
    batch as in :func:`enumerate_plans`.  Left out because the chain has no term for them:
    tensor-parallel communication overlap on/off (the framework decides:
    :data:`perfmodel.vocabulary.TP_DGRAD_OVERLAP`) and data-parallel bucket sizes.
    """
    transformer = workload.family == "transformer"
    layers = workload.layers
    node_powers = [p for p in POWERS_OF_TWO if p <= gpus_per_node]
    tp = _choices(plan.tp, node_powers if transformer else [1])
    cp = _choices(plan.cp, [p for p in node_powers if p <= 8] if transformer else [1])
    pp = _choices(plan.pp, _divisors(layers, num_gpus) if transformer else [1])
    vp = _choices(plan.vp, _divisors(layers, layers) if transformer else [1])
    widest_dp = plan.dp or max(1, num_gpus // ((plan.tp or 1) * (plan.pp or 1) * (plan.cp or 1)))
    global_batch = plan.global_batch or widest_dp * (plan.micro_batch or default_micro_batch(workload.family))
    micro = _choices(plan.micro_batch, _divisors(global_batch, global_batch))
    check_layout(plan, workload)
    recompute_options = recompute_options_of(plan, workload, flash_attention, POWERS_OF_TWO, transformer_sqrt=True)
    sequence_parallel = ([int(plan.sequence_parallel)] if plan.sequence_parallel is not None
                         else [0, 1] if transformer else [0])
    offload = [OFFLOAD_CODES[plan.offload]] if plan.offload else list(OFFLOAD_CODES.values())
    axes = [{"tp": tp}, {"pp": pp}, {"cp": cp}, {"vp": vp}, {"micro_batch": micro},
            {"recompute": [RECOMPUTE_CODES[name] for name, _ in recompute_options],
             "recompute_every": [k for _, k in recompute_options]},
            {"zero": _choices(plan.zero, [0, 1, 2, 3])}, {"sequence_parallel": sequence_parallel},
            {"offload": offload}]
    axes = tuple({name: np.asarray(values, dtype=np.int64) for name, values in axis.items()} for axis in axes)
    return PlanGrid(axes=axes, inner_axes=4, constants={"global_batch": int(global_batch)}, num_gpus=num_gpus,
                    fixed_dp=plan.dp, layers=layers)


def select(plans: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    """The plans of a broadcast grid where ``keep`` (grid-shaped, boolean) is true, as 1-D arrays."""
    index = np.nonzero(keep)
    return {name: np.broadcast_to(values, keep.shape)[index] for name, values in plans.items()}


def count_reasons(mask: np.ndarray) -> dict[str, int]:
    """How many plans of a :func:`check_plans` mask break each rule (rules broken by none left out)."""
    counts = {}
    for bit, reason in enumerate(INVALID_REASONS):
        hits = int(np.count_nonzero(mask >> bit & 1))
        if hits:
            counts[reason] = hits
    return counts


def as_records(plans: dict[str, np.ndarray]) -> list[dict]:
    """1-D plan arrays as one dict of Python scalars per plan (recompute by name)."""
    names = {"recompute": list(RECOMPUTE_CODES), "offload": list(OFFLOAD_CODES)}
    return [{field: (names[field][int(plans[field][i])] if field in names else int(plans[field][i]))
             for field in PLAN_FIELDS} for i in range(len(plans["tp"]))]


# --- one plan without a cluster: the memory planner -----------------------------------------------

SETTING_FIELDS = ("precision", "flash_attention", "optimizer", "cuda_graphs", "channels_last", "memory_headroom")


def _plan_dict(plan) -> dict:
    return dict(plan) if isinstance(plan, dict) else ({} if plan is None else plan.model_dump())


def plan_settings(workload, plan) -> dict:
    """One plan's settings (a :class:`~perfmodel.scenario.Plan`, a dict or ``None``) with the
    defaults of :func:`resolve_plan` on an unnamed GPU (bf16, flash attention; every degree 1),
    checked by the rules of :func:`check_plans` that need no cluster.  An unknown
    ``global_batch`` stays ``None`` (the caller decides how many micro-batches a step has)."""
    given = {key: value for key, value in _plan_dict(plan).items() if value is not None}
    allowed = PLAN_FIELDS + SETTING_FIELDS
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown plan fields {unknown}; allowed: {', '.join(allowed)}")
    recompute.check_strategy(given.get("recompute", "none"), given.get("recompute_every", 1))
    if given.get("recompute") == "every_k" and "recompute_every" not in given:
        raise ValueError("recompute 'every_k' needs recompute_every (k >= 1)")
    one = Plan.model_construct(**given)
    degrees = [given.get(name, 1) for name in ("dp", "tp", "pp", "cp")]
    result = resolve_plan(one, int(np.prod(degrees)), None, workload.family)
    result["global_batch"] = given.get("global_batch")
    check = {**result, "global_batch": result["global_batch"] or result["dp"] * result["micro_batch"]}
    reasons = reasons_from_mask(int(check_plans(as_arrays(check), workload, None, None)[0]))
    if reasons:
        shown = ", ".join(f"{name}={result[name]}" for name in ("tp", "pp", "vp", "cp", "dp", "recompute"))
        raise ValueError(f"plan {shown} for {workload.name} ({_shape_summary(workload)}): {'; '.join(reasons)}")
    return result


def _shape_summary(workload) -> str:
    if workload.family != "transformer":
        return f"{workload.family}, {workload.layers} layers"
    shape = workload.shape
    return f"{shape.layers} layers, {shape.heads} heads, {shape.kv_heads} kv heads, sequence {shape.seq_len}"


def recompute_options(workload, plan, capacity, *, profile=None):
    """Every applicable strategy for ``workload`` under one ``plan`` (a scenario ``Plan`` or a
    dict; its ``recompute`` is ignored), priced on a GPU offering ``capacity`` bytes.

    A pandas DataFrame with columns ``strategy``, ``recompute_every`` (k for every_k, else
    <NA>), ``activation_bytes`` (per GPU, in-flight micro-batches and working set included),
    ``total_bytes`` (all memory components), ``headroom_bytes``, ``fits``, ``stage``,
    ``extra_forward_flops`` (recomputed forward FLOPs / model forward FLOPs) and
    ``extra_compute`` (recomputed forward FLOPs / model forward + backward FLOPs).
    """
    import pandas as pd

    from perfmodel.profile import default_profile

    settings = plan_settings(workload, {**_plan_dict(plan), "recompute": "none"})
    # the largest stage's layers (stages need not divide the layers: perfmodel.models.stages)
    layers = -(-(workload.shape.layers if workload.family == "transformer" else workload.layers) // settings["pp"])
    candidates = recompute.recompute_candidates(workload, layers, settings["recompute_every"])
    n = len(candidates)
    fields = ("tp", "pp", "dp", "cp", "vp", "micro_batch", "zero")
    plans = {key: np.full(n, settings[key]) for key in fields}
    # an unknown global batch: enough micro-batches to fill the pipeline (interleaved needs < 2 pp)
    plans["global_batch"] = np.full(n, settings["global_batch"]
                                    or settings["micro_batch"] * settings["dp"] * 2 * settings["pp"])
    plans["recompute"] = np.array([recompute.STRATEGIES.index(name) for name, _ in candidates])
    plans["recompute_every"] = np.array([k for _, k in candidates])
    plans["sequence_parallel"] = np.full(n, int(settings["sequence_parallel"]))
    result = memory.plan_memory(workload, None, plans, precision=settings["precision"],
                                optimizer=settings["optimizer"], flash_attention=settings["flash_attention"],
                                profile=profile or default_profile(), capacity=capacity, with_reasons=True)

    table = workload.ops(settings["micro_batch"], tp=settings["tp"], cp=settings["cp"],
                         precision=settings["precision"], flash_attention=settings["flash_attention"])
    forward = float(table.total("flops"))
    backward = float((table.backward_flops() * table.per_op("repeat")).sum(axis=0))
    if workload.family == "transformer":
        layer_forward = float(table.total("flops", placement="layer"))
        attention = 0.0 if settings["flash_attention"] else float(
            table.total("flops", kind=("attention", "softmax"), placement="layer"))
        recomputed = [recompute.extra_forward_fraction(name, layers, attention / layer_forward, k) * layer_forward
                      for name, k in candidates]
    else:
        recomputed = [forward if name == "sqrt" else 0.0 for name, _ in candidates]
    recomputed = np.array(recomputed, dtype=float)
    frame = pd.DataFrame({
        "strategy": [name for name, _ in candidates],
        "recompute_every": pd.array([k if name == "every_k" else None for name, k in candidates], dtype="Int64"),
        "activation_bytes": result["activations"], "total_bytes": result["total"],
        "headroom_bytes": result["headroom"], "fits": result["fits"].astype(bool), "stage": result["stage"],
        "extra_forward_flops": recomputed / forward, "extra_compute": recomputed / (forward + backward),
    })
    frame.attrs["reasons"] = result["reasons_text"]
    return frame


def best_recompute(workload, plan, memory_budget, *, profile=None) -> dict:
    """The fastest strategy (least recomputation, then least memory) that fits ``memory_budget``.

    ``memory_budget`` is the memory one GPU offers, in bytes (all components must fit in it).
    Returns ``{"strategy", "recompute_every", "extra_forward_flops", "extra_compute",
    "total_bytes", "options", "reasons"}``; when nothing fits, ``strategy`` is ``None`` and
    ``reasons`` says why for the strategy that needs the least memory.  Never raises for
    "does not fit"; raises ValueError for a plan that does not divide the model.
    """
    options = recompute_options(workload, plan, memory_budget, profile=profile)
    fitting = options[options["fits"]].sort_values(["extra_compute", "total_bytes"], kind="stable")
    found = len(fitting) > 0
    row = fitting.iloc[0] if found else options.sort_values("total_bytes", kind="stable").iloc[0]
    every = None if row["strategy"] != "every_k" else int(row["recompute_every"])
    if found:
        return {"strategy": row["strategy"], "recompute_every": every,
                "extra_forward_flops": float(row["extra_forward_flops"]),
                "extra_compute": float(row["extra_compute"]), "total_bytes": float(row["total_bytes"]),
                "options": options, "reasons": []}
    reasons = [f"no recomputation strategy fits; the one needing least memory is {row['strategy']}",
               *options.attrs["reasons"][row.name]]
    return {"strategy": None, "recompute_every": None, "extra_forward_flops": None, "extra_compute": None,
            "total_bytes": float(row["total_bytes"]), "options": options, "reasons": reasons}
