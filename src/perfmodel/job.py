"""A scenario's inputs looked up: the workload from the zoo (with the data pipeline of the
framework's recipe where the scenario leaves it open), the cluster from the catalog, the number of
samples a run trains on, and a one-line summary of the hardware.

What ``estimate``, ``search``, ``scaling``, ``rank`` and the calibration predictors share before
any cost model runs.
"""

from __future__ import annotations

from typing import Any

from perfmodel.cost import gpu_hours
from perfmodel.hardware.catalog import Catalog, load_catalog, require_network
from perfmodel.scenario import Scenario, load_scenario
from perfmodel.vocabulary import FRAMEWORK_BINNED_TOKENS
from perfmodel.workloads import workload_from_spec

__all__ = ["resolve", "scenario_workload", "framework_spec", "framework_tokens", "binned_tokens_assumption", "run_samples", "run_totals",
           "hardware_summary"]


def framework_tokens(spec, workload, framework: str | None) -> int | None:
    """The tokens a sample holds on average (``mean_seq_len``) in ``framework``'s BERT recipe at the
    workload's sequence length (:data:`~perfmodel.vocabulary.FRAMEWORK_BINNED_TOKENS`), when the
    spec does not say; None when the spec says, or the framework pads every sample."""
    shape = getattr(workload, "shape", None)
    if spec.mean_seq_len is not None or shape is None or shape.arch != "bert":
        return None
    return FRAMEWORK_BINNED_TOKENS.get(framework, {}).get(shape.seq_len)


def framework_spec(spec, workload, framework: str | None):
    """(``spec`` with the framework recipe's sample length filled in where it gives none, the
    assumed-input line saying so or None when ``spec`` is returned unchanged); ``workload`` is
    ``spec``'s workload (:func:`framework_tokens`)."""
    tokens = framework_tokens(spec, workload, framework)
    if tokens is None:
        return spec, None
    return (spec.model_copy(update={"mean_seq_len": tokens}),
            binned_tokens_assumption(framework, workload.shape.seq_len, tokens))


def scenario_workload(scenario: Scenario):
    """The scenario's workload, holding the framework recipe's sample length where the scenario
    gives none (:func:`framework_spec`)."""
    workload = workload_from_spec(scenario.workload)
    spec, assumed = framework_spec(scenario.workload, workload, scenario.framework)
    return workload if assumed is None else workload_from_spec(spec)


def binned_tokens_assumption(framework: str, seq_len: int, tokens: int) -> str:
    """The assumed-input line of a sample length taken from the framework's data pipeline."""
    return (f"framework {framework!r}: samples of {tokens} tokens on average at seq_len {seq_len}, its BERT "
            "recipe's binned data loader (LDDL) -- set workload.mean_seq_len to say otherwise")


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
    """(scenario, workload, cluster) with names looked up in the zoo and the catalog; the workload
    holds the framework recipe's sample length where the scenario gives none (:func:`framework_tokens`)."""
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    catalog = catalog or load_catalog()
    workload = scenario_workload(scenario)
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
