"""Strong and weak scaling of a scenario over GPU counts.

Strong scaling keeps the global batch and spreads it over more GPUs; weak scaling keeps the
per-GPU batch, so the global batch grows with the GPU count.  At each count the plan is the one
:func:`perfmodel.choice.choose_plans` picks, as ``estimate`` would (fields the scenario fixes stay
fixed), so the curve shows what the hardware allows, not one frozen layout.  Speedup is throughput relative to the smallest count; efficiency
is speedup divided by the GPU ratio (1 = linear scaling).
"""

from __future__ import annotations

from perfmodel.choice import choose_plans
from perfmodel.job import hardware_summary, resolve
from perfmodel.plans import default_micro_batch
from perfmodel.profile import default_profile

__all__ = ["scaling"]


def scaling(scenario, gpu_counts: list[int], mode: str = "strong", catalog=None, profile=None):
    """DataFrame with one row per GPU count: num_gpus, nodes, plan, step_time_s, samples_per_s,
    speedup, efficiency, mfu, bottleneck share columns; infeasible counts keep NaN and a reason."""
    import numpy as np
    import pandas as pd

    if mode not in ("strong", "weak"):
        raise ValueError(f"mode {mode!r} is unknown; allowed: strong, weak")
    counts = sorted({int(n) for n in gpu_counts})
    if not counts or counts[0] <= 0:
        raise ValueError(f"gpu counts must be positive integers, got {gpu_counts}")
    scenario, workload, cluster = resolve(scenario, catalog)
    hardware = scenario.hardware
    per_node = cluster.gpus_per_node
    base_batch = scenario.plan.global_batch
    rows = []
    for n in counts:
        if hardware.instance is not None:
            if n % per_node:
                rows.append({"num_gpus": n, "reason": f"{n} GPUs is not a whole number of {hardware.instance} nodes"})
                continue
            new_hardware = hardware.model_copy(update={"nodes": n // per_node, "num_gpus": None})
        elif hardware.gpus_per_node is None:  # the catalog's node for n GPUs (8 per SXM board, an NVL72 domain)
            new_hardware = hardware.model_copy(update={"num_gpus": n})
        else:
            new_hardware = hardware.model_copy(update={"num_gpus": n, "gpus_per_node": min(per_node, n)})
        plan = scenario.plan.model_copy(update={"dp": None})
        per_gpu = plan.micro_batch or default_micro_batch(workload.family)
        first_batch = base_batch or counts[0] * per_gpu
        if mode == "weak":
            plan = plan.model_copy(update={"global_batch": max(1, first_batch * n // counts[0])})
        else:  # the global batch stays; the micro-batch is searched so it can shrink as GPUs grow
            plan = plan.model_copy(update={"global_batch": first_batch, "micro_batch": None})
        case = scenario.model_copy(update={"hardware": new_hardware, "plan": plan})
        try:
            case, _, case_cluster = resolve(case, catalog)
            choice = choose_plans(workload, case_cluster, [case.plan], profile=profile or default_profile(),
                                  data=case.data, framework=case.framework)[0]
        except ValueError as error:  # e.g. more than one node but no inter-node network
            rows.append({"num_gpus": n, "reason": str(error).splitlines()[0]})
            continue
        if not choice.fits:
            rows.append({"num_gpus": n, "reason": "; ".join(choice.reasons) or "no plan"})
            continue
        best, result = choice.plan, choice.result
        rows.append({
            "num_gpus": n, "nodes": hardware_summary(case_cluster)["nodes"],
            "plan": f"tp{best['tp']} pp{best['pp']} cp{best['cp']} dp{best['dp']} mb{best['micro_batch']} "
                    f"{best['recompute']} z{best['zero']}",
            "global_batch": int(best["global_batch"]), "step_time_s": result["step_time_s"],
            "samples_per_s": result["samples_per_s"], "mfu": result["mfu"], "reason": None,
        })
    out = pd.DataFrame(rows)
    if "samples_per_s" not in out:
        out["samples_per_s"] = np.nan
    first = out.dropna(subset=["samples_per_s"]).head(1)
    if len(first):
        base_rate, base_n = first["samples_per_s"].iloc[0], first["num_gpus"].iloc[0]
        out["speedup"] = out["samples_per_s"] / base_rate
        out["efficiency"] = out["speedup"] / (out["num_gpus"] / base_n)
    out.attrs["mode"] = mode
    return out
