"""Parameters declared once; profiles strict about what they name; the parameter table."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

import perfmodel
from perfmodel import parameters
from perfmodel.hardware.specs import LINK_KINDS
from perfmodel.profile import CalibrationProfile, default_profile, load_profile

PACKAGE = Path(perfmodel.__file__).parent


def test_every_parameter_is_declared_once_in_the_table():
    names = [parameter.name for parameter in parameters._TABLE]
    assert len(names) == len(set(names)) == len(parameters.PARAMETERS)
    for parameter in parameters._TABLE:
        assert parameter.source and parameter.unit and parameter.description, parameter.name
        assert parameter.per in (None, "architecture", "link_kind", "framework"), parameter.name


def test_no_module_outside_the_table_declares_a_parameter():
    for path in PACKAGE.rglob("*.py"):
        if path.name == "parameters.py":
            continue
        calls = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Parameter"]
        assert not calls, f"{path} declares a Parameter"


@pytest.mark.parametrize("values, message", [
    ({"gemm_tensor_core_eficiency": 0.8}, "unknown parameter 'gemm_tensor_core_eficiency'; known: .*gemm_tensor_core_efficiency"),
    ({"gemm_tensor_core_efficiency[Hoper]": 0.8}, "unknown architecture 'Hoper'; known: .*Hopper"),
    ({"link_bandwidth_efficiency[nvlink9]": 0.8}, "unknown link_kind 'nvlink9'; known: nvlink"),
    ({"dp_overlap[Hopper]": 0.1}, r"not grouped, so \[Hopper\] is not allowed"),
    ({"gemm_tensor_core_efficiency": 7.0}, r"outside the allowed \[0.3, 1.0\]"),
])
def test_unknown_names_and_groups_are_errors_listing_what_exists(values, message):
    with pytest.raises(ValueError, match=message):
        CalibrationProfile(values=values)


def test_uncertainty_and_interval_keys_are_checked_too():
    with pytest.raises(ValueError, match="uncertainty 'bogus'.*unknown parameter"):
        CalibrationProfile(uncertainty={"bogus": 0.1})
    with pytest.raises(ValueError, match="unknown kind 'trian'; known: train"):
        CalibrationProfile(interval={"trian": (0.8, 1.2)})
    with pytest.raises(ValueError, match="unknown architecture 'Hoper'"):
        CalibrationProfile(interval={"train[Hoper]": (0.8, 1.2)})
    assert CalibrationProfile(interval={"train[Hopper]": (0.8, 1.2)}).interval_ratio("train", "Hopper") == (0.8, 1.2)


def test_profile_files_name_the_file_and_what_exists(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("values: {}\nvalus: {}\n")
    with pytest.raises(ValueError, match=r"extra.yaml: unknown top-level key\(s\) 'valus'; known: values, "
                                         "uncertainty, interval, provenance"):
        load_profile(extra)
    group = tmp_path / "group.yaml"
    group.write_text("values:\n  memory_efficiency[Hoper]: 0.9\n")
    with pytest.raises(ValueError, match="group.yaml: profile values 'memory_efficiency\\[Hoper\\]': unknown "
                                         "architecture 'Hoper'; known: "):
        load_profile(group)
    number = tmp_path / "number.yaml"
    number.write_text("values:\n  memory_efficiency: fast\n")
    with pytest.raises(ValueError, match="number.yaml: values.memory_efficiency: Input should be a valid number"):
        load_profile(number)


def test_link_kind_groups_are_the_catalog_link_kinds():
    for kind in LINK_KINDS:
        CalibrationProfile(values={f"link_latency[{kind}]": parameters.PARAMETERS["link_latency"].default})


def test_table_lists_every_parameter_with_value_bounds_error_and_source():
    profile = default_profile()
    table = profile.table()
    assert set(table["name"]) == set(parameters.PARAMETERS)
    assert list(table.columns) == ["name", "group", "value", "fitted", "default", "low", "high", "unit", "per",
                                   "standard_error", "description", "source"]
    for row in table.itertuples():
        group = row.group if isinstance(row.group, str) else None
        assert row.value == profile.get(row.name, group)
        assert row.low <= row.value <= row.high
        key = f"{row.name}[{group}]" if group else row.name
        assert row.fitted == (key in profile.values)
        assert (key in profile.uncertainty) == (not math.isnan(row.standard_error))
        assert row.source
    # one row per fitted group and per group with a sourced default, as well as the ungrouped row
    grouped = {key for key in profile.values if "[" in key}
    grouped |= {f"{name}[{group}]" for name, parameter in parameters.PARAMETERS.items()
                for group, _ in parameter.group_defaults}
    assert len(table) == len(parameters.PARAMETERS) + len(grouped)
    bucket = table[table["name"] == "zero3_gather_bucket_params"].set_index("group", drop=False)
    assert bucket.loc["deepspeed", "value"] == 5e7 and not bucket.loc["deepspeed", "fitted"]


def test_a_fresh_profile_knows_every_parameter_by_its_default():
    profile = CalibrationProfile()
    for name, parameter in parameters.PARAMETERS.items():
        assert profile.get(name) == parameter.default
    with pytest.raises(KeyError, match="unknown efficiency parameter 'bogus'"):
        profile.get("bogus")
