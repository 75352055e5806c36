"""The chain (after pvlib's ModelChain): the step time of training plans, step by step,
vectorized over plans.

:func:`run_chain` runs the named :data:`STEPS` in order over plans held as numpy arrays (see
:mod:`perfmodel.plans`), so ``estimate`` (one plan) and ``search`` (a million plans) run the
same code; each step is a pure function ``step(inputs, so_far) -> dict of arrays`` that composes
the cost models of :mod:`perfmodel.models`, nothing else, and can be replaced by name.  The
:class:`ChainResult` keeps what every step produced; :func:`evaluate` returns its outputs.

compute -> recompute -> tp_comm -> cp_comm -> moe_comm -> pipeline -> dp_comm -> zero_gather ->
optimizer -> offload -> overhead -> input -> memory (each step's docstring cites its formula).  The
components of ``breakdown_s`` are exposed times: they add up to ``step_time_s``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from perfmodel.hardware.catalog import require_network
from perfmodel.hardware.specs import Cluster
from perfmodel.models import comm, compute, datapipe, memory, offload, recompute
from perfmodel.models.memory import activation_bytes_per_value
from perfmodel.models.stages import cost_balanced_stages, head_cost_in_layers, stage_layers
from perfmodel.plans import RECOMPUTE_CODES
from perfmodel.units import format_memory
from perfmodel.vocabulary import (COST_BALANCED_STAGES, DP_REDUCE_AFTER_BACKWARD, FULL_PRECISIONS,
                                  HALF_PRECISION_GRADIENT_REDUCE, TP_DGRAD_OVERLAP, ZERO3_REGATHER_ON_RECOMPUTE)
from perfmodel.workloads.ops import unique_plan_shapes

# the module, not the package's `transformer` function of the same name: its moe_all_to_all_bytes
transformer_workloads = importlib.import_module("perfmodel.workloads.transformer")

BREAKDOWN = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "moe_comm", "pp_bubble", "pp_comm",
             "dp_comm", "zero_gather", "optimizer", "offload", "overhead", "input")

# bottleneck names of the breakdown components
BOTTLENECK_OF = {
    "forward": "compute", "backward": "compute", "recompute": "compute",
    "tp_comm": "TP communication", "cp_comm": "CP communication", "moe_comm": "EP communication",
    "pp_bubble": "pipeline bubble",
    "pp_comm": "PP communication", "dp_comm": "DP communication", "zero_gather": "DP communication",
    "optimizer": "memory bandwidth", "offload": "PCIe (offload)", "overhead": "framework overhead", "input": "input pipeline",
}

# The parts of a step beyond the compute passes, grouped by the physics that times them: the
# synchronous collectives inside each layer (TP, CP, expert all-to-all), the data-parallel
# gradient and parameter collectives, the pipeline's bubble and transfers, and the per-step work
# (optimizer, offload, fixed overhead, input).  The chain reports each group's share of the step
# (``share_<group>``); the interval model widens an estimate whose share exceeds every fitted row's
# (perfmodel.calibration.intervals.untested_share).
STEP_SHARES = {
    "layer_comm": ("tp_comm", "cp_comm", "moe_comm"),
    "data_comm": ("dp_comm", "zero_gather"),
    "pipeline": ("pp_bubble", "pp_comm"),
    "step_work": ("optimizer", "offload", "overhead", "input"),
}

# all-to-alls per MoE layer and micro-batch: dispatch and combine forward, their gradients backward
MOE_ALL_TO_ALLS_PER_LAYER = 4.0

# Bytes an optimizer step reads + writes per parameter it updates (memory-bound element-wise
# kernel): Adam mixed precision reads fp32 master, m, v, fp32 grad (16) and writes master, m, v
# and the 16-bit weight copy (14); SGD with momentum reads master, momentum, grad (12) and writes
# master, momentum, 16-bit weights (10); fp32 training has no 16-bit copy.
OPTIMIZER_STEP_BYTES = {("adam", True): 30.0, ("adam", False): 28.0, ("sgd", True): 22.0, ("sgd", False): 20.0}


# the per-micro-batch compute times of _unique_compute (seconds; the framework's kernels scale them)
_COMPUTE_TIMES = ("layer_fwd", "layer_bwd", "attn_fwd", "pre_fwd", "pre_bwd", "post_fwd", "post_bwd",
                  "layer_weight_cast", "pre_weight_cast", "post_weight_cast", "wgrad_window")


def _unique_compute(workload, gpu, precision, flash, profile, micro_batch, tp, cp, sequence_parallel,
                    cuda_graphs=False, framework=None, channels_last=True) -> dict[str, np.ndarray]:
    """Per-micro-batch compute terms for each plan, evaluated once per distinct (mb, tp, cp) and
    sequence-parallel setting (a transformer's norms and residual adds split over the
    tensor-parallel ranks or not); the host dispatches at
    :func:`~perfmodel.models.compute.host_dispatch_seconds` for ``framework`` and the GPU."""
    unique_mb, unique_tp, unique_cp, inverse = unique_plan_shapes(micro_batch, tp, cp)
    split = (np.asarray(sequence_parallel).ravel() > 0) & (workload.family == "transformer")
    terms = {on: _shape_compute(workload.ops(unique_mb, unique_tp, unique_cp, precision=precision,
                                             flash_attention=flash, sequence_parallel=on,
                                             channels_last=channels_last),
                                workload, gpu, precision, profile, cuda_graphs, framework)
             for on in map(bool, np.unique(split))}
    either = next(iter(terms.values()))
    return {name: np.where(split, terms.get(True, either)[name][inverse], terms.get(False, either)[name][inverse])
            for name in either}


def _shape_compute(table, workload, gpu, precision, profile, cuda_graphs, framework) -> dict[str, np.ndarray]:
    """:func:`_unique_compute`'s terms for each plan shape of the op ``table``."""
    sustained = profile.get("sustained_clock_fraction", gpu.architecture)
    roofline = compute.roofline_inputs(table, gpu, precision, profile, framework)
    forward, backward = compute.op_times(table, gpu, precision, profile, sustained=sustained, host_floor=False,
                                         framework=framework, inputs=roofline)
    launches_fwd, launches_bwd = compute.kernel_launches(table, precision, framework)
    host = 0.0 if cuda_graphs else compute.host_dispatch_seconds(profile, framework, gpu.architecture)
    # the host one standard error slower (log space): what an uncertain host time can do to the passes
    host_slow = host * np.exp(compute.host_log_error(profile, framework, gpu.architecture))
    weight_cast = compute.fp8_cast_times(table, gpu, precision, profile, cuda_graphs, framework)[1]  # once per step
    repeat = table.per_op("repeat")
    op_seconds = (forward + backward) * repeat
    layer = table.mask(placement="layer")
    attention = table.mask(kind=("attention", "softmax"), placement="layer")
    # the weight-gradient GEMM of a column-parallel layer (half its backward GEMM work), mean over them
    column = table.column_parallel.reshape(layer.shape) & layer
    wgrad_window = ((backward / 2.0 * repeat * column).sum(axis=0)
                    / np.maximum((repeat * column).sum(axis=0), 1.0))
    shape = np.shape(op_seconds.sum(axis=0))

    def queued(seconds, launches, mask):
        """The selected ops as one asynchronously dispatched sequence (compute.queued_time):
        (seconds, whether the host's dispatch sets them, seconds with the slower host)."""
        gpu_s = (seconds * repeat * mask).sum(axis=0)
        kernels = np.broadcast_to((launches * repeat * mask).sum(axis=0), shape)
        return (compute.queued_time(gpu_s, kernels, host), kernels * host > gpu_s,
                compute.queued_time(gpu_s, kernels, host_slow))

    passes = {f"{where}_{direction}": queued(seconds, launches, table.mask(placement=where))
              for where in ("layer", "pre", "post")
              for direction, seconds, launches in (("fwd", forward, launches_fwd), ("bwd", backward, launches_bwd))}
    pass_seconds = sum(time for time, _, _ in passes.values())
    terms = {
        **{name: time for name, (time, _, _) in passes.items()},
        "attn_fwd": queued(forward, launches_fwd, attention)[0],
        "wgrad_window": np.broadcast_to(wgrad_window, shape),
        "layer_weight_cast": (weight_cast * repeat * layer).sum(axis=0),
        "pre_weight_cast": (weight_cast * table.mask(placement="pre")).sum(axis=0),
        "post_weight_cast": (weight_cast * table.mask(placement="post")).sum(axis=0),
        "layer_flops": table.total("flops", placement="layer"),
        "attn_flops": table.total("flops", kind=("attention", "softmax"), placement="layer"),
        "layer_params": table.total("params", placement="layer"),
        "pre_params": table.total("params", placement="pre"),
        "post_params": table.total("params", placement="post"),
        "memory_bound_share": (op_seconds * compute.memory_bound(table, gpu, precision, profile, sustained,
                                                                        inputs=roofline)
                               ).sum(axis=0) / op_seconds.sum(axis=0),
        # the share of the passes' time the host's dispatch sets (compute.queued_time)
        "launch_bound_share": sum(time * host_bound for time, host_bound, _ in passes.values()) / pass_seconds,
        # how much longer the passes take with the host one standard error slower (ratio >= 1)
        "host_slowdown": sum(slow for _, _, slow in passes.values()) / pass_seconds,
        # a mixture of experts' expert weights (all experts, as the op table holds them)
        "expert_params": (table.total("params", placement="layer", expert=True) if _is_moe(workload)
                          else np.zeros_like(table.total("params", placement="layer"))),
    }
    return terms


