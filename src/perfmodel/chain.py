"""The step time of training plans with its full breakdown, vectorized over plans.

:func:`evaluate` is the one formula path: it takes plans as numpy arrays (see
:mod:`perfmodel.plans`) and returns every quantity as an array, so ``estimate`` (one plan) and
``search`` (a million plans) run the same code.  It composes the cost models, nothing else:

* compute: per-op roofline times of the forward and backward pass
  (:func:`perfmodel.models.compute.op_times`), recomputation of the forward pass for the chosen
  strategy;
* tensor-parallel communication: Megatron-LM's two all-reduces per layer in the forward and two
  in the backward pass (Shoeybi et al. 2019, Fig. 3), or the equivalent reduce-scatter +
  all-gather pairs with sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2); two more in
  the forward pass that full recomputation repeats;
* pipeline: 1F1B bubble (p - 1)/m of the ideal time, interleaved (p - 1)/(v m) (Narayanan et al.
  2021, Sec. 2.2), and the stage-to-stage activation sends;
* context parallelism: ring-attention key/value exchange, exposed where it outlasts attention;
* data parallelism: gradient all-reduce (ZeRO-1/2: reduce-scatter + all-gather; ZeRO-3/FSDP adds
  a parameter all-gather in the forward and backward of every micro-batch; Rajbhandari et al.
  2020, Sec. 7) in buckets under the last micro-batch's backward pass: only the part that does not
  fit under it is exposed;
* optimizer step (memory-bound), a per-step framework overhead, and the input pipeline.

The components of ``breakdown_s`` are exposed times: they add up to ``step_time_s``.
"""

from __future__ import annotations

import numpy as np

from perfmodel.hardware.specs import Cluster
from perfmodel.models import comm, compute, datapipe, memory, recompute
from perfmodel.plans import RECOMPUTE_CODES
from perfmodel.workloads.ops import unique_plan_shapes

BREAKDOWN = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "pp_bubble", "pp_comm",
             "dp_comm", "zero_gather", "optimizer", "overhead", "input")

# bottleneck names of the breakdown components
BOTTLENECK_OF = {
    "forward": "compute", "backward": "compute", "recompute": "compute",
    "tp_comm": "TP communication", "cp_comm": "CP communication", "pp_bubble": "pipeline bubble",
    "pp_comm": "PP communication", "dp_comm": "DP communication", "zero_gather": "DP communication",
    "optimizer": "memory bandwidth", "overhead": "framework overhead", "input": "input pipeline",
}

# Bytes an optimizer step reads + writes per parameter it updates (memory-bound element-wise
# kernel): Adam mixed precision reads fp32 master, m, v, fp32 grad (16) and writes master, m, v
# and the 16-bit weight copy (14); SGD with momentum reads master, momentum, grad (12) and writes
# master, momentum, 16-bit weights (10); fp32 training has no 16-bit copy.
OPTIMIZER_STEP_BYTES = {("adam", True): 30.0, ("adam", False): 28.0, ("sgd", True): 22.0, ("sgd", False): 20.0}


def _unique_compute(workload, gpu, precision, flash, profile, micro_batch, tp, cp) -> dict[str, np.ndarray]:
    """Per-micro-batch compute terms for each plan, evaluated once per distinct (mb, tp, cp)."""
    unique_mb, unique_tp, unique_cp, inverse = unique_plan_shapes(micro_batch, tp, cp)
    table = workload.ops(unique_mb, unique_tp, unique_cp, precision=precision, flash_attention=flash)
    sustained = profile.get("sustained_clock_fraction", gpu.architecture)
    forward, backward = compute.op_times(table, gpu, precision, profile, sustained=sustained)
    repeat = table.per_op("repeat")
    op_seconds = (forward + backward) * repeat
    layer = table.mask(placement="layer")
    attention = table.mask(kind=("attention", "softmax"), placement="layer")
    terms = {
        "layer_fwd": (forward * repeat * layer).sum(axis=0),
        "layer_bwd": (backward * repeat * layer).sum(axis=0),
        "attn_fwd": (forward * repeat * attention).sum(axis=0),
        "pre_fwd": (forward * table.mask(placement="pre")).sum(axis=0),
        "pre_bwd": (backward * table.mask(placement="pre")).sum(axis=0),
        "post_fwd": (forward * table.mask(placement="post")).sum(axis=0),
        "post_bwd": (backward * table.mask(placement="post")).sum(axis=0),
        "layer_flops": table.total("flops", placement="layer"),
        "attn_flops": table.total("flops", kind=("attention", "softmax"), placement="layer"),
        "layer_params": table.total("params", placement="layer"),
        "pre_params": table.total("params", placement="pre"),
        "post_params": table.total("params", placement="post"),
        "memory_bound_share": (op_seconds * compute.memory_bound(table, gpu, precision, profile, sustained)
                               ).sum(axis=0) / op_seconds.sum(axis=0),
    }
    return {name: value[inverse] for name, value in terms.items()}


