"""Parallel plans as columns of numbers, their defaults and their validity rules.

A plan fixes how a job is laid out on ``num_gpus`` GPUs: tensor (``tp``), pipeline (``pp``), context
(``cp``) and data (``dp``) parallel degrees with ``tp * pp * cp * dp = num_gpus``, virtual pipeline
stages (``vp``, interleaving), the micro-batch and global batch, activation recomputation and the
ZeRO stage.  ``estimate`` evaluates one plan and ``search`` many: both hold plans as a dict of numpy
arrays (:data:`PLAN_FIELDS`) so the same formulas run on one or a million candidates.

:func:`enumerate_plans` gives the candidates for the fields a plan leaves open (the search grid and
the choice of :func:`perfmodel.choice.choose_plan` alike).  Invalid plans are not errors: :func:`check_plans` returns a bit mask per plan whose bits index
:data:`INVALID_REASONS`, so that search can count them by reason.
"""

from __future__ import annotations

import numpy as np

from perfmodel.scenario import Plan
from perfmodel.vocabulary import RECOMPUTE_STRATEGIES as RECOMPUTE

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


def settings(plan: Plan, gpu) -> dict:
    """The plan fields that are one value for every candidate: precision (:func:`default_precision`),
    flash attention (on for Ampere and newer: it needs the tensor cores of sm80+; Dao 2023) and
    the optimizer (Adam)."""
    flash = plan.flash_attention
    if flash is None:
        flash = gpu.architecture not in ("Volta", "Turing")
    return {"precision": plan.precision or default_precision(gpu), "flash_attention": bool(flash),
            "optimizer": plan.optimizer or "adam"}


def default_micro_batch(family: str) -> int:
    """Micro-batch a plan that leaves it open starts from: 1 for transformers, 32 for CNNs."""
    return 1 if family == "transformer" else 32


def resolve_plan(plan: Plan, num_gpus: int, gpu, family: str) -> dict:
    """Fill the plan fields a scenario leaves out with estimate's documented defaults.

    Defaults: no tensor/pipeline/context parallelism, all remaining GPUs data-parallel, micro-batch
    1 for transformers and 32 for CNNs, one micro-batch per step, no recomputation, no ZeRO,
    sequence parallelism whenever tp > 1 (Korthikanti et al. 2022), flash attention on Ampere and
    newer, Adam, and :func:`default_precision` (:func:`settings`).  :func:`enumerate_plans` gives
    the candidates a choice ranges over; this is the plan that explains why when none is valid.
    """
    tp, pp, cp, vp = (plan.tp or 1), (plan.pp or 1), (plan.cp or 1), (plan.vp or 1)
    dp = plan.dp or max(1, num_gpus // (tp * pp * cp))
    micro_batch = plan.micro_batch or default_micro_batch(family)
    if plan.micro_batch is None and plan.global_batch is not None and family == "cnn":
        micro_batch = max(1, plan.global_batch // dp)
    global_batch = plan.global_batch or dp * micro_batch
    return {
        **settings(plan, gpu),
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
        "micro_batch": micro_batch, "global_batch": global_batch,
        "recompute": plan.recompute or "none",
        "recompute_every": plan.recompute_every or 1,
        "zero": plan.zero or 0,
        "sequence_parallel": plan.sequence_parallel if plan.sequence_parallel is not None else tp > 1,
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


POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _choices(fixed, default: list[int]) -> list[int]:
    return [fixed] if fixed is not None else default


def enumerate_plans(plan: Plan, workload, num_gpus: int, gpus_per_node: int,
                    flash_attention: bool = True) -> dict[str, np.ndarray]:
    """Candidate plans (before validity checks) as a grid of :data:`PLAN_FIELDS`.

    Open fields range over: tp and cp powers of two up to a node, pp the divisors of the layer
    count up to the GPU count, vp 1/2/4, micro-batch powers of two up to the global batch,
    recompute none/selective/full (CNNs: none/full/sqrt; selective only without flash attention,
    whose kernel already recomputes the attention core), ZeRO 0-3.  ``dp`` follows from the
    others.  Without a global batch, one micro-batch (the given one, else
    :func:`default_micro_batch`) per data-parallel rank at the largest data-parallel degree the
    fixed degrees allow, so every plan trains on the same number of samples per step.

    Each field is an integer array shaped to broadcast over the grid (one axis per open field),
    so rules can be checked without materialising the grid; :func:`select` gathers plans from it.
    """
    transformer = workload.family == "transformer"
    node_powers = [p for p in POWERS_OF_TWO if p <= gpus_per_node]
    tp = _choices(plan.tp, node_powers if transformer else [1])
    cp = _choices(plan.cp, [p for p in node_powers if p <= 8] if transformer else [1])
    pp = _choices(plan.pp, _divisors(workload.layers, num_gpus) if transformer else [1])
    vp = _choices(plan.vp, [1, 2, 4] if transformer else [1])
    strategies = (("none", "full") if flash_attention else ("none", "selective", "full")) if transformer \
        else ("none", "full", "sqrt")
    recompute = [RECOMPUTE_CODES[plan.recompute]] if plan.recompute else [RECOMPUTE_CODES[s] for s in strategies]
    zero = _choices(plan.zero, [0, 1, 2, 3])
    widest_dp = plan.dp or max(1, num_gpus // ((plan.tp or 1) * (plan.pp or 1) * (plan.cp or 1)))
    global_batch = plan.global_batch or widest_dp * (plan.micro_batch or default_micro_batch(workload.family))
    micro = _choices(plan.micro_batch, [p for p in POWERS_OF_TWO if p <= max(1, global_batch)])
    axes = (tp, pp, cp, vp, micro, recompute, zero)
    plans = {name: np.asarray(values, dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(axes))])
             for axis, (name, values) in enumerate(zip(("tp", "pp", "cp", "vp", "micro_batch", "recompute", "zero"),
                                                       axes))}
    plans["dp"] = np.maximum(1, num_gpus // (plans["tp"] * plans["pp"] * plans["cp"]))
    if plan.dp is not None:
        plans["dp"] = np.full_like(plans["dp"], plan.dp)
    plans["global_batch"] = np.array(global_batch, dtype=np.int64)
    plans["recompute_every"] = np.array(plan.recompute_every or 1, dtype=np.int64)
    sequence_parallel = plan.sequence_parallel if plan.sequence_parallel is not None else True
    plans["sequence_parallel"] = ((plans["tp"] > 1) & sequence_parallel).astype(np.int64)
    return {name: plans[name] for name in PLAN_FIELDS}


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
    names = list(RECOMPUTE_CODES)
    return [{field: (names[int(plans[field][i])] if field == "recompute" else int(plans[field][i]))
             for field in PLAN_FIELDS} for i in range(len(plans["tp"]))]