@dataclass(frozen=True)
class ChainInputs:
    """What every step reads: the workload, the cluster (catalog), the plans as arrays of
    :data:`perfmodel.plans.PLAN_FIELDS`, the plan settings shared by all plans, the profile, the
    scenario's data section, whether to write memory reasons, whether the step runs as CUDA graphs,
    the training framework (a name of :data:`perfmodel.vocabulary.FRAMEWORKS`, the group of the
    ``per="framework"`` parameters; None = not stated, their pooled value) and whether a CNN's
    activations are held channels-last (:data:`perfmodel.vocabulary.CONV_TRANSPOSE_PRECISIONS`)."""

    workload: Any
    cluster: Cluster
    plans: dict[str, np.ndarray]
    precision: str
    flash_attention: bool
    optimizer: str
    profile: Any
    data: Any = None
    memory_reasons: bool = False
    cuda_graphs: bool = False
    framework: str | None = None
    channels_last: bool = True

    def degree(self, name: str) -> np.ndarray:
        """A plan field as floats (degrees, batch sizes)."""
        return self.plans[name].astype(float)


@dataclass
class ChainResult:
    """What each step produced (``steps[name]``: its arrays, in :data:`STEPS` order) and the
    outputs (``step_time_s``, ``<component>_s``, rates, ``memory_*``) as :func:`evaluate` returns them."""

    steps: dict[str, dict[str, Any]]
    outputs: dict[str, Any]


