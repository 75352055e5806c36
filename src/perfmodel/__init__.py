"""perfmodel: how long a deep-learning training job takes on given GPUs, what limits it,
whether it fits, and what it costs.  The public API in one screen.

    from perfmodel import load_scenario, estimate, search, rank, validate, calibrate

Few verbs, used the same way everywhere (as scikit-learn's fit/predict/score): ``estimate`` one
scenario, ``search`` its plans, ``scaling`` over GPU counts, ``rank`` instances, ``validate``
against measurements, ``calibrate`` to them.  Results with more than one row are pandas
DataFrames.  The heavier entry points (pandas, scipy) are imported on first use, so ``import
perfmodel`` stays light.
"""

from importlib import import_module

from perfmodel.hardware.catalog import Catalog, CatalogError, load_catalog
from perfmodel.profile import CalibrationProfile, default_profile, load_profile
from perfmodel.scenario import Scenario, ScenarioError, load_scenario
from perfmodel.units import UnitError, format_quantity, parse_quantity

__version__ = "0.1.0"

# name -> module that defines it, imported when the name is first used
_LAZY = {
    "Estimate": "perfmodel.estimator", "estimate": "perfmodel.estimator",
    "search": "perfmodel.plan_search", "best_estimate": "perfmodel.plan_search",
    "scaling": "perfmodel.scaling_curve",
    "rank": "perfmodel.ranking",
    "validate": "perfmodel.calibration.validate", "summarize": "perfmodel.calibration.validate",
    "calibrate": "perfmodel.calibration.fit", "cross_validate": "perfmodel.calibration.fit",
    "load_measurements": "perfmodel.calibration.measurements",
    "shipped_measurements": "perfmodel.calibration.measurements",
    "get_workload": "perfmodel.workloads", "workload_from_spec": "perfmodel.workloads",
    "BaselineStore": "perfmodel.baseline",
}

__all__ = [
    "Catalog", "CatalogError", "load_catalog",
    "CalibrationProfile", "default_profile", "load_profile",
    "Scenario", "ScenarioError", "load_scenario",
    "UnitError", "format_quantity", "parse_quantity",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")
