"""perfmodel: how long a deep-learning training job takes on given GPUs, what limits it,
whether it fits, and what it costs.  The public API in one screen."""

from perfmodel.hardware.catalog import Catalog, CatalogError, load_catalog
from perfmodel.profile import CalibrationProfile, default_profile, load_profile
from perfmodel.scenario import Scenario, ScenarioError, load_scenario
from perfmodel.units import UnitError, format_quantity, parse_quantity

__version__ = "0.1.0"

__all__ = [
    "Catalog", "CatalogError", "load_catalog",
    "CalibrationProfile", "default_profile", "load_profile",
    "Scenario", "ScenarioError", "load_scenario",
    "UnitError", "format_quantity", "parse_quantity",
]
