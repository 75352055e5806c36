"""Strong and weak scaling of a scenario over GPU counts.

Strong scaling keeps the global batch and spreads it over more GPUs; weak scaling keeps the
per-GPU batch, so the global batch grows with the GPU count.  At each count the fastest feasible
plan is searched (fields the scenario fixes stay fixed), so the curve shows what the hardware
allows, not one frozen layout.  Speedup is throughput relative to the smallest count; efficiency
is speedup divided by the GPU ratio (1 = linear scaling).
"""

from __future__ import annotations

from perfmodel.estimate import resolve
from perfmodel.search import search

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
        else:
            new_hardware = hardware.model_copy(update={"num_gpus": n, "gpus_per_node": min(per_node, n)})
        plan = scenario.plan
        if mode == "weak" and base_batch is not None:
            plan = plan.model_copy(update={"global_batch": max(1, base_batch * n // counts[0])})
        elif mode == "strong" and base_batch is None:
            default_batch = counts[0] * (1 if workload.family == "transformer" else 32)
            plan = plan.model_copy(update={"global_batch": default_batch})
        plan = plan.model_copy(update={"dp": None})
        case = scenario.model_copy(update={"hardware": new_hardware, "plan": plan})
        frame = search(case, catalog, profile, top=1)
        if not len(frame):
            reasons = "; ".join(f"{k} ({v})" for k, v in frame.attrs["infeasible"].items())
            rows.append({"num_gpus": n, "reason": reasons or "no plan"})
            continue
        best = frame.iloc[0]
        rows.append({
            "num_gpus": n, "nodes": frame.attrs["hardware"]["nodes"],
            "plan": f"tp{best.tp} pp{best.pp} cp{best.cp} dp{best.dp} mb{best.micro_batch} {best.recompute} z{best.zero}",
            "global_batch": int(best.global_batch), "step_time_s": best.step_time_s,
            "samples_per_s": best.samples_per_s, "mfu": best.mfu, "reason": None,
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
