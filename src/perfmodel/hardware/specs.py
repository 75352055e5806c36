"""Pydantic hardware specs: GPU, Link, Node, Instance and Cluster.

Every quantity is stored in SI base units (bytes, bytes/s, FLOP/s, W, s, USD); YAML and JSON may
give human strings ("80 GB", "3.35 TB/s", "200 Gb/s") that are parsed once here.  Bandwidths of
links are stored **per direction**: NVIDIA quotes NVLink and PCIe as the sum of both directions,
and a ring collective uses one direction's worth per hop (hardware_facts.md, section 1, rule 3-5).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from perfmodel.inputs import INTEGER_LIMITS, Count
from perfmodel.units import DIMENSIONS, parse_quantity

PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
LINK_KINDS = ("nvlink", "nvswitch", "pcie", "infiniband", "roce", "efa", "ethernet", "cloud_fabric", "omnipath")
FABRICS = ("nvswitch", "nvlink_mesh", "nvlink_bridge", "pcie")
PRICINGS = ("on_demand", "spot", "reserved_1y", "reserved_3y")
ARCHITECTURES = ("Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell", "CDNA3")
"""GPU architectures the cost models and calibration profile know (parameters are per architecture)."""
ARCHITECTURE_PREDECESSORS = {"Volta": "Pascal", "Turing": "Volta", "Ampere": "Volta", "Ada": "Ampere",
                             "Hopper": "Ampere", "Blackwell": "Hopper"}
"""The NVIDIA generation each architecture's whitepaper builds on and measures itself against:
Volta (V100) on Pascal (P100), Turing's SM on Volta's, Ampere (A100) on Volta (V100), Ada on
Ampere (GA10x), Hopper (H100) on Ampere (A100), Blackwell (B200) on Hopper (H100) (NVIDIA's Volta,
Turing, Ampere GA100, Ada, Hopper H100 and Blackwell architecture whitepapers).  AMD's CDNA3 has
none here.  A parameter that inherits (``Parameter.inherits``) and has no fitted value for an
architecture that no fitted architecture descends from takes the value of its nearest predecessor
that has one (:func:`architecture_lineage`, :meth:`perfmodel.profile.CalibrationProfile.applying_key`)."""


def architecture_lineage(architecture: str) -> tuple[str, ...]:
    """``architecture`` and its predecessors, nearest first: 'Blackwell' -> ('Blackwell', 'Hopper',
    'Ampere', 'Volta', 'Pascal') (:data:`ARCHITECTURE_PREDECESSORS`)."""
    lineage = [architecture]
    while lineage[-1] in ARCHITECTURE_PREDECESSORS:
        lineage.append(ARCHITECTURE_PREDECESSORS[lineage[-1]])
    return tuple(lineage)


def _architecture(value):
    """Canonical spelling of a known architecture (matched case-insensitively); others are errors."""
    if isinstance(value, str):
        for name in ARCHITECTURES:
            if value.strip().lower() == name.lower():
                return name
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "..."
    raise ValueError(f"unknown architecture {shown}; known: {', '.join(ARCHITECTURES)} "
                     "(the efficiency parameters are fitted per architecture)")


def _quantity(dimension: str):
    def parse(value):
        return None if value is None else parse_quantity(value, dimension)

    return BeforeValidator(parse)


def _schema(dimension: str, minimum: str = "exclusiveMinimum"):
    """JSON Schema of a quantity: an SI number, or a string with a unit (``"80 GB"``)."""
    return WithJsonSchema({"anyOf": [{"type": "number", minimum: 0}, {"type": "string"}],
                           "description": f"SI number or {DIMENSIONS[dimension]}"})


Bytes = Annotated[float, _quantity("bytes"), Field(gt=0), _schema("bytes")]
Bandwidth = Annotated[float, _quantity("bandwidth"), Field(gt=0), _schema("bandwidth")]
FlopRate = Annotated[float, _quantity("flop_rate"), Field(gt=0), _schema("flop_rate")]
Power = Annotated[float, _quantity("power"), Field(gt=0), _schema("power")]
Seconds = Annotated[float, _quantity("time"), Field(ge=0), _schema("time", "minimum")]
Hertz = Annotated[float, _quantity("frequency"), Field(gt=0), _schema("frequency")]


class Spec(BaseModel):
    """Base of catalog entries: unknown fields are errors, every entry names its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    source: str = Field(min_length=1, description="document and table, or owner/repo file @ commit")
    notes: str | None = None


