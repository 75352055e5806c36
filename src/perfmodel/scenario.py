"""Scenario files: workload + hardware + plan (+ data pipeline, + run), as pydantic models.

The format is the one in the project's scenario spec (README, "Scenario files"): YAML or JSON,
the same field names as the measurement CSV, nested.  Human units ("2 GB/s", "60 s") are parsed
here once.  Plan fields left out are ``None``: ``estimate`` uses the documented defaults,
``search`` enumerates them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from perfmodel.hardware.catalog import format_validation_error
from perfmodel.units import parse_quantity

__all__ = ["Scenario", "WorkloadSpec", "HardwareSpec", "Plan", "DataSpec", "RunSpec",
           "ScenarioError", "load_scenario", "RECOMPUTE", "OPTIMIZERS"]

RECOMPUTE = ("none", "selective", "full", "every_k", "sqrt")
OPTIMIZERS = ("adam", "sgd")
TRAIN_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


class ScenarioError(ValueError):
    """A scenario file that is malformed; the message names the file and the field."""


def _number(dimension: str):
    return BeforeValidator(lambda v: None if v is None else parse_quantity(v, dimension))


_Count = Annotated[float, _number("count"), Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkloadSpec(_Section):
    """A zoo model by name, ``model: transformer`` with its shape (measurement CSV columns), or
    ``hf_config: path/to/config.json`` (a HuggingFace config; a relative path is relative to the
    scenario file; shape fields given with it override the file's, e.g. ``seq_len``)."""

    model: str | None = Field(None, min_length=1)
    hf_config: str | None = Field(None, min_length=1, description="HuggingFace config.json path")
    layers: int | None = Field(None, gt=0)
    hidden: int | None = Field(None, gt=0)
    heads: int | None = Field(None, gt=0)
    kv_heads: int | None = Field(None, gt=0)
    ffn_hidden: int | None = Field(None, gt=0)
    ffn_act: Literal["gelu", "swiglu"] | None = None
    seq_len: int | None = Field(None, gt=0)
    vocab: int | None = Field(None, gt=0)
    image_size: int | None = Field(None, gt=0)
    experts: int | None = Field(None, gt=0, description="mixture of experts: experts per MLP (1 = dense)")
    top_k: int | None = Field(None, gt=0, description="mixture of experts: experts each token uses")
    capacity_factor: float | None = Field(None, gt=0, description="expert buffer padding; null = dropless")

    @model_validator(mode="after")
    def _one_model(self):
        if (self.model is None) == (self.hf_config is None):
            raise ValueError("give one of 'model' (a zoo name or transformer) and 'hf_config' (a config.json path)")
        return self


class HardwareSpec(_Section):
    """A GPU and a cluster shape, or a catalog instance and a node count."""

    gpu: str | None = None
    num_gpus: int | None = Field(None, gt=0)
    gpus_per_node: int | None = Field(None, gt=0)
    intra: str | None = None
    inter: str | None = None
    instance: str | None = None
    nodes: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_way(self):
        if self.gpu is None and self.instance is None:
            raise ValueError("give 'gpu' (with num_gpus) or 'instance' (with nodes)")
        return self


class Plan(_Section):
    """Parallel layout and training settings; ``None`` = not fixed (estimate's default, or searched)."""

    precision: Literal[TRAIN_PRECISIONS] | None = None  # type: ignore[valid-type]
    tp: int | None = Field(None, gt=0)
    pp: int | None = Field(None, gt=0)
    dp: int | None = Field(None, gt=0)
    cp: int | None = Field(None, gt=0)
    vp: int | None = Field(None, gt=0, description="virtual pipeline stages per GPU (interleaving)")
    micro_batch: int | None = Field(None, gt=0)
    global_batch: int | None = Field(None, gt=0)
    recompute: Literal[RECOMPUTE] | None = None  # type: ignore[valid-type]
    recompute_every: int | None = Field(None, gt=0, description="k for recompute: every_k")
    zero: int | None = Field(None, ge=0, le=3)
    sequence_parallel: bool | None = None
    flash_attention: bool | None = None
    optimizer: Literal[OPTIMIZERS] | None = None  # type: ignore[valid-type]


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
    plan: Plan = Field(default_factory=Plan)
    data: DataSpec | None = None
    run: RunSpec | None = None


def load_scenario(source: str | Path | dict) -> Scenario:
    """Load a scenario from a YAML/JSON file path or a dict; errors name the file and field."""
    where = "scenario"
    if isinstance(source, dict):
        data = source
    else:
        where = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as error:
            raise ScenarioError(f"{where}: cannot read scenario file ({error.strerror})") from None
        try:
            data = json.loads(text) if where.endswith(".json") else yaml.safe_load(text)
        except (yaml.YAMLError, json.JSONDecodeError) as error:
            raise ScenarioError(f"{where}: not valid YAML/JSON ({error})") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: a scenario is a mapping with 'workload' and 'hardware'")
    if not isinstance(source, dict):
        data = _relative_to(data, Path(source).parent)
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(format_validation_error(error, where)) from None


def _relative_to(data: dict, folder: Path) -> dict:
    """``workload.hf_config`` resolved against the scenario file's folder when it is relative."""
    workload = data.get("workload")
    path = workload.get("hf_config") if isinstance(workload, dict) else None
    if isinstance(path, str) and path and not Path(path).expanduser().is_absolute():
        data = {**data, "workload": {**workload, "hf_config": str(folder / path)}}
    return data
