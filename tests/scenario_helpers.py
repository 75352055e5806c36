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
