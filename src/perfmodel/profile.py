"""Calibration profiles: fitted values of the efficiency parameters, with provenance.

The parameters themselves (default, bounds, unit, grouping, source) are declared once, statically,
in :mod:`perfmodel.parameters`.  A :class:`CalibrationProfile` holds fitted values (YAML, with
provenance); the shipped one, ``data/calibration/default.yaml``, is produced by ``perfmodel
calibrate`` on ``data/measurements/``.  :meth:`CalibrationProfile.table` lists every parameter with
its value, bounds, standard error and source (scikit-learn's ``get_params`` habit).

Parameters can be *grouped* by physics (``per="architecture"``, ``per="link_kind"`` or
``per="framework"``, the software stack of :data:`perfmodel.vocabulary.FRAMEWORKS`): the value for
group ``g`` is stored as ``name[g]`` and falls back to the ungrouped ``name`` (the pooled value of
the fitted groups), then to the default.  Values are never per measurement row.  Unknown names, groups and top-level keys are
errors that list what exists.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.calibration.measurements import KINDS
from perfmodel.hardware.specs import LINK_KINDS, architecture_lineage
from perfmodel.parameters import PARAMETERS, Parameter
from perfmodel.vocabulary import FRAMEWORKS

__all__ = ["Parameter", "PARAMETERS", "CalibrationProfile", "load_profile", "default_profile"]

# metrics where a larger value is slower (prediction intervals flip their ratio bounds for them)
TIME_METRICS = ("step_time_s", "time_to_train_s", "gpu_hours", "time_us")


def scale_by_ratio(metric: str, predicted, bounds):
    """(low, high) of a prediction from (low, high) ratio bounds in rate orientation
    (measured / predicted for rates, predicted / measured for times)."""
    low, high = bounds
    if metric in TIME_METRICS:
        return predicted / high, predicted / low
    return predicted * low, predicted * high


def _known_groups(per: str) -> tuple[str, ...]:
    """The groups a ``per`` grouping allows: link kinds, frameworks, or the architectures of the catalog."""
    if per == "link_kind":
        return LINK_KINDS
    if per == "framework":
        return FRAMEWORKS
    from perfmodel.hardware.catalog import load_catalog

    return tuple(sorted({gpu.architecture for gpu in load_catalog().gpus.values()}))


def _check_group(where: str, group: str, per: str | None) -> None:
    if per is None:
        raise ValueError(f"profile {where}: the parameter is not grouped, so [{group}] is not allowed")
    known = _known_groups(per)
    if group not in known:
        raise ValueError(f"profile {where}: unknown {per} {group!r}; known: {', '.join(known)}")


def parameter_of(key: str, section: str = "values") -> Parameter:
    """The :class:`Parameter` of a profile key ``name`` or ``name[group]``; a ValueError naming
    what exists for an unknown name or group."""
    name, group = split_key(key)
    if name not in PARAMETERS:
        raise ValueError(f"profile {section} {key!r}: unknown parameter {name!r}; known: "
                         f"{', '.join(sorted(PARAMETERS))}")
    if group is not None:
        _check_group(f"{section} {key!r}", group, PARAMETERS[name].per)
    return PARAMETERS[name]


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

    model_config = ConfigDict(extra="forbid")

    values: dict[str, float] = Field(default_factory=dict)
    uncertainty: dict[str, float] = Field(default_factory=dict)
    interval: dict[str, tuple[float, float]] = Field(default_factory=dict)
    provenance: dict[str, Any] = Field(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        for key, value in self.values.items():
            parameter = parameter_of(key, "values")
            if not parameter.low <= value <= parameter.high:
                raise ValueError(
                    f"profile value {key} = {value} outside the allowed [{parameter.low}, {parameter.high}]")
        for key in self.uncertainty:
            parameter_of(key, "uncertainty")
        for key in self.interval:
            kind, group = split_key(key)
            if kind not in KINDS:
                raise ValueError(f"profile interval {key!r}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
            if group is not None:
                _check_group(f"interval {key!r}", group, "architecture")

    def get(self, name: str, group: str | None = None) -> float:
        """Value of ``name`` for ``group``: the value of :meth:`applying_key` (``name[group]``; for
        an architecture without one, its nearest predecessor's; else the pooled ``name``), else the
        group's default, else the default."""
        if name not in PARAMETERS:
            raise KeyError(f"unknown efficiency parameter {name!r}; known: {', '.join(sorted(PARAMETERS))}")
        key = self.applying_key(name, group)
        return self.values[key] if key in self.values else PARAMETERS[name].default_for(group)

    def table(self):
        """Every parameter as a pandas DataFrame, one row per name, per group with a sourced default of
        its own (DeepSpeed's ZeRO-3 gather bucket) and per fitted group: ``name``,
        ``group``, ``value`` (the profile's, else the default), ``fitted`` (whether the profile sets
        it), ``default``, ``low``, ``high``, ``unit``, ``per``, ``standard_error`` (log space, NaN
        when not fitted), ``description`` and ``source``."""
        import pandas as pd

        groups: dict[str, list[str | None]] = {
            name: [None, *(group for group, _ in parameter.group_defaults)] for name, parameter in PARAMETERS.items()}
        for key in self.values:
            name, group = split_key(key)
            if group is not None and group not in groups[name]:
                groups[name].append(group)
        rows = []
        for name, parameter in PARAMETERS.items():
            for group in groups[name]:
                key = f"{name}[{group}]" if group is not None else name
                rows.append({
                    "name": name, "group": group, "value": self.get(name, group), "fitted": key in self.values,
                    "default": parameter.default_for(group), "low": parameter.low, "high": parameter.high,
                    "unit": parameter.unit, "per": parameter.per,
                    "standard_error": self.uncertainty.get(key, float("nan")),
                    "description": parameter.description, "source": parameter.source,
                })
        return pd.DataFrame(rows)

    def framework_pooled(self, framework: str | None) -> bool:
        """Whether an estimate for ``framework`` (None = not stated) uses pooled framework traits: some
        ``per="framework"`` parameter that pools has values of its own for other frameworks but none for
        this one.  A profile with no per-framework values treats every framework alike, so nothing is pooled."""
        for name, parameter in PARAMETERS.items():
            if parameter.per == "framework" and parameter.pools and self.has_groups(name):
                if framework is None or f"{name}[{framework}]" not in self.values:
                    return True
        return False

    def has_groups(self, name: str) -> bool:
        """Whether the profile holds a value of ``name`` for some group (``name[group]``)."""
        return any(key.startswith(f"{name}[") for key in self.values)

    def prior_only(self, name: str, group: str | None = None) -> bool:
        """Whether :meth:`get` of ``name`` for ``group`` returns a prior, not a value fitted to rows:
        no fitted value applies (neither ``name[group]`` nor a pooled ``name``), or the one that
        applies is listed in ``provenance['not_determined']``."""
        key = self.applying_key(name, group)
        return key not in self.values or key in self.provenance.get("not_determined", ())

    def pooled(self, name: str, group: str | None = None) -> bool:
        """Whether the value :meth:`get` returns for ``group`` was partially pooled: its own rows did
        not determine it, so it is the typical group's value moved as far as they pull it (listed in
        ``provenance['pooled']``, :mod:`perfmodel.calibration.fit`)."""
        return self.applying_key(name, group) in self.provenance.get("pooled", ())

    def applying_key(self, name: str, group: str | None) -> str:
        """The key whose value :meth:`get` uses for ``group`` if fitted: ``name[group]`` when the
        profile has it; for an architecture without it, a parameter that inherits
        (:attr:`~perfmodel.parameters.Parameter.inherits`: the training step's sustained clock,
        attention and convolution rates) on a generation no fitted one descends from (a newest
        generation of its line: Blackwell, Ada, Turing) takes its nearest predecessor whose rows
        fitted one (``name[Hopper]`` for Blackwell:
        :data:`perfmodel.hardware.specs.ARCHITECTURE_PREDECESSORS`), as the trend from it continues;
        else (an interior generation, bracketed by fitted ones) the pooled ``name``, the median of the
        fitted groups (:func:`perfmodel.calibration.fit.pool_groups`).  Chosen on training rows with
        one architecture held out of the training-stage fit: Hopper from Ampere 22.1 % MAPE against
        33.5 % from the median; Ampere from the median 16.9 % against 21.2 % from Volta."""
        if group is None:
            return name
        parameter = PARAMETERS[name]
        if f"{name}[{group}]" in self.values:
            return f"{name}[{group}]"
        if parameter.inherits:
            undetermined = self.provenance.get("not_determined", ())
            fitted = [split_key(key)[1] for key in self.values
                      if key.startswith(f"{name}[") and key not in undetermined]
            # an interior generation (a fitted one descends from it) sits between fitted ones: the median
            if not any(group in architecture_lineage(other)[1:] for other in fitted):
                for predecessor in architecture_lineage(group)[1:]:
                    if predecessor in fitted:
                        return f"{name}[{predecessor}]"
        return name

    def relative_error(self, key: str) -> float | None:
        """``uncertainty[key] / values[key]`` (one standard error, relative: log space), None when
        either is missing, not finite or the value is not positive."""
        value, error = self.values.get(key), self.uncertainty.get(key)
        if value is not None and value > 0 and error is not None and math.isfinite(error):
            return float(error / value)
        return None

    def log_error(self, name: str, group: str | None = None) -> float | None:
        """One standard error, in log space (relative), of the value :meth:`get` returns for
        ``group``: the applying fitted key's :meth:`relative_error`; None when none applies."""
        return self.relative_error(self.applying_key(name, group))

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
    sections = tuple(CalibrationProfile.model_fields)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a calibration profile is a mapping with {', '.join(map(repr, sections))}")
    unknown = [str(key) for key in data if key not in sections]
    if unknown:
        raise ValueError(f"{path}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(sections)}")
    try:
        return CalibrationProfile.model_validate(data)
    except ValidationError as error:
        problems = [(".".join(map(str, e["loc"])) + ": " if e["loc"] else "") + e["msg"].removeprefix("Value error, ")
                    for e in error.errors()]
        raise ValueError(f"{path}: {'; '.join(problems)}") from None


_SHIPPED: dict[int, CalibrationProfile] = {}


def default_profile() -> CalibrationProfile:
    """The shipped profile (read once per file version), or the declared defaults when none is
    shipped.  The returned profile is shared: use ``with_values`` or ``model_copy`` to vary it."""
    from perfmodel.hardware.catalog import shipped_data_path

    path = shipped_data_path("calibration", "default.yaml")
    if not path.exists():
        return CalibrationProfile()
    version = path.stat().st_mtime_ns
    if version not in _SHIPPED:
        _SHIPPED[version] = load_profile(path)
    return _SHIPPED[version]
