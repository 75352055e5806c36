"""Parallel plans as columns of numbers, their defaults and their validity rules.

A plan fixes how a job is laid out on ``num_gpus`` GPUs: tensor (``tp``), pipeline (``pp``), context
(``cp``) and data (``dp``) parallel degrees with ``tp * pp * cp * dp = num_gpus``, virtual pipeline
stages (``vp``, interleaving), the micro-batch and global batch, activation recomputation and the
ZeRO stage.  ``estimate`` evaluates one plan and ``search`` many: both hold plans as a dict of numpy
arrays (:data:`PLAN_FIELDS`) so the same formulas run on one or a million candidates.

Invalid plans are not errors: :func:`check_plans` returns a bit mask per plan whose bits index
:data:`INVALID_REASONS`, so that search can count them by reason.
"""

from __future__ import annotations

import numpy as np

from perfmodel.scenario import RECOMPUTE, Plan

PLAN_FIELDS = ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute",
               "recompute_every", "zero", "sequence_parallel")

# recompute strategies are carried as integer codes in plan arrays
RECOMPUTE_CODES = {name: code for code, name in enumerate(RECOMPUTE)}

INVALID_REASONS = (
    "tp*pp*cp*dp does not equal the number of GPUs",
    "tp does not divide the attention heads",
    "tp does not divide the key/value heads",
    "pp*vp does not divide the layers",
    "dp*micro_batch does not divide the global batch",
    "tp exceeds the GPUs of one node (tensor parallelism stays inside a node)",
    "cp does not divide the sequence length",
    "interleaving (vp > 1) needs pipeline parallelism (pp > 1)",
    "ZeRO stage 2/3 with pipeline parallelism is not supported",
    "tensor/pipeline/context parallelism needs a transformer",
    "recompute 'selective' needs a transformer",
)


def default_precision(gpu) -> str:
    """bf16 where the GPU has it, else fp16 (V100, T4), else fp32."""
    for precision in ("bf16", "fp16", "fp32"):
        if getattr(gpu.peak_flops, precision) is not None:
            return precision
    raise ValueError(f"{gpu.name} has no bf16, fp16 or fp32 peak in the catalog")


def resolve_plan(plan: Plan, num_gpus: int, gpu, family: str) -> dict:
    """Fill the plan fields a scenario leaves out with estimate's documented defaults.

    Defaults: no tensor/pipeline/context parallelism, all remaining GPUs data-parallel, micro-batch
    1 for transformers and 32 for CNNs, one micro-batch per step, no recomputation, no ZeRO,
    sequence parallelism whenever tp > 1 (Korthikanti et al. 2022), flash attention on Ampere and
    newer (it needs tensor cores of sm80+; Dao 2023), Adam, and :func:`default_precision`.
    """
    tp, pp, cp, vp = (plan.tp or 1), (plan.pp or 1), (plan.cp or 1), (plan.vp or 1)
    dp = plan.dp or max(1, num_gpus // (tp * pp * cp))
    micro_batch = plan.micro_batch or (1 if family == "transformer" else 32)
    if plan.micro_batch is None and plan.global_batch is not None and family == "cnn":
        micro_batch = max(1, plan.global_batch // dp)
    global_batch = plan.global_batch or dp * micro_batch
    flash = plan.flash_attention
    if flash is None:
        flash = gpu.architecture not in ("Volta", "Turing")
    return {
        "precision": plan.precision or default_precision(gpu),
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
        "micro_batch": micro_batch, "global_batch": global_batch,
        "recompute": plan.recompute or "none",
        "recompute_every": plan.recompute_every or 1,
        "zero": plan.zero or 0,
        "sequence_parallel": plan.sequence_parallel if plan.sequence_parallel is not None else tp > 1,
        "flash_attention": bool(flash),
        "optimizer": plan.optimizer or "adam",
    }


def completions(plan: Plan, family: str) -> list[dict]:
    """Alternatives for the open plan fields that decide whether a job fits in memory.

    A scenario (or a measured run) that does not fix ``recompute`` or ``zero`` is evaluated with
    each of: recompute none / selective / full (transformers; CNNs: none) x ZeRO 0 / 1 (the
    distributed optimizer), and the fastest that fits is taken; the first entry is the default of
    :func:`resolve_plan`.  An engineer who ran the job chose settings that fit; this is the
    estimator's way of doing the same, and the chosen values are reported with the estimate.
    """
    recompute = [plan.recompute] if plan.recompute else (
        ["none", "selective", "full"] if family == "transformer" else ["none"])
    zero = [plan.zero] if plan.zero is not None else [0, 1]
    return [{"recompute": r, "zero": z} for r in recompute for z in zero]


def pick_fastest_fitting(step_time: np.ndarray, fits: np.ndarray, valid: np.ndarray) -> int:
    """Index of the fastest plan that is valid and fits; else the first valid one; else 0."""
    ok = valid & fits
    if ok.any():
        return int(np.flatnonzero(ok)[np.argmin(step_time[ok])])
    return int(np.flatnonzero(valid)[0]) if valid.any() else 0


def as_arrays(plan: dict) -> dict[str, np.ndarray]:
    """One resolved plan (a dict of scalars) as length-1 arrays of :data:`PLAN_FIELDS`."""
    arrays = {}
    for field in PLAN_FIELDS:
        value = plan[field]
        if field == "recompute":
            if value not in RECOMPUTE_CODES:
                raise ValueError(f"plan.recompute {value!r} is unknown; allowed: {', '.join(RECOMPUTE)}")
            value = RECOMPUTE_CODES[value]
        arrays[field] = np.atleast_1d(np.asarray(value, dtype=np.int64))
    return arrays


def check_plans(plans: dict[str, np.ndarray], workload, num_gpus: int, gpus_per_node: int) -> np.ndarray:
    """Bit mask of violated rules per plan (0 = valid); bit i is ``INVALID_REASONS[i]``."""
    tp, pp, dp, cp, vp = (plans[k] for k in ("tp", "pp", "dp", "cp", "vp"))
    transformer = workload.family == "transformer"
    shape = workload.shape
    rules = [
        tp * pp * cp * dp != num_gpus,
        (shape.heads % tp != 0) if transformer else np.zeros_like(tp, dtype=bool),
        (shape.kv_heads % tp != 0) & (tp % shape.kv_heads != 0) if transformer else np.zeros_like(tp, dtype=bool),
        workload.layers % (pp * vp) != 0,
        plans["global_batch"] % (dp * plans["micro_batch"]) != 0,
        tp > gpus_per_node,
        (shape.seq_len % cp != 0) if transformer else np.zeros_like(cp, dtype=bool),
        (vp > 1) & (pp == 1),
        (plans["zero"] >= 2) & (pp > 1),
        ((tp > 1) | (pp > 1) | (cp > 1)) & (not transformer),
        (plans["recompute"] == RECOMPUTE_CODES["selective"]) & (not transformer),
    ]
    mask = np.zeros(np.broadcast(*rules).shape, dtype=np.int64)
    for bit, rule in enumerate(rules):
        mask |= np.asarray(rule, dtype=np.int64) << bit
    return mask


def reasons_from_mask(mask: int) -> list[str]:
    """The reasons a plan mask stands for, in :data:`INVALID_REASONS` order."""
    return [reason for bit, reason in enumerate(INVALID_REASONS) if int(mask) >> bit & 1]
