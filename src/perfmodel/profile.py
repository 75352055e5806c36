"""Efficiency parameters and calibration profiles.

Every efficiency knob of the cost models (an eta, a latency, an overlap fraction, a per-step
overhead) is a :class:`Parameter` registered by the model module that uses it, with its default,
its bounds, its unit and where the default comes from.  A :class:`CalibrationProfile` holds fitted
values (YAML, with provenance); the shipped one, ``data/calibration/default.yaml``, is produced by
``perfmodel calibrate`` on ``data/measurements/``.

Parameters can be *grouped* by physics (``per="architecture"`` or ``per="link_kind"``): the value
for group ``g`` is stored as ``name[g]`` and falls back to the ungrouped ``name``, then to the
default.  Values are never per measurement row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

__all__ = ["Parameter", "PARAMETERS", "register", "CalibrationProfile", "load_profile", "default_profile"]


@dataclass(frozen=True)
class Parameter:
    """One efficiency parameter: default (the prior's centre), bounds, unit and provenance."""

    name: str
    default: float
    low: float
    high: float
    unit: str
    description: str
    source: str
    per: str | None = None  # None | "architecture" | "link_kind"
    prior_log_sigma: float = 0.5  # width of the log-normal prior used by calibrate()
    group_defaults: tuple[tuple[str, float], ...] = ()  # ((group, default), ...): sourced in `source`

    def __post_init__(self):
        for group, value in (("", self.default), *self.group_defaults):
            if not self.low <= value <= self.high:
                raise ValueError(f"parameter {self.name}{f'[{group}]' if group else ''}: default {value} "
                                 f"outside [{self.low}, {self.high}]")

    def default_for(self, group: str | None = None) -> float:
        """The default for ``group`` (its own default when the physics differs by group), else ``default``."""
        return dict(self.group_defaults).get(group, self.default) if group is not None else self.default


PARAMETERS: dict[str, Parameter] = {}

# metrics where a larger value is slower (prediction intervals flip their ratio bounds for them)
TIME_METRICS = ("step_time_s", "time_to_train_s", "gpu_hours", "time_us")


def scale_by_ratio(metric: str, predicted, bounds):
    """(low, high) of a prediction from (low, high) ratio bounds in rate orientation
    (measured / predicted for rates, predicted / measured for times)."""
    low, high = bounds
    if metric in TIME_METRICS:
        return predicted / high, predicted / low
    return predicted * low, predicted * high


def register(*parameters: Parameter) -> None:
    """Register the parameters of a model module (called once at import)."""
    for parameter in parameters:
        existing = PARAMETERS.get(parameter.name)
        if existing is not None and existing != parameter:
            raise ValueError(f"parameter {parameter.name} registered twice with different definitions")
        PARAMETERS[parameter.name] = parameter


def split_key(key: str) -> tuple[str, str | None]:
    """'matmul_efficiency[Hopper]' -> ('matmul_efficiency', 'Hopper')."""
    if key.endswith("]") and "[" in key:
        name, group = key[:-1].split("[", 1)
        return name, group
    return key, None


class CalibrationProfile(BaseModel):
    """Fitted parameter values with their provenance.

    ``values`` maps ``name`` or ``name[group]`` to a float; ``uncertainty`` the same keys to one
    standard error (log space); ``interval`` maps ``kind`` or ``kind[group]`` to the
    cross-validated (low, high) ratio quantiles of measured/predicted used for 80 % prediction
    intervals; ``provenance`` says how the profile was made.
    """

    values: dict[str, float] = Field(default_factory=dict)
    uncertainty: dict[str, float] = Field(default_factory=dict)
    interval: dict[str, tuple[float, float]] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        for key, value in self.values.items():
            name, _ = split_key(key)
            if name not in PARAMETERS:
                continue  # parameters of models not imported yet are checked on use
            parameter = PARAMETERS[name]
            if not parameter.low <= value <= parameter.high:
                raise ValueError(
                    f"profile value {key} = {value} outside the allowed [{parameter.low}, {parameter.high}]")

    def get(self, name: str, group: str | None = None) -> float:
        """Value of ``name`` for ``group``: ``name[group]``, else ``name``, else the group's default,
        else the default."""
        if name not in PARAMETERS:
            raise KeyError(f"unknown efficiency parameter {name!r}; known: {', '.join(sorted(PARAMETERS))}")
        if group is not None and f"{name}[{group}]" in self.values:
            return self.values[f"{name}[{group}]"]
        return self.values.get(name, PARAMETERS[name].default_for(group))

    def interval_ratio(self, kind: str, group: str | None = None):
        """(low, high) 80 % ratio bounds for ``kind[group]``, else ``kind``, else None."""
        return self.interval.get(f"{kind}[{group}]") or self.interval.get(kind)

    def with_values(self, **values: float) -> "CalibrationProfile":
        """A copy with some values replaced (keys as in ``values``; use dict-unpacking for [group])."""
        return self.model_copy(update={"values": {**self.values, **values}})

    def save(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(self.model_dump(mode="json"), handle, sort_keys=True)


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read a profile YAML written by ``perfmodel calibrate`` (or by hand)."""
    from perfmodel.inputs import load_structured

    data = load_structured(path, "calibration profile") or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a calibration profile is a mapping with 'values', 'uncertainty', "
                         "'interval' and 'provenance'")
    try:
        return CalibrationProfile.model_validate(data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


_SHIPPED: dict[int, CalibrationProfile] = {}


def default_profile() -> CalibrationProfile:
    """The shipped profile (read once per file version), or the registered defaults when none is
    shipped.  The returned profile is shared: use ``with_values`` or ``model_copy`` to vary it."""
    from perfmodel.hardware.catalog import shipped_data_path

    path = shipped_data_path("calibration", "default.yaml")
    if not path.exists():
        return CalibrationProfile()
    version = path.stat().st_mtime_ns
    if version not in _SHIPPED:
        _SHIPPED[version] = load_profile(path)
    return _SHIPPED[version]
