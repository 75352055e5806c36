"""Scenario files: workload + hardware + plan (+ data pipeline, + run), as pydantic models.

The format is the one in the project's scenario spec (README, "Scenario files"): YAML or JSON,
the same field names as the measurement CSV, nested.  Human units ("2 GB/s", "60 s") are parsed
here once.  Plan fields left out are ``None``: ``estimate`` uses the documented defaults,
``search`` enumerates them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from perfmodel.hardware.catalog import format_validation_error
from perfmodel.inputs import Count, InputError, load_structured
from perfmodel.units import parse_quantity
from perfmodel.vocabulary import (FRAMEWORK_LACKS, FRAMEWORKS, OFFLOAD_TARGETS, OPTIMIZERS, RECOMPUTE_STRATEGIES,
                                  TRAIN_PRECISIONS)

__all__ = ["Scenario", "WorkloadSpec", "HardwareSpec", "Plan", "DataSpec", "RunSpec",
           "ScenarioError", "load_scenario", "RECOMPUTE", "OPTIMIZERS"]

RECOMPUTE = RECOMPUTE_STRATEGIES


class ScenarioError(ValueError):
    """A scenario file that is malformed; the message names the file and the field."""


def _number(dimension: str):
    return BeforeValidator(lambda v: None if v is None else parse_quantity(v, dimension))


_Count = Annotated[float, _number("count"), Field(gt=0)]


def _not_boolean(value):
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number here; give a whole number")
    return value


def _not_boolean_number(value):
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number here; give a number")
    return value


_Name = Annotated[str, Field(min_length=1, max_length=200)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class WorkloadSpec(_Section):
    """A zoo model by name, ``model: transformer`` with its shape (measurement CSV columns), or
    ``hf_config: path/to/config.json`` (a HuggingFace config; a relative path is relative to the
    scenario file; shape fields given with it override the file's, e.g. ``seq_len``)."""

    model: _Name | None = None
    hf_config: _Name | None = Field(None, description="HuggingFace config.json path")
    layers: Count("layers") | None = None
    hidden: Count("hidden") | None = None
    heads: Count("heads") | None = None
    kv_heads: Count("kv_heads") | None = None
    ffn_hidden: Count("ffn_hidden") | None = None
    ffn_act: Literal["gelu", "swiglu"] | None = None
    seq_len: Count("seq_len") | None = None
    mean_seq_len: Count("mean_seq_len") | None = Field(
        None, description="average tokens per sample when the data loader removes padding (binning, "
                          "unpadding); null = every sample padded to seq_len")
    vocab: Count("vocab") | None = None
    image_size: Count("image_size") | None = None
    experts: Count("experts") | None = Field(None, description="mixture of experts: experts per MLP (1 = dense)")
    top_k: Count("top_k") | None = Field(None, description="mixture of experts: experts each token uses")
    capacity_factor: Annotated[float, BeforeValidator(_not_boolean_number)] | None = Field(
        None, gt=0, description="expert buffer padding; null = dropless")

    @model_validator(mode="after")
    def _one_model(self):
        if (self.model is None) == (self.hf_config is None):
            raise ValueError("give one of 'model' (a zoo name or transformer) and 'hf_config' (a config.json path)")
        return self


class HardwareSpec(_Section):
    """A GPU and a cluster shape, or a catalog instance and a node count."""

    gpu: _Name | None = None
    num_gpus: Count("num_gpus") | None = None
    gpus_per_node: Count("gpus_per_node") | None = None
    intra: _Name | None = None
    inter: _Name | None = None
    instance: _Name | None = None
    nodes: Count("nodes") | None = None

    @model_validator(mode="after")
    def _one_way(self):
        if self.gpu is None and self.instance is None:
            raise ValueError("give 'gpu' (with num_gpus) or 'instance' (with nodes)")
        return self


class Plan(_Section):
    """Parallel layout and training settings; ``None`` = not fixed (estimate's default, or searched)."""

    precision: Literal[TRAIN_PRECISIONS] | None = None  # type: ignore[valid-type]
    tp: Count("tp") | None = None
    pp: Count("pp") | None = None
    dp: Count("dp") | None = None
    cp: Count("cp") | None = None
    vp: Count("vp") | None = Field(None, description="virtual pipeline stages per GPU (interleaving)")
    micro_batch: Count("micro_batch") | None = None
    global_batch: Count("global_batch") | None = None
    recompute: Literal[RECOMPUTE] | None = None  # type: ignore[valid-type]
    recompute_every: Count("recompute_every") | None = Field(
        None, description="k for recompute: every_k (one layer in k keeps its activations); with recompute "
                          "open, every_k at this k is offered beside none and full; null: chosen")
    zero: Annotated[int, BeforeValidator(_not_boolean)] | None = Field(None, ge=0, le=3)
    sequence_parallel: bool | None = None
    flash_attention: bool | None = None
    cuda_graphs: bool | None = Field(
        None, description="run each micro-batch's passes as CUDA graphs: no per-kernel host dispatch (default false)")
    channels_last: bool | None = Field(
        None, description="a CNN's activations held channels-last (NHWC); false: NCHW, whose 16-bit "
                          "convolutions cuDNN brackets with layout transposes; null: the framework's recipe "
                          "(perfmodel.vocabulary.FRAMEWORK_CHANNELS_LAST), else NCHW")
    optimizer: Literal[OPTIMIZERS] | None = None  # type: ignore[valid-type]
    offload: Literal[OFFLOAD_TARGETS] | None = Field(  # type: ignore[valid-type]
        None, description="state kept in host memory over PCIe (ZeRO-Offload): none, optimizer, weights, both")
    memory_headroom: Annotated[float, BeforeValidator(_not_boolean_number)] | None = Field(
        None, ge=0, lt=1, description="share of GPU memory a chosen plan leaves free (null: "
                                      "perfmodel.plans.DEFAULT_MEMORY_HEADROOM, 0.10)")


class DataSpec(_Section):
    """Input pipeline; absent = never the bottleneck."""

    bytes_per_sample: Annotated[float, _number("bytes"), Field(gt=0)]
    decode: Literal["cpu", "gpu"] = "cpu"
    cpu_cores_per_gpu: float = Field(8, gt=0)
    storage_bandwidth: Annotated[float, _number("bandwidth"), Field(gt=0)] | None = Field(
        None, description="per node, bytes/s; null = not limiting")
    prefetch: bool = True


class RunSpec(_Section):
    """How big the whole run is and how it is paid for."""

    train_tokens: _Count | None = None
    train_samples: _Count | None = None
    epochs: float | None = Field(None, gt=0)
    dataset_samples: _Count | None = None
    pricing: Literal["on_demand", "spot", "reserved_1y", "reserved_3y"] = "on_demand"
    checkpoint_write: Annotated[float, _number("time"), Field(ge=0)] | None = None
    interruptions_per_hour: float | None = Field(None, ge=0, description="per instance; spot default by provider")

    @model_validator(mode="after")
    def _size(self):
        if self.epochs is not None and self.dataset_samples is None:
            raise ValueError("'epochs' needs 'dataset_samples'")
        given = [self.train_tokens is not None, self.train_samples is not None, self.epochs is not None]
        if sum(given) > 1:
            raise ValueError("give one of train_tokens, train_samples, or epochs + dataset_samples")
        return self


class Scenario(_Section):
    workload: WorkloadSpec
    hardware: HardwareSpec
    framework: Literal[FRAMEWORKS] | None = Field(  # type: ignore[valid-type]
        None, description="software stack that runs the training (perfmodel.vocabulary.FRAMEWORKS); "
                          "null = not stated: its traits take the value pooled over the fitted frameworks")
    plan: Plan = Field(default_factory=Plan)
    data: DataSpec | None = None
    run: RunSpec | None = None

    @model_validator(mode="after")
    def _framework_has_the_plan(self):
        """A plan setting the stated framework's code does not have (vocabulary.FRAMEWORK_LACKS)."""
        def text(value):
            return str(value).lower() if isinstance(value, bool) else str(value)

        for field, (allowed, feature) in FRAMEWORK_LACKS.get(self.framework, {}).items():
            value = getattr(self.plan, field)
            if value is not None and value != allowed:
                raise ValueError(f"plan.{field} = {text(value)}: framework '{self.framework}' has no {feature}; "
                                 f"allowed: {text(allowed)}")
        return self


def load_scenario(source: str | Path | dict) -> Scenario:
    """Load a scenario from a YAML/JSON file path or a dict; errors name the file and field."""
    where = "scenario"
    if isinstance(source, dict):
        data = source
    else:
        where = str(source)
        try:
            data = load_structured(source, "scenario file")
        except InputError as error:
            raise ScenarioError(str(error)) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: a scenario is a mapping with 'workload' and 'hardware'")
    if not isinstance(source, dict):
        data = _relative_to(data, Path(source).parent)
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(format_validation_error(error, where, Scenario)) from None


def _relative_to(data: dict, folder: Path) -> dict:
    """``workload.hf_config`` resolved against the scenario file's folder when it is relative."""
    workload = data.get("workload")
    path = workload.get("hf_config") if isinstance(workload, dict) else None
    if isinstance(path, str) and path and not Path(path).expanduser().is_absolute():
        data = {**data, "workload": {**workload, "hf_config": str(folder / path)}}
    return data