class PeakFlops(BaseModel):
    """Dense peak FLOP/s (or OP/s for int8) per precision; null = not supported or not found."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fp64: FlopRate | None = None
    fp32: FlopRate | None = Field(None, description="FP32 on CUDA cores (no tensor cores)")
    tf32: FlopRate | None = Field(None, description="TF32 on tensor cores")
    fp16: FlopRate | None = None
    bf16: FlopRate | None = None
    fp8: FlopRate | None = None
    int8: FlopRate | None = None


class ReferenceFabric(BaseModel):
    """The inter-node network a GPU generation usually ships with (its DGX SuperPOD / reference
    cluster), used when a multi-node job does not state ``inter``; the assumption is recorded
    on the :class:`Cluster` and shown to the user."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inter: str = Field(description="'N x LINK' per node of the reference system, e.g. '8 x ib-ndr'")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs in one node of the reference system (a DGX H100: "
                                                          "8; a DGX GB200 compute tray: 4); a job whose nodes hold "
                                                          "another number of GPUs gets as many NICs per GPU")
    system: str = Field(min_length=1, description="the reference system, e.g. 'DGX SuperPOD (DGX H100)'")
    nvlink_domain: int | None = Field(
        None, ge=1, le=1024, description="GPUs on one NVLink fabric when it spans several nodes (GB200 NVL72: 72 "
                                         "GPUs over 18 compute trays); a job that does not state gpus_per_node "
                                         "is placed in NVLink domains (perfmodel.hardware.catalog."
                                         "nvlink_domain_share); null = the NVLink fabric is the node")
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _parses(self):
        parse_inter(self.inter)
        if self.nvlink_domain is not None and self.nvlink_domain % self.gpus_per_node:
            raise ValueError(f"nvlink_domain {self.nvlink_domain} is not a whole number of nodes of "
                             f"gpus_per_node {self.gpus_per_node}")
        return self


class GPU(Spec):
    """One accelerator.  ``memory`` in bytes, ``memory_bandwidth`` in bytes/s, ``tdp`` in W."""

    vendor: str
    architecture: Annotated[str, BeforeValidator(_architecture)] = Field(
        description="one of " + ", ".join(ARCHITECTURES) + " (any case)")
    form_factor: str | None = None
    memory: Bytes = Field(description="DRAM capacity: the datasheet figure in binary units (\"80 GB\" = 80 GiB)")
    memory_usable: Bytes | None = Field(
        None, description="what the driver reports as the GPU's memory (nvidia-smi memory.total) with ECC at "
                          "its default, where a source gives it: GDDR parts with ECC on set about 1/16 aside "
                          "(L4: 23,034 MiB of 24 GiB); null = the whole of ``memory`` (HBM parts keep at most "
                          "0.5 %)")
    memory_bandwidth: Bandwidth
    peak_flops: PeakFlops
    sm_count: int | None = Field(None, gt=0)
    l2_cache: Bytes | None = None
    boost_clock_hz: Hertz | None = None
    base_clock_hz: Hertz | None = Field(
        None, description="datasheet base clock: the clock NVIDIA guarantees at the board power limit "
                          "under a heavy load (perfmodel.models.gemm derives the sustained clock from it)")
    tensor_core_generation: int | None = Field(
        None, ge=1, le=6, description="NVIDIA tensor-core generation (Volta 1, Turing 2, Ampere 3, "
                                      "Ada and Hopper 4, Blackwell 5); null = none or not NVIDIA")
    tdp: Power | None = Field(..., description="board power limit in W; null = not found (must be given)")
    idle_power: Power | None = Field(None, description="measured idle draw; null = not found")
    nvlink_generation: int | None = Field(None, ge=1, le=6)
    nvlink_bandwidth_per_direction: Bandwidth | None = None
    pcie_generation: int | None = Field(None, ge=3, le=6)
    mig_slices: int | None = Field(None, ge=1)
    sparse_halved: bool = Field(False, description="dense peaks halved from a sparse-only datasheet")
    reference_fabric: ReferenceFabric | None = Field(
        None, description="usual inter-node network of this GPU's reference cluster; null = none sourced")
    peaks_between: tuple[str, str] | None = Field(
        None, description="two catalog GPUs whose peaks the entry's source says this GPU's unknown peaks lie "
                          "between; each null peak is then taken as their geometric mean (an ASSUMPTION, "
                          "listed in ``assumed``)")
    assumed: tuple[str, ...] = Field(
        (), description="fields the catalog filled in for a null value, with the rule used (set when the "
                        "catalog loads; shown with every estimate on this GPU)")

    @model_validator(mode="after")
    def _usable_within_memory(self):
        if self.memory_usable is not None and not 0.5 * self.memory < self.memory_usable <= self.memory:
            raise ValueError(f"memory_usable {self.memory_usable / 2**20:,.0f} MiB must be at most memory "
                             f"({self.memory / 2**20:,.0f} MiB) and more than half of it: it is the part of "
                             "memory the driver leaves to jobs")
        return self

    @property
    def memory_capacity(self) -> float:
        """Bytes a job can place on the GPU: ``memory_usable`` where known, else ``memory``."""
        return self.memory if self.memory_usable is None else self.memory_usable

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s for ``precision``; a clear error when the GPU has none."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is unknown; allowed: {', '.join(PRECISIONS)}")
        value = getattr(self.peak_flops, precision)
        if value is None:
            have = [p for p in PRECISIONS if getattr(self.peak_flops, p) is not None]
            raise ValueError(
                f"precision {precision!r}: {self.name} has no {precision} peak in the catalog; "
                f"allowed for this GPU: {', '.join(have) or 'none'}"
            )
        return value

    @property
    def precisions(self) -> list[str]:
        return [p for p in PRECISIONS if getattr(self.peak_flops, p) is not None]