def _compute(inputs: ChainInputs, so_far: dict) -> dict:
    """Forward and backward time of one micro-batch on the slowest pipeline stage (per-op roofline,
    :func:`perfmodel.models.compute.op_times`), the most parameters a stage's GPU holds (a mixture
    of experts: ``experts / ep`` of its experts, :func:`expert_parallel`), the layers of
    the largest stage (:func:`stage_layers`: uneven stages or interleaved chunks; the largest sets the pace; a framework of
    :data:`~perfmodel.vocabulary.COST_BALANCED_STAGES` places them by cost,
    :func:`~perfmodel.models.stages.cost_balanced_stages`, and the stage with the most work sets the pace,
    its neighbours' layer counts not mattering) and the micro-batches per step.  fp8: the weights' casts run once per step, on the first micro-batch
    (:func:`perfmodel.models.compute.fp8_cast_times`).  With CUDA graphs (``cuda_graphs``) the kernels of each micro-batch's
    forward and backward pass on a stage are one graph: no per-kernel host dispatch
    (:func:`perfmodel.models.compute.op_times`), but the pass takes at least one
    host dispatch, the graph's launch (assumed: one graph per pass and micro-batch, as
    Megatron-LM captures them).  Every compute time is divided by the framework's
    ``framework_compute_efficiency`` (its kernels' speed relative to the kernel model)."""
    plans, pp = inputs.plans, inputs.degree("pp")
    c = _unique_compute(inputs.workload, inputs.cluster.gpu, inputs.precision, inputs.flash_attention,
                        inputs.profile, plans["micro_batch"], plans["tp"], plans["cp"], plans["sequence_parallel"],
                        inputs.cuda_graphs, inputs.framework, inputs.channels_last)
    speed = inputs.profile.get("framework_compute_efficiency", inputs.framework)
    c.update({name: c[name] / speed for name in _COMPUTE_TIMES})
    micro_batches = inputs.degree("global_batch") / (inputs.degree("dp") * inputs.degree("micro_batch"))
    layers = inputs.workload.layers
    first, middle, last = stage_layers(layers, pp, inputs.degree("vp"))
    single_stage = pp == 1
    balanced = (inputs.framework in COST_BALANCED_STAGES and inputs.workload.family == "transformer"
                and bool(np.any(pp > 1)))
    if balanced:  # stages placed by cost: {pp: [(layers, holds pre, holds post) per stage]}
        head_cost = head_cost_in_layers(inputs.workload.shape)
        placements = {int(p): cost_balanced_stages(layers, head_cost, int(p)) for p in np.unique(pp[pp > 1])}

    def slowest_stage(per_model_layers, pre, post):
        per_layer = per_model_layers / layers
        if not balanced:
            return np.where(single_stage, per_model_layers + pre + post,
                            np.maximum.reduce([first * per_layer + pre, middle * per_layer, last * per_layer + post]))
        out = per_model_layers + pre + post
        for p, stages in placements.items():
            out = np.where(pp == p, np.maximum.reduce([n * per_layer + holds_pre * pre + holds_post * post
                                                       for n, holds_pre, holds_post in stages]), out)
        return out

    t_fwd = slowest_stage(c["layer_fwd"], c["pre_fwd"], c["post_fwd"])
    t_bwd = slowest_stage(c["layer_bwd"], c["pre_bwd"], c["post_bwd"])
    if inputs.cuda_graphs:  # one graph per micro-batch and pass: its launch is the host floor of the whole pass
        host = compute.host_dispatch_seconds(inputs.profile, inputs.framework, inputs.cluster.gpu.architecture)
        t_fwd, t_bwd = np.maximum(t_fwd, host), np.maximum(t_bwd, host)
    ep = expert_parallel(inputs)
    layer_params = c["layer_params"] - c["expert_params"] * (1.0 - 1.0 / ep)  # each rank keeps experts/ep
    params_local = slowest_stage(layer_params, c["pre_params"], c["post_params"])
    largest = np.maximum.reduce([first, middle, last])
    if balanced:
        for p, stages in placements.items():
            largest = np.where(pp == p, max(n for n, _, _ in stages), largest)
    weight_cast = slowest_stage(c["layer_weight_cast"], c["pre_weight_cast"], c["post_weight_cast"])
    return {**c, "micro_batches": micro_batches, "t_fwd": t_fwd, "t_bwd": t_bwd, "params_local": params_local,
            "ep": ep, "stage_layers": largest, "stage_share": largest / layers,
            "forward_s": micro_batches * t_fwd + weight_cast, "backward_s": micro_batches * t_bwd}


def _recompute(inputs: ChainInputs, so_far: dict) -> dict:
    """Forward work rerun in the backward pass: a share of the stage's layers (full, every_k,
    sqrt), or the attention core (selective; flash attention's backward already recomputes it)."""
    strategy = inputs.plans["recompute"]
    share = recompute.recompute_forward_share(strategy, RECOMPUTE_CODES, layers=so_far["stage_layers"],
                                              every=inputs.plans["recompute_every"])
    selective = (strategy == RECOMPUTE_CODES["selective"]) & (not inputs.flash_attention)
    t_recompute = np.where(selective, so_far["attn_fwd"], share * so_far["layer_fwd"]) * so_far["stage_share"]
    return {"recompute_share": share, "selective": selective, "t_recompute": t_recompute,
            "recompute_s": so_far["micro_batches"] * t_recompute}


def _tp_comm(inputs: ChainInputs, so_far: dict) -> dict:
    """Megatron-LM's two all-reduces per layer in the forward and two in the backward pass
    (Shoeybi et al. 2019, Fig. 3), or the equivalent reduce-scatter + all-gather pairs with
    sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2); two more in the forward pass that
    full recomputation repeats.  The forward ones are exposed.  A backward one is the input
    gradient of a column-parallel GEMM (qkv, MLP up); frameworks of
    :data:`~perfmodel.vocabulary.TP_DGRAD_OVERLAP` run it under that GEMM's weight-gradient GEMM
    (:func:`exposed_communication` with the mean such GEMM, ``tp_overlap_interference``), the others
    expose it too.  With sequence parallelism those frameworks' backward pass of a block is three
    half all-reduces (a ring all-reduce is a reduce-scatter then an all-gather): the all-gather of
    the output gradient (exposed), the all-gather of the layer's input again for its weight
    gradient (under the input-gradient GEMM) and the reduce-scatter of the input gradient (under
    the weight-gradient GEMM; Megatron-Core ``LinearWithGradAccumulationAndAsyncCommunication``).
    A TP group wider than a node runs its collectives over the inter-node network (legal, slow)."""
    tp = inputs.degree("tp")
    if inputs.workload.family != "transformer":
        return {"t_tp": np.zeros_like(tp), "tp_comm_s": np.zeros_like(tp)}
    shape = inputs.workload.shape
    tp_message = _tokens_per_rank(inputs) * shape.hidden * activation_bytes_per_value(inputs.precision)
    forward_collectives = 2.0 + 2.0 * so_far["recompute_share"]  # recomputed layers repeat their forward pair
    members_per_node = np.minimum(tp, inputs.cluster.gpus_per_node)
    t_tp_layer = comm.collective_time("all_reduce", tp_message, tp, members_per_node, **so_far["links"])
    t_backward = t_tp_layer
    if inputs.framework in TP_DGRAD_OVERLAP:
        window, interference = so_far["wgrad_window"], inputs.profile.get("tp_overlap_interference")
        half = 0.5 * t_tp_layer
        t_backward = np.where(inputs.plans["sequence_parallel"] > 0,
                              half + 2.0 * exposed_communication(half, window, interference),
                              exposed_communication(t_tp_layer, window, interference))
    t_tp = so_far["stage_layers"] * (forward_collectives * t_tp_layer + 2.0 * t_backward)
    return {"t_tp": t_tp, "tp_comm_s": so_far["micro_batches"] * t_tp}


