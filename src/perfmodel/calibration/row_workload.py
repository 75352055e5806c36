"""The workload a measurement row describes: its ``model`` and shape columns as a
:class:`~perfmodel.scenario.WorkloadSpec`, built once per distinct spec.  A row whose software is a
benchmark harness that builds the named model its own way gets the model as built
(:func:`perfmodel.vocabulary.harness_model`).

Shared by the train predictor (:mod:`perfmodel.calibration.predictors.train`) and the interval
model (:mod:`perfmodel.calibration.intervals`, which places rows on the model-size axis with the
same ``Workload.params`` an estimate uses), so neither imports the other.
"""

from __future__ import annotations

import functools
import math

from perfmodel.calibration.measurements import SHAPE_COLUMNS
from perfmodel.scenario import WorkloadSpec
from perfmodel.vocabulary import harness_model
from perfmodel.workloads import workload_from_spec

__all__ = ["present", "row_model", "workload_spec", "workload_of_spec"]


def present(value) -> bool:
    """A cell that holds a value (not None, NaN or empty)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value != ""


def row_model(row) -> tuple[str, str | None]:
    """(the model the row ran, why it differs from the ``model`` column or None)."""
    model = str(row["model"]).strip()
    built = harness_model(model, row.get("software") if present(row.get("software")) else None)
    return (model, None) if built is None else (built[0], f"model {built[0]}: {built[1]}")


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