class Link(Spec):
    """A link kind: one NVLink generation per GPU, a PCIe x16 slot, one NIC port.

    ``bandwidth_per_direction`` is what one GPU (NVLink/NVSwitch/PCIe) or one NIC (network)
    can send in one direction, in bytes/s.  ``latency`` is the software-visible one-hop latency
    in seconds (null when no source gives one; the calibration profile then supplies alpha).
    """

    kind: Literal[LINK_KINDS]  # type: ignore[valid-type]
    bandwidth_per_direction: Bandwidth
    latency: Seconds | None = None
    generation: int | None = None


class Node(Spec):
    """A server: ``gpus_per_node`` GPUs on an intra-node fabric, ``nics`` network ports."""

    gpu: str
    gpus_per_node: Count("gpus_per_node")
    intra: str | None = Field(description="link name of the intra-node fabric (nvlink3, pcie4, ...); "
                                          "null when no source says")
    fabric: Literal[FABRICS] = "nvswitch"  # type: ignore[valid-type]
    nics: int = Field(0, ge=0, le=INTEGER_LIMITS["nics"], description="network ports per node used for GPU traffic")
    nic: str | None = Field(None, description="link name of one network port")


class SpotPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: float = Field(ge=0)
    max: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self):
        if self.min > self.max:
            raise ValueError(f"spot price min {self.min} exceeds max {self.max}")
        return self


class Instance(Node):
    """A cloud instance: a node with a provider, a region and prices in USD per instance-hour."""

    provider: str
    region: str | None = None
    vcpus: int | None = Field(None, gt=0)
    host_memory: Bytes | None = None
    network_bandwidth: Bandwidth | None = Field(None, description="instance aggregate, bytes/s")
    price_on_demand_usd_per_hour: float | None = Field(None, gt=0)
    price_spot_usd_per_hour: SpotPrice | None = None
    price_reserved_1y_usd_per_hour: float | None = Field(None, gt=0)
    price_reserved_3y_usd_per_hour: float | None = Field(None, gt=0)
    price_as_of: dt.date | None = None

    @model_validator(mode="after")
    def _prices_dated(self):
        has_price = any(
            p is not None
            for p in (self.price_on_demand_usd_per_hour, self.price_spot_usd_per_hour,
                      self.price_reserved_1y_usd_per_hour, self.price_reserved_3y_usd_per_hour)
        )
        if has_price and self.price_as_of is None:
            raise ValueError(f"instance {self.name}: prices need price_as_of (the snapshot date)")
        return self

    def price_usd_per_hour(self, pricing: str = "on_demand") -> float | None:
        """Price of one instance-hour; spot is the mean of the quoted min..max range."""
        if pricing not in PRICINGS:
            raise ValueError(f"pricing {pricing!r} is unknown; allowed: {', '.join(PRICINGS)}")
        if pricing == "spot":
            spot = self.price_spot_usd_per_hour
            return None if spot is None else 0.5 * (spot.min + spot.max)
        return getattr(self, f"price_{pricing}_usd_per_hour")


_INTER = re.compile(r"^\s*(?:(\d+)\s*[xX×]\s*)?([A-Za-z0-9_.-]+?)\s*$")


def parse_inter(text: str) -> tuple[int, str]:
    """Parse an inter-node network string: '8 x ib-hdr' -> (8, 'ib-hdr'); 'ib-ndr' -> (1, 'ib-ndr').

    'efa-3200' names an aggregate: it is returned as-is, and the catalog resolves it to
    32 ports of the 'efa' link (100 Gb/s each).
    """
    match = _INTER.match(str(text))
    if not match:
        raise ValueError(f"inter {text!r} is not 'N x LINK' (e.g. '8 x ib-hdr', '4 x roce-400')")
    count = int(match.group(1)) if match.group(1) else 1
    if count <= 0:
        raise ValueError(f"inter {text!r}: the port count must be positive")
    return count, match.group(2)


class Cluster(BaseModel):
    """Resolved hardware of a job: ``nodes`` x ``gpus_per_node`` GPUs of one kind.

    Built by :meth:`perfmodel.hardware.catalog.Catalog.cluster` from a scenario's ``hardware``
    section (a GPU and a shape, or an instance and a node count).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: GPU
    nodes: int = Field(gt=0)
    gpus_per_node: Count("gpus_per_node")
    intra: Link
    fabric: Literal[FABRICS]  # type: ignore[valid-type]
    nics_per_node: int = Field(0, ge=0)
    nic: Link | None = None
    instance: Instance | None = None
    assumed: list[str] = Field(default_factory=list,
                               description="fields not given and filled from a reference, with the source")

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def inter_bandwidth_per_node(self) -> float:
        """Bytes/s one node can send per direction over its NICs (0 without a network)."""
        return 0.0 if self.nic is None else self.nics_per_node * self.nic.bandwidth_per_direction