def evaluate(workload, cluster: Cluster, plans: dict[str, np.ndarray], *, precision: str,
             flash_attention: bool, optimizer: str, profile, data=None,
             memory_reasons: bool = False) -> dict[str, np.ndarray]:
    """Every estimate quantity for every plan (arrays of the plans' length).

    ``plans`` holds the :data:`perfmodel.plans.PLAN_FIELDS` as integer arrays of equal length; plans
    must already be valid (see :func:`perfmodel.plans.check_plans`).  Returns a dict with
    ``step_time_s``, one array per :data:`BREAKDOWN` component (``<name>_s``), throughput, FLOP
    rates, MFU/HFU, memory components (``memory_<component>``), ``memory_fits`` and, with
    ``memory_reasons``, ``memory_reasons_text`` (a list of reasons per plan).
    """
    gpu = cluster.gpu
    if cluster.nodes > 1 and cluster.nic is None:
        raise ValueError(f"hardware.inter: {cluster.nodes} nodes need an inter-node network "
                         "(e.g. '8 x ib-hdr', '4 x roce-400', 'efa-3200')")
    tp, pp, dp, cp, vp = (plans[k].astype(float) for k in ("tp", "pp", "dp", "cp", "vp"))
    micro_batch, global_batch = plans["micro_batch"].astype(float), plans["global_batch"].astype(float)
    strategy, zero = plans["recompute"], plans["zero"]
    micro_batches = global_batch / (dp * micro_batch)
    c = _unique_compute(workload, gpu, precision, flash_attention, profile,
                        plans["micro_batch"], plans["tp"], plans["cp"])

    # --- compute per micro-batch on the slowest pipeline stage
    single_stage = pp == 1
    edge_fwd = np.where(single_stage, c["pre_fwd"] + c["post_fwd"], np.maximum(c["pre_fwd"], c["post_fwd"]))
    edge_bwd = np.where(single_stage, c["pre_bwd"] + c["post_bwd"], np.maximum(c["pre_bwd"], c["post_bwd"]))
    t_fwd = c["layer_fwd"] / pp + edge_fwd
    t_bwd = c["layer_bwd"] / pp + edge_bwd
    # forward work rerun in the backward pass: a share of the stage's layers (full, every_k, sqrt),
    # or the attention core (selective; flash attention's backward already recomputes it)
    recompute_share = recompute.recompute_forward_share(strategy, RECOMPUTE_CODES, layers=workload.layers / pp,
                                                        every=plans["recompute_every"])
    selective = (strategy == RECOMPUTE_CODES["selective"]) & (not flash_attention)
    t_recompute = np.where(selective, c["attn_fwd"], recompute_share * c["layer_fwd"]) / pp

    # --- communication inside one micro-batch
    links = comm.link_numbers(cluster, profile)
    act_bytes = 4.0 if precision in ("fp32", "tf32") else 2.0
    if workload.family == "transformer":
        shape = workload.shape
        layers_per_stage = shape.layers / pp
        tokens_per_rank = micro_batch * shape.seq_len / cp
        tp_message = tokens_per_rank * shape.hidden * act_bytes
        tp_collectives = 4.0 + 2.0 * recompute_share  # recomputed layers repeat their forward pair
        t_tp_layer = comm.collective_time("all_reduce", tp_message, tp, tp, **links)
        t_tp = (1.0 - profile.get("tp_overlap")) * tp_collectives * layers_per_stage * t_tp_layer
        kv_message = 2.0 * tokens_per_rank * shape.kv_heads * (shape.hidden / shape.heads) / tp * act_bytes
        cp_inter = tp * cp > cluster.gpus_per_node
        t_cp_transfer = 3.0 * (cp - 1) * layers_per_stage * comm.p2p_time(
            kv_message, **_p2p_link(links, cp_inter, cluster.gpus_per_node))
        t_cp = np.maximum(0.0, t_cp_transfer - 3.0 * c["attn_fwd"] / pp) * (cp > 1)
        pp_message = tokens_per_rank * shape.hidden * act_bytes / np.where(plans["sequence_parallel"] > 0, tp, 1.0)
        pp_inter = (tp * cp * dp >= cluster.gpus_per_node) & (cluster.nodes > 1)
        t_pp_send = comm.p2p_time(pp_message, **_p2p_link(links, pp_inter, cluster.gpus_per_node))
    else:
        t_tp = t_cp = t_pp_send = np.zeros_like(tp)
    t_microbatch = t_fwd + t_bwd + t_recompute + t_tp + t_cp

    # --- pipeline
    bubble = (pp - 1.0) / vp * t_microbatch
    pp_comm = np.where(pp > 1, 2.0 * vp * micro_batches * t_pp_send, 0.0)

    # --- data-parallel gradient reduction and ZeRO gathers
    params_local = c["layer_params"] / pp + np.where(single_stage, c["pre_params"] + c["post_params"],
                                                     np.maximum(c["pre_params"], c["post_params"]))
    group = dp * cp
    # ranks are ordered tp (fastest), cp, dp, pp: a DP x CP group takes every tp-th GPU of a node
    members_per_node = np.minimum(np.clip(cluster.gpus_per_node // tp, 1, None), group)
    concurrent = cluster.gpus_per_node / members_per_node
    grad_bytes = params_local * profile.get("gradient_reduce_bytes")
    param_bytes = params_local * act_bytes
    dp_links = _shared_nics(links, concurrent)
    t_allreduce = comm.collective_time("all_reduce", grad_bytes, group, members_per_node, **dp_links)
    t_scatter = comm.collective_time("reduce_scatter", grad_bytes, group, members_per_node, **dp_links)
    t_gather = comm.collective_time("all_gather", param_bytes, group, members_per_node, **dp_links)
    # gradients: all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1/2/3), bucketed under the backward pass
    overlap, interference = profile.get("dp_overlap"), profile.get("overlap_interference")
    t_grad = np.where(zero == 0, t_allreduce, t_scatter)
    dp_comm = exposed_communication(t_grad, overlap * t_bwd, interference)
    # parameters: ZeRO-1/2 all-gather the updated shards after the optimizer step (nothing left to
    # hide it under); ZeRO-3 gathers them before every micro-batch's forward and backward, prefetched
    zero3_per_microbatch = exposed_communication(2.0 * t_gather, overlap * (t_fwd + t_bwd), interference)
    zero_gather = np.select([zero == 3, zero >= 1], [micro_batches * zero3_per_microbatch, t_gather], 0.0)

    # --- optimizer, overhead
    mixed = precision not in ("fp32", "tf32")
    step_bytes = OPTIMIZER_STEP_BYTES[(optimizer, mixed)] * params_local / np.where(zero >= 1, dp, 1.0)
    optimizer_time = compute.roofline_time(
        0.0, step_bytes, gpu.peak("fp32"), gpu.memory_bandwidth, 1.0,
        profile.get("memory_efficiency", gpu.architecture), profile.get("kernel_launch_overhead"))

    breakdown = {
        "forward": micro_batches * t_fwd,
        "backward": micro_batches * t_bwd,
        "recompute": micro_batches * t_recompute,
        "tp_comm": micro_batches * t_tp,
        "cp_comm": micro_batches * t_cp,
        "pp_bubble": bubble,
        "pp_comm": pp_comm,
        "dp_comm": dp_comm,
        "zero_gather": zero_gather,
        "optimizer": optimizer_time * np.ones_like(tp),
        "overhead": profile.get("step_overhead") * np.ones_like(tp),
    }
    busy = sum(breakdown.values())
    samples_per_node = global_batch / cluster.nodes
    breakdown["input"] = datapipe.exposed_input_time(samples_per_node, busy, data, cluster, profile)
    step_time = busy + breakdown["input"]

    # --- throughput and FLOP rates (model FLOPs: PaLM appendix B; hardware FLOPs add recompute)
    num_gpus = float(cluster.num_gpus)
    model_flops = workload.flops_per_sample(training=True) * global_batch
    # op-table FLOPs are per GPU; each GPU of a stage reruns its share of the stage's layers
    recompute_flops = num_gpus * micro_batches * np.where(
        selective, c["attn_flops"], recompute_share * c["layer_flops"]) / pp
    peak = gpu.peak(precision)
    out = {f"{name}_s": value for name, value in breakdown.items()}
    out["step_time_s"] = step_time
    out["samples_per_s"] = global_batch / step_time
    out["tokens_per_s"] = out["samples_per_s"] * (workload.tokens_per_sample or np.nan)
    out["tflops_per_gpu"] = model_flops / step_time / num_gpus / 1e12
    out["mfu"] = model_flops / step_time / num_gpus / peak
    out["hfu"] = (model_flops + recompute_flops) / step_time / num_gpus / peak
    out["gpu_utilization"] = (breakdown["forward"] + breakdown["backward"] + breakdown["recompute"]) / step_time
    out["num_micro_batches"] = micro_batches
    out["memory_bound_share"] = c["memory_bound_share"]

    # --- memory per GPU
    mem = memory.plan_memory(workload, gpu, plans, precision=precision, optimizer=optimizer,
                             flash_attention=flash_attention, profile=profile, with_reasons=memory_reasons)
    out.update({f"memory_{k}": v for k, v in mem.items()})
    return out


def exposed_communication(comm_time, hideable_compute, interference):
    """Time a communication adds to the step when it runs under ``hideable_compute`` seconds of
    compute: the part that does not fit under it, plus ``interference`` x the part that does
    (communication kernels take SMs and memory bandwidth from the compute they overlap)."""
    hidden = np.minimum(comm_time, hideable_compute)
    return comm_time - hidden + interference * hidden


def _p2p_link(links: dict, inter, gpus_per_node: int) -> dict:
    """Bandwidth and latency of one GPU's point-to-point send inside a node, or across nodes
    where every GPU of the node sends at once and gets its share of the node's NICs."""
    return {"bandwidth": np.where(inter, links["inter_bandwidth"] / gpus_per_node, links["intra_bandwidth"]),
            "latency": np.where(inter, links["inter_latency"], links["intra_latency"])}


def _shared_nics(links: dict, concurrent_groups_per_node) -> dict:
    """Link numbers for one of ``concurrent_groups_per_node`` groups that share a node's NICs."""
    return {**links, "inter_bandwidth": links["inter_bandwidth"] / concurrent_groups_per_node}
