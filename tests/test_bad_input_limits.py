"""The input limits of ``perfmodel.inputs`` at their boundaries: nesting depth, YAML expansion,
count ranges, excerpts, output paths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.inputs import (EXCERPT_CHARS, INTEGER_LIMITS, MAX_DEPTH, MAX_NODES, InputError, check_count,
                              check_output_path, excerpt, parse_structured)


def nested_yaml(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_block_yaml(depth: int) -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(depth - 1)) + "  " * (depth - 1) + "v: 1\n"


@pytest.mark.parametrize("text", [nested_yaml, nested_block_yaml])
def test_nesting_up_to_the_limit_is_read_and_one_more_is_refused(text):
    parse_structured(text(MAX_DEPTH), "f.yaml")
    with pytest.raises(InputError, match=f"f.yaml: line .*nested deeper than {MAX_DEPTH}"):
        parse_structured(text(MAX_DEPTH + 1), "f.yaml")


def test_json_nesting_limit():
    parse_structured(nested_yaml(MAX_DEPTH), "f.json", json_syntax=True)
    with pytest.raises(InputError, match=f"f.json: nested deeper than {MAX_DEPTH}"):
        parse_structured(nested_yaml(MAX_DEPTH + 1), "f.json", json_syntax=True)


def test_an_alias_counts_as_a_copy_of_its_anchor():
    # a list of n scalars (n + 1 values) repeated by k aliases: 1 + (n + 1) * (k + 1) + ... values
    n = 1000
    anchor = "a: &a [" + ", ".join(["x"] * n) + "]\n"
    fits = (MAX_NODES - 2 * n) // (n + 1)  # aliases that still fit below the limit
    data = parse_structured(anchor + "b: [" + ", ".join(["*a"] * (fits - 2)) + "]\n", "f.yaml")
    assert len(data["b"]) == fits - 2 and data["b"][0] == ["x"] * n
    with pytest.raises(InputError, match=f"expands to more than {MAX_NODES:,} values"):
        parse_structured(anchor + "b: [" + ", ".join(["*a"] * (fits + 5)) + "]\n", "f.yaml")


def test_an_alias_counts_the_depth_of_its_anchor():
    anchor = "a: &a " + nested_yaml(MAX_DEPTH - 2) + "\n"
    parse_structured(anchor + "b: *a\n", "f.yaml")  # mapping (1) + anchor's depth: within the limit
    with pytest.raises(InputError, match="nested deeper"):
        parse_structured(anchor + "b: [[*a]]\n", "f.yaml")


@given(st.sampled_from(sorted(INTEGER_LIMITS)), st.integers(min_value=-(10**40), max_value=10**40))
def test_a_count_is_accepted_exactly_in_its_range(field, value):
    limit = INTEGER_LIMITS[field]
    if 1 <= value <= limit:
        assert check_count(field, value) == value
    else:
        with pytest.raises(InputError, match=f"{field} = .*from 1 to {limit:,}"):
            check_count(field, value)


@pytest.mark.parametrize("value", [True, False, 1.5, "8", None])
def test_booleans_fractions_and_text_are_not_counts(value):
    with pytest.raises(InputError, match="tp"):
        check_count("tp", value)


@given(st.one_of(st.text(max_size=5000), st.integers(min_value=-(10**3000), max_value=10**3000),
                 st.lists(st.integers(), max_size=500), st.floats()))
def test_an_excerpt_is_short(value):
    assert len(excerpt(value)) <= EXCERPT_CHARS + len("... (100000 characters)")


def test_output_path_checks(tmp_path):
    assert check_output_path(tmp_path / "p.yaml", "the profile") == tmp_path / "p.yaml"
    with pytest.raises(InputError, match="it is a directory"):
        check_output_path(tmp_path, "the profile")
    with pytest.raises(InputError, match="does not exist"):
        check_output_path(tmp_path / "no" / "p.yaml", "the profile")
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="is not a directory"):
        check_output_path(tmp_path / "f" / "sub" / "p.yaml", "the profile")
