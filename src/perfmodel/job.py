"""A scenario's inputs looked up: the workload from the zoo, the cluster from the catalog, the
number of samples a run trains on, and a one-line summary of the hardware.

What ``estimate``, ``search``, ``scaling``, ``rank`` and the calibration predictors share before
any cost model runs.
"""

from __future__ import annotations

from typing import Any

from perfmodel.cost import gpu_hours
from perfmodel.hardware.catalog import Catalog, load_catalog, require_network
from perfmodel.scenario import Scenario, load_scenario
from perfmodel.workloads import workload_from_spec

__all__ = ["resolve", "run_samples", "run_totals", "hardware_summary"]


def run_samples(run, workload) -> float | None:
    """Samples in the whole run: train_samples, train_tokens / tokens per sample, or epochs."""
    if run is None:
        return None
    if run.train_samples is not None:
        return run.train_samples
    if run.train_tokens is not None:
        if not workload.tokens_per_sample:
            raise ValueError(f"run.train_tokens is given but {workload.name} has no tokens per sample; "
                             "use run.train_samples or run.epochs + run.dataset_samples")
        return run.train_tokens / workload.tokens_per_sample
    if run.epochs is not None:
        return run.epochs * run.dataset_samples
    return None


def run_totals(run, workload, samples_per_s: float, num_gpus: int) -> dict[str, float] | None:
    """``time_to_train_s`` and ``gpu_hours`` of the whole run at ``samples_per_s`` (None when the
    run does not say how many samples it trains on)."""
    samples = run_samples(run, workload)
    if samples is None:
        return None
    time_to_train_s = samples / samples_per_s
    return {"time_to_train_s": time_to_train_s, "gpu_hours": float(gpu_hours(time_to_train_s, num_gpus))}


def resolve(scenario: Scenario | str | dict, catalog: Catalog | None = None):
    """(scenario, workload, cluster) with names looked up in the zoo and the catalog."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    catalog = catalog or load_catalog()
    workload = workload_from_spec(scenario.workload)
    cluster = catalog.cluster(**scenario.hardware.model_dump())
    require_network(cluster)
    return scenario, workload, cluster


def hardware_summary(cluster) -> dict[str, Any]:
    return {
        "gpu": cluster.gpu.name, "num_gpus": cluster.num_gpus, "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node, "intra": cluster.intra.name, "fabric": cluster.fabric,
        "inter": f"{cluster.nics_per_node} x {cluster.nic.name}" if cluster.nic else None,
        "instance": f"{cluster.instance.provider}/{cluster.instance.name}" if cluster.instance else None,
    }
