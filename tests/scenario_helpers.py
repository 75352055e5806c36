"""Scenario dicts for the plan tests (search, choice): one GPU count on GPUs with their usual
intra-node link, two-or-more nodes on HDR InfiniBand."""

INTRA = {"V100-SXM2-16GB": "nvlink2", "A100-SXM4-40GB": "nvlink3", "A100-SXM4-80GB": "nvlink3",
         "H100-SXM5-80GB": "nvlink4", "L4": "pcie4"}


def make_scenario(model, gpu, num_gpus, global_batch=None, **plan):
    hardware = {"gpu": gpu, "num_gpus": num_gpus, "gpus_per_node": min(8, num_gpus), "intra": INTRA[gpu]}
    if num_gpus > 8:
        hardware["inter"] = "8 x ib-hdr"
    if global_batch is not None:
        plan["global_batch"] = global_batch
    return {"workload": {"model": model}, "hardware": hardware, "plan": plan}


def tp8_gpt(framework=None, hidden=1024, tp=8, **plan):
    """A 24-layer GPT of ``hidden`` (heads of 64) at sequence 2,048, micro-batch 1 of 16, full
    recomputation, bf16, on 8 A100s of one node, with ``framework`` and further ``plan`` fields."""
    plan = {"precision": "bf16", "tp": tp, "pp": 1, "micro_batch": 1, "global_batch": 16, "recompute": "full",
            **plan}
    scenario = {"workload": {"model": "transformer", "layers": 24, "hidden": hidden, "heads": hidden // 64,
                             "vocab": 51200, "seq_len": 2048},
                "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8, "gpus_per_node": 8, "intra": "nvlink3"},
                "plan": plan}
    if framework is not None:
        scenario["framework"] = framework
    return scenario


DP_INTRA = {"V100-SXM2-32GB": "nvlink2", "A100-SXM4-80GB": "nvlink3", "H100-SXM5-80GB": "nvlink4"}


def dp_scenario(model, gpu, num_gpus, micro_batch, framework=None):
    """Pure data parallelism (ZeRO-0, no recomputation) at ``micro_batch`` per GPU on ``num_gpus``
    of ``gpu`` (a key of :data:`DP_INTRA`), 8 per node, nodes joined by 4 x HDR InfiniBand."""
    hardware = {"gpu": gpu, "num_gpus": num_gpus, "gpus_per_node": min(8, num_gpus), "intra": DP_INTRA[gpu]}
    if num_gpus > 8:
        hardware["inter"] = "4 x ib-hdr"
    scenario = {"workload": {"model": model}, "hardware": hardware,
                "plan": {"tp": 1, "pp": 1, "cp": 1, "dp": num_gpus, "micro_batch": micro_batch,
                         "global_batch": num_gpus * micro_batch, "recompute": "none", "zero": 0}}
    if framework is not None:
        scenario["framework"] = framework
    return scenario