def _cp_comm(inputs: ChainInputs, so_far: dict) -> dict:
    """Ring-attention key/value exchange of context parallelism, exposed where it outlasts the
    attention it overlaps."""
    tp, cp = inputs.degree("tp"), inputs.degree("cp")
    if inputs.workload.family != "transformer":
        return {"t_cp": np.zeros_like(tp), "cp_comm_s": np.zeros_like(tp)}
    shape, cluster = inputs.workload.shape, inputs.cluster
    kv_message = (2.0 * _tokens_per_rank(inputs) * shape.kv_heads * (shape.hidden / shape.heads) / tp
                  * activation_bytes_per_value(inputs.precision))
    cp_inter = tp * cp > cluster.gpus_per_node
    t_cp_transfer = 3.0 * (cp - 1) * so_far["stage_layers"] * comm.p2p_time(
        kv_message, **_p2p_link(so_far["links"], cp_inter, cluster.gpus_per_node))
    t_cp = np.maximum(0.0, t_cp_transfer - 3.0 * so_far["attn_fwd"] * so_far["stage_share"]) * (cp > 1)
    return {"t_cp": t_cp, "cp_comm_s": so_far["micro_batches"] * t_cp}


def _moe_comm(inputs: ChainInputs, so_far: dict) -> dict:
    """Mixture-of-experts token exchange: per MoE layer and micro-batch an all-to-all dispatch and
    an all-to-all combine in the forward pass and their two gradients in the backward pass
    (Lepikhin et al. 2021, GShard, Sec. 3.2; Fedus et al. 2022, Switch Transformer, Fig. 3), two
    more where full recomputation reruns the forward pass, on the critical path (Megatron-Core's
    default token dispatcher does not overlap them).  The expert-parallel group is the
    data-parallel ranks up to the number of experts (:func:`expert_parallel`; no separate ``ep``
    plan field); the expert weights' gradients are reduced with the others over the whole
    data-parallel group (a ring's time hardly depends on its size).  Dense models: 0.

    Bytes per all-to-all come from the workload (``moe_all_to_all_bytes`` of
    :mod:`perfmodel.workloads.transformer`: ``cf x top_k`` routed copies of each token's hidden
    vector); with sequence parallelism each tensor-parallel rank sends its ``1/tp`` of the tokens.
    """
    tp, ep = inputs.degree("tp"), so_far["ep"]
    if not _is_moe(inputs.workload):
        return {"t_moe": np.zeros_like(tp), "moe_comm_s": np.zeros_like(tp)}
    shape = inputs.workload.shape
    message = (transformer_workloads.moe_all_to_all_bytes(shape, inputs.degree("micro_batch"), inputs.degree("cp"),
                                                          inputs.precision)
               / np.where(inputs.plans["sequence_parallel"] > 0, tp, 1.0))
    gpus_per_node = inputs.cluster.gpus_per_node
    members_per_node = np.minimum(np.clip(gpus_per_node // (tp * inputs.degree("cp")), 1, None), ep)
    links = _shared_nics(so_far["links"], gpus_per_node / members_per_node)
    t_exchange = comm.collective_time("all_to_all", message, ep, members_per_node, **links)
    exchanges = MOE_ALL_TO_ALLS_PER_LAYER + 2.0 * so_far["recompute_share"]
    t_moe = exchanges * so_far["stage_layers"] * t_exchange
    return {"t_moe": t_moe, "moe_comm_s": so_far["micro_batches"] * t_moe}


def _is_moe(workload) -> bool:
    return workload.family == "transformer" and bool(getattr(workload.shape, "moe", False))


def expert_parallel(inputs: ChainInputs) -> np.ndarray:
    """Expert-parallel degree ``ep``: the data-parallel ranks, up to the number of experts, that
    split a mixture of experts' experts between them (``gcd(dp, experts)``, so each holds whole
    experts); 1 for dense models.  The dense weights stay replicated over them."""
    dp = inputs.plans["dp"]
    if not _is_moe(inputs.workload):
        return np.ones_like(dp, dtype=float)
    return np.gcd(dp, inputs.workload.shape.experts).astype(float)


def _pipeline(inputs: ChainInputs, so_far: dict) -> dict:
    """1F1B bubble (p - 1)/m of the ideal time, interleaved (p - 1)/(v m) (Narayanan et al. 2021,
    Sec. 2.2), and the stage-to-stage activation sends.  The slowest (largest) stage's micro-batch
    time sets the pace (:func:`stage_layers`)."""
    tp, pp, dp, cp, vp = (inputs.degree(name) for name in ("tp", "pp", "dp", "cp", "vp"))
    cluster = inputs.cluster
    if inputs.workload.family == "transformer":
        pp_message = (_tokens_per_rank(inputs) * inputs.workload.shape.hidden
                      * activation_bytes_per_value(inputs.precision)
                      / np.where(inputs.plans["sequence_parallel"] > 0, tp, 1.0))
        pp_inter = (tp * cp * dp >= cluster.gpus_per_node) & (cluster.nodes > 1)
        t_pp_send = comm.p2p_time(pp_message, **_p2p_link(so_far["links"], pp_inter, cluster.gpus_per_node))
    else:
        t_pp_send = np.zeros_like(tp)
    t_microbatch = (so_far["t_fwd"] + so_far["t_bwd"] + so_far["t_recompute"] + so_far["t_tp"] + so_far["t_cp"]
                    + so_far["t_moe"])
    return {"t_pp_send": t_pp_send, "t_microbatch": t_microbatch,
            "pp_bubble_s": (pp - 1.0) / vp * t_microbatch,
            "pp_comm_s": np.where(pp > 1, 2.0 * vp * so_far["micro_batches"] * t_pp_send, 0.0)}


def _dp_links(inputs: ChainInputs, so_far: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """(group size, members per node, link numbers) of the data-parallel x context-parallel group:
    ranks are ordered tp (fastest), cp, dp, pp, so the group takes every tp-th GPU of a node and
    the node's groups share its NICs."""
    group = inputs.degree("dp") * inputs.degree("cp")
    gpus_per_node = inputs.cluster.gpus_per_node
    members_per_node = np.minimum(np.clip(gpus_per_node // inputs.degree("tp"), 1, None), group)
    return group, members_per_node, _shared_nics(so_far["links"], gpus_per_node / members_per_node)


def gradient_reduce_bytes(inputs: ChainInputs) -> float:
    """Bytes per gradient in the data-parallel reduction: 2 for fp16 training under a framework of
    :data:`~perfmodel.vocabulary.HALF_PRECISION_GRADIENT_REDUCE` (Megatron-LM), else the
    ``gradient_reduce_bytes`` parameter (fp32 gradients)."""
    if inputs.precision == "fp16" and inputs.framework in HALF_PRECISION_GRADIENT_REDUCE:
        return 2.0
    return inputs.profile.get("gradient_reduce_bytes")


def _dp_comm(inputs: ChainInputs, so_far: dict) -> dict:
    """Gradient all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1; Rajbhandari et al. 2020, Sec. 7)
    once per step in buckets under the last micro-batch's backward pass: only the part that does
    not fit under :func:`dp_overlap` of it is exposed (all of it for Megatron-LM).  ZeRO-2 keeps
    only its shard of the gradients, so it reduce-scatters them under every micro-batch's backward
    pass (DeepSpeed stage 2, PyTorch FSDP ``SHARD_GRAD_OP``); ZeRO-3/FSDP reduce-scatters every
    unit's gradients in every micro-batch (:func:`zero3_exposed`), and its ``dp_comm_s`` is what
    those reduce-scatters add to the parameter all-gathers of the backward pass."""
    group, members_per_node, links = _dp_links(inputs, so_far)
    grad_bytes = so_far["params_local"] * gradient_reduce_bytes(inputs)
    t_allreduce = comm.collective_time("all_reduce", grad_bytes, group, members_per_node, **links)
    t_scatter = comm.collective_time("reduce_scatter", grad_bytes, group, members_per_node, **links)
    zero, profile = inputs.plans["zero"], inputs.profile
    t_grad = np.where(zero == 0, t_allreduce, t_scatter)
    t_mem_grad = np.where(zero == 0, memory_charge_time(inputs, "all_reduce", grad_bytes, group),
                          memory_charge_time(inputs, "reduce_scatter", grad_bytes, group))
    per_backward = exposed_communication(t_grad, dp_overlap(inputs) * so_far["t_bwd"],
                                         profile.get("overlap_interference"), t_mem_grad)
    zero3 = zero3_exposed(inputs, so_far)
    return {"t_grad": t_grad, **zero3, "dp_comm_s": np.select(
        [zero == 3, zero == 2], [zero3["zero3_scatter_s"], so_far["micro_batches"] * per_backward], per_backward)}


def dp_overlap(inputs: ChainInputs) -> float:
    """Share of a pass under which the gradient reduction of ZeRO 0-2 (and ZeRO-1/2's parameter
    all-gather) hides: ``dp_overlap``, or 0 for a framework that runs them between the passes by
    default (:data:`~perfmodel.vocabulary.DP_REDUCE_AFTER_BACKWARD`: Megatron-LM)."""
    return 0.0 if inputs.framework in DP_REDUCE_AFTER_BACKWARD else inputs.profile.get("dp_overlap")


def zero3_exposed(inputs: ChainInputs, so_far: dict) -> dict:
    """Exposed seconds per step of ZeRO-3 / FSDP as it runs (Rajbhandari et al. 2020, Sec. 7.2.2;
    Zhao et al. 2023, PyTorch FSDP, Sec. 3.3): in every micro-batch each of the stage's ``n``
    units (layers; the embedding and output layer share them) all-gathers its parameters (in
    collectives of at most ``zero3_gather_bucket_params``: the whole unit in one for PyTorch FSDP
    and Megatron-FSDP, DeepSpeed's prefetch bucket for DeepSpeed) before
    its forward, again before its backward, and reduce-scatters its gradients after it: 3 x the
    parameter bytes per micro-batch where ZeRO-1 moves 2 x per step (Sec. 7: 3 Psi vs 2 Psi).

    With ``zero3_prefetch_units`` >= 1 the next unit's all-gather runs under the current unit's
    compute (forward: ``A`` under ``t_f``; backward: all-gather + reduce-scatter ``A + R`` under
    ``t_b`` plus the unit's recomputed forward ``t_r``), each hiding under
    ``zero3_overlap x dp_overlap`` of it (:func:`exposed_communication`); the first unit's gathers
    and the last reduce-scatter have nothing to hide under.  A framework that gathers a unit again
    for its recomputed forward (:data:`~perfmodel.vocabulary.ZERO3_REGATHER_ON_RECOMPUTE`:
    DeepSpeed) gathers ``A_b = (1 + r) A`` in the backward pass, ``r`` the recomputed share of the
    layers; others ``A_b = A``.  Per micro-batch::

        forward  = A + (n - 1) X(A, h t_f)
        backward = A_b + (n - 1) X(A_b + R, h (t_b + t_r)) + R

    and a pipeline runs ``m + (pp - 1)/vp`` micro-batch slots, bubble included.  Without prefetch
    (0 units) every collective is exposed.  Returns ``zero3_gather_s`` (all-gathers) and
    ``zero3_scatter_s`` (what the reduce-scatters add), both 0 for plans with ZeRO < 3.
    """
    group, members_per_node, links = _dp_links(inputs, so_far)
    profile = inputs.profile
    units = np.maximum(so_far["stage_layers"], 1.0)
    unit_params = so_far["params_local"] / units
    gathers = np.ceil(unit_params / profile.get("zero3_gather_bucket_params", inputs.framework))
    gather_bytes = unit_params * activation_bytes_per_value(inputs.precision)
    t_ag = gathers * comm.collective_time("all_gather", gather_bytes / gathers, group, members_per_node, **links)
    scatter_bytes = unit_params * gradient_reduce_bytes(inputs)
    t_rs = comm.collective_time("reduce_scatter", scatter_bytes, group, members_per_node, **links)
    t_mem_ag = memory_charge_time(inputs, "all_gather", gather_bytes, group)
    t_mem_rs = memory_charge_time(inputs, "reduce_scatter", scatter_bytes, group)
    prefetch = profile.get("zero3_prefetch_units") >= 1.0
    hide = prefetch * profile.get("zero3_overlap") * profile.get("dp_overlap")
    interference = profile.get("overlap_interference")
    t_f, t_b = so_far["t_fwd"] / units, (so_far["t_bwd"] + so_far["t_recompute"]) / units
    regather = inputs.framework in ZERO3_REGATHER_ON_RECOMPUTE
    regathered = 1.0 + regather * so_far["recompute_share"]
    t_ag_b, t_mem_ag_b = t_ag * regathered, t_mem_ag * regathered
    forward = t_ag + (units - 1.0) * exposed_communication(t_ag, hide * t_f, interference, t_mem_ag)
    backward_gather = t_ag_b + (units - 1.0) * exposed_communication(t_ag_b, hide * t_b, interference, t_mem_ag_b)
    backward = t_ag_b + (units - 1.0) * exposed_communication(t_ag_b + t_rs, hide * t_b, interference,
                                                              t_mem_ag_b + t_mem_rs) + t_rs
    slots = so_far["micro_batches"] + (inputs.degree("pp") - 1.0) / inputs.degree("vp")
    zero3 = inputs.plans["zero"] == 3
    return {"t_zero3_gather": t_ag, "t_zero3_scatter": t_rs,
            "zero3_gather_s": np.where(zero3, slots * (forward + backward_gather), 0.0),
            "zero3_scatter_s": np.where(zero3, slots * (backward - backward_gather), 0.0)}


def _zero_gather(inputs: ChainInputs, so_far: dict) -> dict:
    """Parameter all-gathers: ZeRO-1/2 gather the updated shards once per step, under :func:`dp_overlap`
    of the next step's first forward pass (Megatron-LM's distributed optimizer with
    ``--overlap-param-gather``); ZeRO-3/FSDP gathers every unit before every micro-batch's forward
    and backward pass (:func:`zero3_exposed`)."""
    group, members_per_node, links = _dp_links(inputs, so_far)
    param_bytes = so_far["params_local"] * activation_bytes_per_value(inputs.precision)
    t_gather = comm.collective_time("all_gather", param_bytes, group, members_per_node, **links)
    zero, profile = inputs.plans["zero"], inputs.profile
    once = exposed_communication(t_gather, dp_overlap(inputs) * so_far["t_fwd"],
                                 profile.get("overlap_interference"),
                                 memory_charge_time(inputs, "all_gather", param_bytes, group))
    return {"t_gather": t_gather, "zero_gather_s": np.select(
        [zero == 3, zero >= 1], [so_far["zero3_gather_s"], once], 0.0)}


def _optimizer(inputs: ChainInputs, so_far: dict) -> dict:
    """The optimizer step: a memory-bound element-wise kernel over the parameters this GPU updates
    (:data:`OPTIMIZER_STEP_BYTES`; ZeRO-1+ updates a 1/dp shard)."""
    gpu, profile = inputs.cluster.gpu, inputs.profile
    mixed = inputs.precision not in FULL_PRECISIONS
    step_bytes = (OPTIMIZER_STEP_BYTES[(inputs.optimizer, mixed)] * so_far["params_local"]
                  / np.where(inputs.plans["zero"] >= 1, inputs.degree("dp"), 1.0))
    optimizer_time = compute.roofline_time(
        0.0, step_bytes, gpu.peak("fp32"), gpu.memory_bandwidth, 1.0,
        profile.get("memory_efficiency", gpu.architecture), profile.get("kernel_launch_overhead"))
    return {"optimizer_s": optimizer_time * np.ones_like(inputs.degree("tp"))}


def _overhead(inputs: ChainInputs, so_far: dict) -> dict:
    """The per-step overhead of the framework's training loop (``step_overhead``)."""
    return {"overhead_s": inputs.profile.get("step_overhead", inputs.framework) * np.ones_like(inputs.degree("tp"))}


def _input(inputs: ChainInputs, so_far: dict) -> dict:
    """Input-pipeline time the step waits for (:func:`perfmodel.models.datapipe.exposed_input_time`)."""
    busy = sum(so_far[f"{name}_s"] for name in BREAKDOWN if name != "input")
    samples_per_node = inputs.degree("global_batch") / inputs.cluster.nodes
    return {"busy_s": busy, "input_s": datapipe.exposed_input_time(samples_per_node, busy, inputs.data,
                                                                   inputs.cluster, inputs.profile)}


def _offload(inputs: ChainInputs, so_far: dict) -> dict:
    """PCIe traffic of offloading (:mod:`perfmodel.models.offload`; Ren et al. 2021, Sec. 4): the
    gradient shard goes to the host under ``dp_overlap`` of the last backward pass, the updated
    weights come back after the CPU step (exposed); offloaded weights are fetched for every
    micro-batch's forward and backward, prefetched under ``dp_overlap`` of its compute.  One x16
    link per GPU at the rate of the GPU's PCIe generation.  Assumptions (not modelled): the CPU
    optimizer step takes the GPU kernel's place in ``optimizer_s``, the transfers reach the link
    rate, and they do not contend with the gradient collectives for the same overlap window."""
    codes = inputs.plans["offload"]
    zeros = np.zeros_like(inputs.degree("tp"))
    if not np.any(codes):
        return {"offload_s": zeros}
    weight_b, gradient_b, optimizer_b = memory.state_bytes_per_param(inputs.precision, inputs.optimizer)
    state = memory.model_state_bytes(so_far["params_local"], inputs.degree("dp"), inputs.plans["zero"],
                                     inputs.precision, inputs.optimizer)
    down, up, per_microbatch, back = offload.offload_traffic_bytes(
        codes, state["weights"], state["optimizer"], weight_bytes_per_param=weight_b,
        gradient_bytes_per_param=gradient_b, optimizer_bytes_per_param=optimizer_b)
    bandwidth = offload.pcie_bandwidth_per_direction(inputs.cluster.gpu.pcie_generation)
    profile = inputs.profile
    hide, interference = profile.get("dp_overlap"), profile.get("overlap_interference")
    fetch = exposed_communication(per_microbatch / bandwidth, hide * (so_far["t_fwd"] + so_far["t_bwd"]), interference,
                                  memory_charge_time(inputs, "send_recv", per_microbatch, 1.0))
    step = (exposed_communication(down / bandwidth, hide * so_far["t_bwd"], interference,
                                  memory_charge_time(inputs, "send_recv", down, 1.0))
            + (up + back) / bandwidth + so_far["micro_batches"] * fetch)
    return {"offload_s": np.where(codes > 0, step, 0.0)}


def _memory(inputs: ChainInputs, so_far: dict) -> dict:
    """Memory per GPU and whether it fits (:func:`perfmodel.models.memory.plan_memory`), less what
    the plan offloads (:func:`perfmodel.models.offload.offload_memory`), which must fit in the
    GPU's share of the node's host memory (catalog instance ``host_memory``; unknown: no offload)."""
    mem = memory.plan_memory(inputs.workload, inputs.cluster.gpu, inputs.plans, precision=inputs.precision,
                             optimizer=inputs.optimizer, flash_attention=inputs.flash_attention,
                             profile=inputs.profile, with_reasons=inputs.memory_reasons)
    return {f"memory_{key}": value for key, value in _apply_offload(inputs, mem, inputs.plans["offload"]).items()}


def _apply_offload(inputs: ChainInputs, mem: dict, codes: np.ndarray) -> dict:
    """The :func:`_memory` breakdown with the offloaded bytes moved to ``host`` (per GPU) and
    ``host_capacity`` / ``host_fits`` added; the allocator share of what left shrinks with it."""
    _, gradient_b, optimizer_b = memory.state_bytes_per_param(inputs.precision, inputs.optimizer)
    removed, host = offload.offload_memory(
        codes, mem["weights"], mem["gradients"], mem["optimizer"], inputs.workload.layers / inputs.degree("pp"),
        gradient_bytes_per_param=gradient_b, optimizer_bytes_per_param=optimizer_b)
    mem = dict(mem)
    moved = sum(removed.values())
    for name, value in removed.items():
        mem[name] = mem[name] - value
    mem["allocator"] = mem["allocator"] - inputs.profile.get("allocator_fragmentation") * moved
    mem["total"] = mem["total"] - moved * (1.0 + inputs.profile.get("allocator_fragmentation"))
    mem["headroom"] = mem["capacity"] - mem["total"]
    instance = inputs.cluster.instance
    node_host = instance.host_memory if instance is not None and instance.host_memory is not None else np.nan
    if not np.isfinite(offload.pcie_bandwidth_per_direction(inputs.cluster.gpu.pcie_generation)):
        node_host = np.nan  # no PCIe rate: offloading is not priced
    mem["host"] = host
    mem["host_capacity"] = np.full_like(host, node_host / inputs.cluster.gpus_per_node)
    mem["host_fits"] = (codes == 0) | (host <= mem["host_capacity"])
    mem["fits"] = (mem["headroom"] >= 0) & mem["host_fits"]
    if "reasons_text" in mem:
        mem["reasons_text"] = [_offload_reasons(mem, i) for i in range(len(codes))]
    return mem


def _offload_reasons(mem: dict, i: int) -> list[str]:
    reasons = memory.memory_reasons({key: mem[key][i] for key in memory.COMPONENTS + ("total", "capacity")})
    if not mem["host_fits"][i]:
        capacity = mem["host_capacity"][i]
        reasons.append("offload needs the node's host memory and the GPU's PCIe generation in the catalog"
                       if not np.isfinite(capacity) else
                       f"offload needs {format_memory(mem['host'][i])} of host memory per GPU but the node "
                       f"offers {format_memory(capacity)} per GPU")
    return reasons


# the chain's steps in order; each reads the ChainInputs and what the steps before it produced
STEPS: dict[str, Callable[[ChainInputs, dict], dict]] = {
    "compute": _compute, "recompute": _recompute, "tp_comm": _tp_comm, "cp_comm": _cp_comm,
    "moe_comm": _moe_comm, "pipeline": _pipeline, "dp_comm": _dp_comm, "zero_gather": _zero_gather,
    "optimizer": _optimizer, "offload": _offload, "overhead": _overhead, "input": _input, "memory": _memory,
}


def _tokens_per_rank(inputs: ChainInputs) -> np.ndarray:
    return inputs.degree("micro_batch") * inputs.workload.shape.processed_len / inputs.degree("cp")


def _rates(inputs: ChainInputs, values: dict) -> dict:
    """Step time, throughput and FLOP rates (model FLOPs: PaLM appendix B; hardware FLOPs add
    recompute)."""
    step_time = values["busy_s"] + values["input_s"]
    global_batch, pp = inputs.degree("global_batch"), inputs.degree("pp")
    num_gpus = float(inputs.cluster.num_gpus)
    workload = inputs.workload
    model_flops = workload.flops_per_sample(training=True) * global_batch
    # op-table FLOPs are per GPU; each GPU of a stage reruns its share of the stage's layers
    recompute_flops = num_gpus * values["micro_batches"] * np.where(
        values["selective"], values["attn_flops"], values["recompute_share"] * values["layer_flops"]) / pp
    peak = inputs.cluster.gpu.peak(inputs.precision)
    out = {f"{name}_s": values[f"{name}_s"] for name in BREAKDOWN}
    out["step_time_s"] = step_time
    out["samples_per_s"] = global_batch / step_time
    out["tokens_per_s"] = out["samples_per_s"] * (workload.tokens_per_sample or np.nan)
    out["tflops_per_gpu"] = model_flops / step_time / num_gpus / 1e12
    out["mfu"] = model_flops / step_time / num_gpus / peak
    out["hfu"] = (model_flops + recompute_flops) / step_time / num_gpus / peak
    out["gpu_utilization"] = (values["forward_s"] + values["backward_s"] + values["recompute_s"]) / step_time
    out["num_micro_batches"] = values["micro_batches"]
    out["memory_bound_share"] = values["memory_bound_share"]
    out["launch_bound_share"] = values["launch_bound_share"]
    out["host_log_sensitivity"] = host_log_sensitivity(values["host_slowdown"], out["gpu_utilization"])
    for group, parts in STEP_SHARES.items():
        out[f"share_{group}"] = sum(values[f"{part}_s"] for part in parts) / step_time
    out.update({key: value for key, value in values.items() if key.startswith("memory_")})
    return out


def run_chain(workload, cluster: Cluster, plans: dict[str, np.ndarray], *, precision: str,
              flash_attention: bool, optimizer: str, profile, data=None, memory_reasons: bool = False,
              steps: dict[str, Callable] | None = None, cuda_graphs: bool = False,
              framework: str | None = None, channels_last: bool = True) -> ChainResult:
    """Run the :data:`STEPS` in order over the plans and keep what each produced.

    ``steps`` replaces steps by name: ``{"tp_comm": my_tp_comm}`` where ``my_tp_comm(inputs,
    so_far)`` returns the arrays its default returns (``t_tp`` and ``tp_comm_s``); ``so_far``
    holds every array the earlier steps produced plus ``links`` (:func:`perfmodel.models.comm.link_numbers`).
    """
    unknown = sorted(set(steps or {}) - set(STEPS))
    if unknown:
        raise ValueError(f"unknown chain step(s) {unknown}; steps: {', '.join(STEPS)}")
    require_network(cluster)
    inputs = ChainInputs(workload, cluster, plans, precision, flash_attention, optimizer, profile, data,
                         memory_reasons, cuda_graphs, framework, channels_last)
    values: dict[str, Any] = {"links": comm.link_numbers(cluster, profile)}
    produced = {}
    for name, default in STEPS.items():
        produced[name] = (steps or {}).get(name, default)(inputs, values)
        values.update(produced[name])
    return ChainResult(steps=produced, outputs=_rates(inputs, values))


def evaluate(workload, cluster: Cluster, plans: dict[str, np.ndarray], *, precision: str,
             flash_attention: bool, optimizer: str, profile, data=None,
             memory_reasons: bool = False, steps: dict[str, Callable] | None = None,
             cuda_graphs: bool = False, framework: str | None = None,
             channels_last: bool = True) -> dict[str, np.ndarray]:
    """Every estimate quantity for every plan (arrays of the plans' length): the outputs of
    :func:`run_chain`.

    ``plans`` holds the :data:`perfmodel.plans.PLAN_FIELDS` as integer arrays of equal length; plans
    must already be valid (see :func:`perfmodel.plans.check_plans`).  Returns a dict with
    ``step_time_s``, one array per :data:`BREAKDOWN` component (``<name>_s``), throughput, FLOP
    rates, MFU/HFU, each :data:`STEP_SHARES` group's share of the step (``share_<group>``), memory
    components (``memory_<component>``), ``memory_fits`` and, with
    ``memory_reasons``, ``memory_reasons_text`` (a list of reasons per plan).
    """
    return run_chain(workload, cluster, plans, precision=precision, flash_attention=flash_attention,
                     optimizer=optimizer, profile=profile, data=data, memory_reasons=memory_reasons,
                     steps=steps, cuda_graphs=cuda_graphs, framework=framework,
                     channels_last=channels_last).outputs


def host_log_sensitivity(pass_slowdown, compute_share):
    """log(step time with the host one standard error slower / step time): the compute passes
    (``compute_share`` of the step, all of it exposed) grow by ``pass_slowdown``, the rest of the
    step stays, ``log(1 + compute_share (pass_slowdown - 1))``.  First order: communication that
    the longer passes would newly hide is not subtracted, so it errs on the wide side.  The
    interval model uses it as the host time's parameter uncertainty
    (:func:`perfmodel.calibration.intervals.log_sigma`, ``host``): a host time no row determined
    (a framework at its prior) widens the interval of a step that a slower host would slow."""
    return np.log1p(np.asarray(compute_share) * (np.asarray(pass_slowdown) - 1.0))


def exposed_communication(comm_time, hideable_compute, interference, memory_time=0.0):
    """Time a communication adds to the step when it runs under ``hideable_compute`` seconds of
    compute: the part that does not fit under it, plus what the part that does takes from the
    compute it overlaps -- ``interference`` x its seconds (the collective's kernels hold SMs for as
    long as it runs) and its share of ``memory_time``, the seconds of compute the whole
    collective's memory traffic displaces (:func:`memory_charge_time`; the bytes it copies and reduces
    contend with the GEMMs for HBM) -- at most the hidden seconds themselves: overlapping can
    serialize the two, not make them slower than one after the other.  Non-decreasing in
    ``comm_time`` and in ``memory_time`` while ``memory_time <= comm_time`` (the bound of
    ``overlap_interference_per_byte`` keeps it so)."""
    hidden = np.minimum(comm_time, hideable_compute)
    hidden_share = np.divide(hidden, comm_time, out=np.zeros_like(hidden, dtype=float), where=comm_time > 0)
    return comm_time - hidden + np.minimum(hidden, interference * hidden + hidden_share * memory_time)


def memory_charge_time(inputs: ChainInputs, collective: str, message_bytes, group_size):
    """Seconds of compute a hidden collective's memory traffic displaces on each GPU:
    ``overlap_interference_per_byte`` x the bytes it moves through the GPU (``message_bytes`` x
    nccl-tests' bus-bandwidth factor, :func:`perfmodel.models.comm.bus_bandwidth_factor`: about
    2 x the buffer for an all-reduce, once for an all-gather or reduce-scatter, whatever link
    carries them) over the GPU's memory bandwidth.  Charged per byte, not per second, so a
    collective that crosses a slower network costs the compute under it no more than the same
    bytes inside a node: what the GPU copies is the same."""
    moved = np.multiply(message_bytes, comm.bus_bandwidth_factor(collective, np.maximum(group_size, 1.0)))
    return inputs.profile.get("overlap_interference_per_byte") * moved / inputs.cluster.gpu.memory_bandwidth


def _p2p_link(links: dict, inter, gpus_per_node: int) -> dict:
    """Bandwidth and latency of one GPU's point-to-point send inside a node, or across nodes
    where every GPU of the node sends at once and gets its share of the node's NICs."""
    return {"bandwidth": np.where(inter, links["inter_bandwidth"] / gpus_per_node, links["intra_bandwidth"]),
            "latency": np.where(inter, links["inter_latency"], links["intra_latency"])}


def _shared_nics(links: dict, concurrent_groups_per_node) -> dict:
    """Link numbers for one of ``concurrent_groups_per_node`` groups that share a node's NICs."""
    return {**links, "inter_bandwidth": links["inter_bandwidth"] / concurrent_groups_per_node}
