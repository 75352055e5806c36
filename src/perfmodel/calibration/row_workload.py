"""The workload a measurement row describes: its ``model`` and shape columns as a
:class:`~perfmodel.scenario.WorkloadSpec`, built once per distinct spec.  A row whose software is a
benchmark harness that builds the named model its own way gets the model as built
(:func:`perfmodel.vocabulary.harness_model`), one whose harness turns off NCCL's peer-to-peer
transport runs its collectives over the GPU's PCIe link (:func:`row_intra`), and one whose harness
holds a CNN in a layout of its own runs it so (:func:`row_channels_last`).

Shared by the train predictor (:mod:`perfmodel.calibration.predictors.train`), the calibration's
parameter groups (:func:`perfmodel.calibration.fit.row_groups`) and the interval
model (:mod:`perfmodel.calibration.intervals`, which places rows on the model-size axis with the
same ``Workload.params`` an estimate uses), so neither imports the other.
"""

from __future__ import annotations

import functools
import math

from perfmodel.calibration.measurements import SHAPE_COLUMNS
from perfmodel.scenario import WorkloadSpec
from perfmodel.vocabulary import harness_model, harness_of
from perfmodel.workloads import workload_from_spec

__all__ = ["present", "row_model", "row_intra", "row_channels_last", "workload_spec", "workload_of_spec"]


def present(value) -> bool:
    """A cell that holds a value (not None, NaN or empty)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != ""


def row_model(row) -> tuple[str, str | None]:
    """(the model the row ran, why it differs from the ``model`` column or None)."""
    model = str(row["model"]).strip()
    built = harness_model(model, row.get("software") if present(row.get("software")) else None)
    return (model, None) if built is None else (built[0], f"model {built[0]}: {built[1]}")


def row_intra(row, catalog) -> tuple[str | None, str | None]:
    """(the intra-node link the row's collectives ran over, why it differs from the ``intra``
    column or None): a harness that disables NCCL's peer-to-peer transport
    (:data:`perfmodel.vocabulary.HARNESSES`) moves a multi-GPU node's collectives through host
    memory over each GPU's PCIe link, whatever NVLink the node has; a GPU whose PCIe generation
    the catalog does not know keeps the stated link."""
    stated = str(row["intra"]).strip() if present(row.get("intra")) else None
    harness = harness_of(row.get("software") if present(row.get("software")) else None)
    gpus = float(row["num_gpus"]) if present(row.get("num_gpus")) else 1.0
    if harness is None or harness.peer_to_peer or gpus < 2:
        return stated, None
    generation = catalog.gpu(row["gpu"]).pcie_generation
    link = f"pcie{generation}"
    if generation is None or stated == link:
        return stated, None
    return link, f"intra = {link}: {harness.peer_to_peer_why} (collectives through host memory over the GPU's PCIe link)"


def row_channels_last(row) -> tuple[bool | None, str | None]:
    """(the CNN layout the row's harness ran, why) when the row is a CNN's, leaves ``channels_last``
    empty and its harness (:data:`perfmodel.vocabulary.HARNESSES`) runs a layout of its own; (None,
    None) otherwise (the row's column, else the framework's recipe, decides)."""
    if present(row.get("channels_last")):
        return None, None
    harness = harness_of(row.get("software") if present(row.get("software")) else None)
    if harness is None or harness.channels_last is None:
        return None, None
    if workload_of_spec(workload_spec(row).model_dump_json()).family != "cnn":  # no convolutions to lay out
        return None, None
    return harness.channels_last, f"channels_last = {int(harness.channels_last)}: {harness.channels_last_why}"


def workload_spec(row) -> WorkloadSpec:
    """The row's model (as its software builds it) and the shape columns it fills in."""
    fields = {"model": row_model(row)[0]}
    for column in SHAPE_COLUMNS:
        if column in row and present(row[column]):
            fields[column] = row[column] if column == "ffn_act" else int(float(row[column]))
    return WorkloadSpec(**fields)


@functools.lru_cache(maxsize=512)
def workload_of_spec(spec_json: str):
    """One Workload object per distinct spec, so its op tables are built once (see Workload.ops)."""
    return workload_from_spec(WorkloadSpec.model_validate_json(spec_json))
