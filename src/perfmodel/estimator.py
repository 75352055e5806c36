"""Scenario -> Estimate: one training job explained.

``estimate(scenario)`` resolves the workload and hardware, fills the plan's open fields with the
fastest valid plan that fits (:func:`perfmodel.choice.choose_plans`, the rule ``validate`` uses
too), and runs the one formula path :func:`perfmodel.chain.evaluate` on it.  An infeasible scenario (does not fit,
degrees that do not divide the model, GPU count mismatch) is an answer with ``feasible: false``
and its reasons, not an exception; a malformed one raises a ``ValueError`` naming the field.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from perfmodel.chain import BOTTLENECK_OF, BREAKDOWN, evaluate
from perfmodel.calibration.intervals import ATTENTION_COLUMN, SHARE_COLUMNS, confidence, time_bounds
from perfmodel.choice import choose_plans, plan_choice_text
from perfmodel.cost import price_estimate
from perfmodel.hardware.catalog import Catalog
from perfmodel.job import framework_spec, hardware_summary, resolve, run_totals
from perfmodel.models.compute import attention_factor, host_dispatch_seconds, host_scale_is_prior
from perfmodel.parameters import PARAMETERS
from perfmodel.plans import channels_last_assumed, memory_headroom, sequence_parallel_assumed, zero_assumed
from perfmodel.profile import CalibrationProfile, default_profile
from perfmodel.scenario import Scenario
from perfmodel.vocabulary import ASYNC_ATTENTION_FRAMEWORKS, ASYNC_TENSOR_CORE_ARCHITECTURES

__all__ = ["Estimate", "estimate", "bottleneck_of"]

# an estimate names a prior host dispatch time among its assumptions when the host sets at least
# this share of its passes' time (a pass of a few tiny ops, such as the loss, is always host-bound)
HOST_BOUND_SHARE_STATED = 0.1


class Estimate(BaseModel):
    """The answer for one scenario.

    Times in seconds, memory in bytes, ``tflops_per_gpu`` in TFLOP/s (model FLOPs, PaLM appendix
    B).  When the scenario is infeasible, ``feasible`` is false, ``reasons`` says why, and the time
    fields are null.  ``breakdown_s`` holds exposed times that add up to ``step_time_s``.
    """

    feasible: bool
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list, description="what to know about a plan estimated anyway "
                                "(e.g. it leaves less than the memory headroom)")
    workload: str
    hardware: dict[str, Any]
    plan: dict[str, Any]
    step_time_s: float | None = None
    breakdown_s: dict[str, float] = Field(default_factory=dict)
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    gpu_utilization: float | None = None
    bottleneck: str | None = None
    memory: dict[str, Any] = Field(default_factory=dict)
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    interval_80: dict[str, float] | None = Field(
        None, description="80 % prediction interval from the profile's cross-validated residuals: "
                          "step_time_low_s, step_time_high_s, samples_per_s_low, samples_per_s_high")
    assumptions: dict[str, Any] = Field(default_factory=dict)
    confidence: dict[str, Any] | None = Field(
        None, description="why the interval is as wide as it is: assumed inputs, steps that extrapolate "
                          "beyond the measured rows, the rows of this kind and architecture and the model's "
                          "error on them, and a one-line 'text' (perfmodel.calibration.intervals.confidence)")
    cost: dict[str, Any] | None = Field(
        None, description="price of the run per pricing when the hardware is a catalog instance "
                          "(perfmodel.cost.price_run): USD per hour of the whole cluster, cost_usd, spot terms")


def bottleneck_of(breakdown: dict[str, float], memory_bound_share: float = 0.0,
                  launch_bound_share: float = 0.0) -> str:
    """The category (compute, memory bandwidth, host dispatch, TP communication, pipeline bubble,
    ...) with the largest share of the step; GPU work counts as "host dispatch" when most of it is
    spent in kernels shorter than the host takes to dispatch them (``launch_bound_share`` > 1/2),
    else as "memory bandwidth" when most of it is in ops that are memory-bound on the roofline
    (``memory_bound_share`` > 1/2)."""
    totals: dict[str, float] = {}
    for name, seconds in breakdown.items():
        category = BOTTLENECK_OF[name]
        if category == "compute" and launch_bound_share > 0.5:
            category = "host dispatch"
        elif category == "compute" and memory_bound_share > 0.5:
            category = "memory bandwidth"
        totals[category] = totals.get(category, 0.0) + seconds
    return max(totals, key=totals.get)


def estimate(scenario: Scenario | str | dict, catalog: Catalog | None = None,
             profile: CalibrationProfile | None = None) -> Estimate:
    """Estimate one scenario (a :class:`Scenario`, a file path, or a dict) on the plan
    :func:`perfmodel.choice.choose_plans` picks for it."""
    scenario, workload, cluster = resolve(scenario, catalog)
    profile = profile or default_profile()
    framework = scenario.framework
    choice = choose_plans(workload, cluster, [scenario.plan], profile=profile, data=scenario.data,
                          framework=framework)[0]
    base = {"workload": workload.name, "hardware": hardware_summary(cluster), "plan": choice.plan,
            "assumptions": {"profile": profile.provenance.get("name", "defaults"),
                            "flash_attention": choice.plan["flash_attention"], "framework": framework}}
    if choice.chosen:
        base["assumptions"]["chosen_by_search"] = choice.chosen
        base["assumptions"]["plan_choice"] = plan_choice_text(choice, memory_headroom(scenario.plan))
    base["assumptions"]["memory_headroom"] = memory_headroom(scenario.plan)
    base["warnings"] = choice.warnings
    # fields filled from a reference: GPU specs, the usual fabric, the pooled framework traits
    assumed = [*cluster.gpu.assumed, *cluster.assumed]
    if profile.framework_pooled(framework):
        assumed.append(framework_assumption(framework))
    if workload.family == "transformer" and sequence_parallel_assumed(scenario.plan, framework, choice.plan["tp"]):
        assumed.append(sequence_parallel_assumption(framework, bool(choice.plan["sequence_parallel"])))
    if zero_assumed(scenario.plan, framework, choice.plan["dp"]):
        assumed.append(zero_assumption(framework, int(choice.plan["zero"])))
    binned = framework_spec(scenario.workload, workload, framework)[1]
    if binned:
        assumed.append(binned)
    if assumed:
        base["assumptions"]["assumed"] = assumed
    if not choice.valid:
        return Estimate(feasible=False, reasons=choice.reasons, **base)
    def chosen_plan_under(with_profile: CalibrationProfile, memory_reasons: bool = False,
                          channels_last: bool = choice.plan["channels_last"]) -> dict:
        return evaluate(workload, cluster, choice.arrays, precision=choice.plan["precision"],
                        flash_attention=choice.plan["flash_attention"], optimizer=choice.plan["optimizer"],
                        profile=with_profile, data=scenario.data, memory_reasons=memory_reasons,
                        cuda_graphs=choice.plan["cuda_graphs"], framework=framework, channels_last=channels_last)

    result = chosen_plan_under(profile, memory_reasons=True)
    attention = choice.result.get(ATTENTION_COLUMN, 0.0)  # != 0 only where the attention kernel was assumed and matters
    if attention != 0:
        base["assumptions"].setdefault("assumed", []).append(
            flash_assumption(framework, choice.plan["flash_attention"], math.exp(attention)))
    if framework is None and int(choice.plan["zero"]) == 3 and int(choice.plan["dp"]) * int(choice.plan["cp"]) > 1:
        bucketed = chosen_plan_under(profile.with_values(zero3_gather_bucket_params=DEEPSPEED_GATHER_BUCKET_PARAMS))
        base["assumptions"].setdefault("assumed", []).append(
            zero3_gather_assumption(float(bucketed["step_time_s"][0] / result["step_time_s"][0])))
    architecture = cluster.gpu.architecture
    if (framework is None and choice.plan["flash_attention"] and workload.family == "transformer"
            and architecture in ASYNC_TENSOR_CORE_ARCHITECTURES):
        te_rate = attention_factor(cluster.gpu, profile, ASYNC_ATTENTION_FRAMEWORKS[0])
        te = chosen_plan_under(profile.with_values(**{f"attention_efficiency[{architecture}]": te_rate}))
        base["assumptions"].setdefault("assumed", []).append(
            attention_kernel_assumption(architecture, float(te["step_time_s"][0] / result["step_time_s"][0])))
    if channels_last_assumed(scenario.plan, framework, workload.family, choice.plan["precision"]):
        other = chosen_plan_under(profile, channels_last=not choice.plan["channels_last"])
        base["assumptions"].setdefault("assumed", []).append(
            layout_assumption(framework, choice.plan["channels_last"],
                              float(other["step_time_s"][0] / result["step_time_s"][0])))
    if framework is None:
        line = eager_assumption(workload, int(choice.plan["micro_batch"]))
        if line:
            base["assumptions"].setdefault("assumed", []).append(line)
    host_bound = float(result["launch_bound_share"][0])
    if host_bound >= HOST_BOUND_SHARE_STATED and not choice.plan["cuda_graphs"]:
        line = host_assumption(profile, framework, cluster.gpu.architecture, host_bound)
        if line:
            base["assumptions"].setdefault("assumed", []).append(line)
    return from_arrays(result, 0, workload, cluster, scenario.run, profile, base, attention)


# the all-gather bucket of DeepSpeed ZeRO-3 (stage3_prefetch_bucket_size), against which an unstated
# framework's whole-unit gathers are compared
DEEPSPEED_GATHER_BUCKET_PARAMS = PARAMETERS["zero3_gather_bucket_params"].default_for("deepspeed")


def flash_assumption(framework: str | None, fused: bool, other_over_assumed: float) -> str:
    """The assumed-input line of the attention kernel taken as the default
    (:func:`perfmodel.plans.flash_attention_assumed`; ``fused``: which one), with how much the step
    changes with the other kernel."""
    who = f"framework {framework!r} fuses attention in some versions only" if framework else "framework not stated"
    assumed, other = ("fused (FlashAttention)", "unfused") if fused else ("unfused", "fused (FlashAttention)")
    return (f"{who}: attention assumed {assumed}; {other}, the step takes "
            f"{other_over_assumed - 1:+.0%} -- set plan.flash_attention to say which")


def layout_assumption(framework: str | None, channels_last: bool, other_over_assumed: float) -> str:
    """The assumed-input line of a CNN layout taken as the default (:func:`perfmodel.plans.channels_last_assumed`;
    ``channels_last``: which one), with how much the step changes with the other layout."""
    who = f"framework {framework!r} has no layout default" if framework else "framework not stated"
    assumed, other = ("channels-last (NHWC)", "NCHW") if channels_last else ("NCHW", "channels-last (NHWC)")
    return (f"{who}: convolution activations assumed {assumed}; {other}, the step takes "
            f"{other_over_assumed - 1:+.0%} -- set plan.channels_last to say which")


def attention_kernel_assumption(architecture: str, te_over_assumed: float) -> str:
    """The assumed-input line of a fused attention kernel on asynchronous tensor cores whose framework
    is not stated: it is timed as a FlashAttention-2-class kernel, and Transformer Engine's
    (:func:`perfmodel.models.compute.attention_factor`) would change the step by ``te_over_assumed``."""
    return (f"framework not stated: fused attention on {architecture} assumed a FlashAttention-2-class kernel; "
            f"with Transformer Engine's cuDNN attention (as NeMo runs it) the step takes "
            f"{te_over_assumed - 1:+.0%} -- set framework to say which")


def eager_assumption(workload, micro_batch: int) -> str | None:
    """The assumed-input line of a workload with Python-side bookkeeping (``eager_only`` ops: Mask
    R-CNN's target assignment, sampling and proposal selection) whose framework is not stated: it
    is counted as an eager PyTorch stack dispatches it (:func:`perfmodel.models.compute.framework_runs`);
    None when the workload has none (:meth:`perfmodel.workloads.workload.Workload.host_ops`)."""
    host = workload.host_ops()
    if host is None:
        return None
    ops = host["forward_per_step"] + host["forward_per_sample"] * micro_batch + host["backward_per_step"]
    return (f"framework not stated: {', '.join(host['ops'])} ({ops:,.0f} host-dispatched ops per micro-batch of "
            f"{micro_batch}) "
            "counted as eager PyTorch runs it; a graph-compiled framework (TensorFlow, JAX) batches it away "
            "-- set framework to say which")


def sequence_parallel_assumption(framework: str, on: bool) -> str:
    """The assumed-input line of sequence parallelism taken as ``framework``'s default
    (:func:`perfmodel.plans.sequence_parallel_assumed`)."""
    return (f"framework {framework!r}: sequence parallelism assumed {'on' if on else 'off'}, its default "
            f"(norms, dropouts and residual adds run whole on every tensor-parallel rank when off) -- set "
            f"plan.sequence_parallel to say which")


def zero_assumption(framework: str, stage: int) -> str:
    """The assumed-input line of the ZeRO stage taken as ``framework``'s default
    (:func:`perfmodel.plans.zero_assumed`)."""
    what = "no sharding: every data-parallel rank keeps the whole optimizer state" if stage == 0 else \
        "parameters, gradients and optimizer state sharded over the data-parallel ranks"
    return f"framework {framework!r}: ZeRO stage {stage} assumed, its default ({what}) -- set plan.zero to say which"


def zero3_gather_assumption(bucketed_over_assumed: float) -> str:
    """The assumed-input line of a ZeRO-3 plan whose framework is not stated: each unit's parameters
    are all-gathered in one collective (PyTorch FSDP, Megatron-FSDP: ``zero3_gather_bucket_params``'s
    default), with how much the step changes under DeepSpeed's 5e7-parameter buckets."""
    return (f"framework not stated: ZeRO-3 assumed to all-gather each layer's parameters in one collective "
            f"(PyTorch FSDP, Megatron-FSDP); in DeepSpeed's buckets of {DEEPSPEED_GATHER_BUCKET_PARAMS:,.0f} "
            f"parameters the step takes {bucketed_over_assumed - 1:+.0%} -- set framework to say which")


def framework_assumption(framework: str | None) -> str:
    """The assumed-input line of pooled framework traits."""
    who = f"framework {framework!r} has no values of its own in the profile" if framework else "framework not stated"
    return f"{who}: its traits (framework_*) take the value pooled over the fitted frameworks"


def host_assumption(profile, framework: str | None, architecture: str, host_bound_share: float) -> str | None:
    """The assumed-input line of a step partly set by the host's dispatch when a calibrated profile
    (one with per-framework host times) holds a prior for it: the framework's
    ``host_dispatch_time`` (no host-bound rows of that framework were fitted) or the architecture's
    ``host_dispatch_scale`` (no host-bound rows on its systems; the reference host's speed is
    assumed).  None when both were fitted (or a profile of defaults assumes every value alike)."""
    if not profile.has_groups("host_dispatch_time"):
        return None
    reasons = []
    if profile.prior_only("host_dispatch_time", framework):
        who = f"framework {framework!r}" if framework else "an unstated framework"
        reasons.append(f"the prior of host_dispatch_time (no host-bound rows of {who} were fitted)")
    if host_scale_is_prior(profile, architecture):
        reasons.append(f"a host as fast as the reference DGX H100's (no host-bound rows on {architecture} systems)")
    if not reasons:
        return None
    return (f"host dispatch sets {host_bound_share:.0%} of the passes' time at "
            f"{host_dispatch_seconds(profile, framework, architecture) * 1e6:.0f} us per kernel, "
            + " and ".join(reasons))


def from_arrays(result: dict[str, np.ndarray], index: int, workload, cluster, run, profile,
                base: dict[str, Any], attention: float = 0.0) -> Estimate:
    """The Estimate of plan ``index`` of an :func:`evaluate` result; ``attention``: the plan's
    :data:`perfmodel.calibration.intervals.ATTENTION_COLUMN` (0: its attention kernel is known)."""
    value = {key: float(array[index]) for key, array in result.items()
             if key not in ("memory_stage", "memory_reasons_text")}
    memory = {key[len("memory_"):]: value[key] for key in value if key.startswith("memory_")}
    memory["fits"] = bool(memory["fits"])
    memory["stage"] = str(result["memory_stage"][index])
    memory["reasons"] = list(result["memory_reasons_text"][index]) if "memory_reasons_text" in result else []
    breakdown = {name: value[f"{name}_s"] for name in BREAKDOWN}
    step = value["step_time_s"]
    estimate = Estimate(
        feasible=memory["fits"],
        reasons=memory["reasons"],
        step_time_s=step,
        breakdown_s=breakdown,
        samples_per_s=value["samples_per_s"],
        tokens_per_s=value["tokens_per_s"] if workload.tokens_per_sample else None,
        tflops_per_gpu=value["tflops_per_gpu"],
        mfu=value["mfu"],
        hfu=value["hfu"],
        gpu_utilization=value["gpu_utilization"],
        bottleneck=bottleneck_of(breakdown, value["memory_bound_share"], value["launch_bound_share"]),
        memory=memory,
        **base,
    )
    assumed = _assumed_inputs(cluster, profile, base["assumptions"].get("framework"))
    context = {"architecture": cluster.gpu.architecture, "gpu": cluster.gpu.name, "num_gpus": cluster.num_gpus,
               "model_params": workload.params, "seq_len": workload.tokens_per_sample or float("nan"),
               "assumed": {name: True for name in assumed} or None, "host": value["host_log_sensitivity"],
               "shares": {column: float(value[column]) for column in SHARE_COLUMNS}, "attention": attention,
               "family": workload.family}
    low, high = (float(v) for v in time_bounds(profile, step, **context))
    if np.isfinite(low) and np.isfinite(high):
        estimate.interval_80 = {"step_time_low_s": low, "step_time_high_s": high,
                                "samples_per_s_low": value["samples_per_s"] * step / high,
                                "samples_per_s_high": value["samples_per_s"] * step / low}
    model = profile.provenance.get("interval_model")
    if model is not None and "train" in model.get("kinds", {}):
        estimate.confidence = confidence(
            model, profile, "train", cluster.gpu.architecture, num_gpus=cluster.num_gpus,
            model_params=workload.params, seq_len=workload.tokens_per_sample,
            assumed=assumed or None, gpu=cluster.gpu.name, host=value["host_log_sensitivity"],
            framework=base["assumptions"].get("framework"), shares=context["shares"], attention=attention,
            family=workload.family)
    totals = run_totals(run, workload, value["samples_per_s"], cluster.num_gpus)
    if totals is not None:
        estimate.time_to_train_s, estimate.gpu_hours = totals["time_to_train_s"], totals["gpu_hours"]
    estimate.cost = price_estimate(estimate, workload, cluster, run, profile)
    return estimate


def _assumed_inputs(cluster, profile, framework) -> dict[str, str]:
    """Assumed inputs by name (:data:`perfmodel.calibration.intervals.ASSUMABLE`) and what was assumed."""
    assumed = {"fabric": "; ".join(cluster.assumed)} if cluster.assumed else {}
    if profile.framework_pooled(framework):
        assumed["framework"] = "pooled" if framework is None else f"{framework} (pooled)"
    return assumed
