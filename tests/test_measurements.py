"""The measurement-file loader: every bad row reported at once, shipped files clean."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from perfmodel.calibration.measurements import (COLUMNS, KINDS, METRICS, MeasurementError,
                                                check_measurements, load_measurements,
                                                shipped_measurements, source_group)

HEADER = "id,kind,gpu,num_gpus,metric,value,m,n,k,dtype,bytes,collective,message_bytes,model,precision"
GOOD = [
    "g1,gemm,H100-SXM5-80GB,1,tflops,700,8192,8192,8192,bf16,,,,,",
    "c1,memcpy,T4,1,GBps,240,,,,,1000000,,,,",
    "n1,collective,A100-SXM4-80GB,8,busbw_GBps,230,,,,,,all_reduce,1073741824,,",
    "t1,train,A100-SXM4-80GB,8,samples_per_s,2400,,,,,,,,resnet50,fp16",
]


def write(tmp_path, name, lines, header=HEADER):
    path = tmp_path / name
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return path


def problems_of(*paths) -> list[str]:
    with pytest.raises(MeasurementError) as caught:
        load_measurements(*paths)
    assert isinstance(caught.value, ValueError)
    return caught.value.problems


def test_good_file_loads_with_float_columns_and_every_known_column(tmp_path):
    frame = load_measurements(write(tmp_path, "a.csv", GOOD))
    assert list(frame["id"]) == ["g1", "c1", "n1", "t1"]
    assert list(frame.columns[:len(COLUMNS)]) == list(COLUMNS)
    assert frame["m"].dtype == "float64" and frame["value"].dtype == "float64"
    assert frame.loc[0, "m"] == 8192 and math.isnan(frame.loc[1, "m"])
    assert frame["layers"].isna().all()  # a known column absent from the file
    assert pd.isna(frame.loc[0, "model"])  # empty text cell -> NaN


def test_unknown_columns_are_kept(tmp_path):
    path = write(tmp_path, "a.csv", [GOOD[0] + ",lab-7"], header=HEADER + ",cluster")
    frame = load_measurements(path)
    assert frame.loc[0, "cluster"] == "lab-7"


@pytest.mark.parametrize("row, column, fragment", [
    ("x,gemm,H100-SXM5-80GB,1,tflops,-5,8,8,8,bf16,,,,,", "value", "negative"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,fast,8,8,8,bf16,,,,,", "value", "not a number"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,0,8,8,8,bf16,,,,,", "value", "must be > 0"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,,8,8,8,bf16,,,,,", "value", "missing value"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,5,8.5,8,8,bf16,,,,,", "m", "whole number"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,5,8,8,,bf16,,,,,", "k", "required for kind gemm"),
    ("x,gemm,H100-SXM5-80GB,1,tflops,5,8,8,8,int4,,,,,", "dtype", "not one of"),
    ("x,gemm,H100-SXM5-80GB,1,GBps,5,8,8,8,bf16,,,,,", "metric", "not a metric of kind gemm"),
    ("x,conv,H100-SXM5-80GB,1,tflops,5,8,8,8,bf16,,,,,", "kind", "unknown kind"),
    ("x,memcpy,T4,1,GBps,5,,,,,,,,,", "bytes", "required for kind memcpy"),
    ("x,collective,T4,8,time_us,5,,,,,,all_reduce,,,", "message_bytes", "required for kind collective"),
    ("x,collective,T4,8,time_us,5,,,,,,allreduce,64,,", "collective", "not one of"),
    ("x,train,T4,8,samples_per_s,5,,,,,,,,resnet50,", "precision", "required for kind train"),
    ("x,train,T4,8,samples_per_s,5,,,,,,,,transformer,fp16", "layers", "model = transformer"),
    (",gemm,H100-SXM5-80GB,1,tflops,5,8,8,8,bf16,,,,,", "id", "missing value"),
])
def test_each_bad_case_names_place_column_value_and_rule(tmp_path, row, column, fragment):
    path = write(tmp_path, "bad.csv", [GOOD[0], row])
    problems = problems_of(path)
    assert len(problems) >= 1
    first = problems[0]
    assert f"{path}:3" in first and f"column {column}" in first and fragment in first


def test_every_bad_row_is_reported_together(tmp_path):
    path = write(tmp_path, "bad.csv", [
        "a,gemm,H100-SXM5-80GB,1,tflops,-1,8,8,8,bf16,,,,,",
        GOOD[1],
        "b,gemm,H100-SXM5-80GB,1,tflops,x,8,8,8,bf16,,,,,",
        "c,warp,T4,1,GBps,1,,,,,,,,,",
        "d,gemm,H100-SXM5-80GB,1",
    ])
    problems = problems_of(path)
    text = "\n".join(problems)
    assert len(problems) == 4
    for place in (":2 (id a)", ":4 (id b)", ":5 (id c)", ":6: 4 fields"):
        assert place in text
    assert "c1" not in text  # the good row is not blamed


def test_missing_required_column(tmp_path):
    path = write(tmp_path, "a.csv", ["g1,gemm,H100-SXM5-80GB,tflops"], header="id,kind,gpu,metric")
    (problem,) = problems_of(path)
    assert "missing required column(s) value" in problem and str(path) in problem


def test_duplicate_ids_within_and_across_files(tmp_path):
    a = write(tmp_path, "a.csv", [GOOD[0], GOOD[0]])
    b = write(tmp_path, "b.csv", [GOOD[0].replace("g1", "other"), GOOD[1]])
    c = write(tmp_path, "c.csv", [GOOD[1]])
    (within,) = problems_of(a)
    assert "duplicate id" in within and f"{a}:2" in within and f"{a}:3" in within
    (across,) = problems_of(b, c)
    assert "duplicate id" in across and f"{c}:2 (id c1)" in across and f"{b}:3" in across
    assert len(load_measurements(b)) == 2  # each alone is fine


def test_unreadable_file_is_a_measurement_error(tmp_path):
    (problem,) = problems_of(tmp_path / "absent.csv")
    assert "cannot read" in problem


def test_check_measurements_on_a_dataframe():
    frame = pd.DataFrame({"id": ["a", "b"], "kind": ["gemm", "gemm"], "gpu": ["T4", "T4"],
                          "metric": ["tflops", "tflops"], "value": [10.0, -1.0],
                          "m": [64, 64], "n": [64, 64], "k": [64, float("nan")],
                          "dtype": ["fp16", "fp16"]})
    with pytest.raises(MeasurementError) as caught:
        check_measurements(frame)
    text = "\n".join(caught.value.problems)
    assert "row 2 (id b): column value = '-1.0': negative" in text
    assert "row 2 (id b): column k: missing value" in text
    assert "row 1" not in text
    good = check_measurements(frame.iloc[:1])
    assert good.loc[0, "k"] == 64.0 and good["k"].dtype == "float64"


def test_shipped_measurements_load_clean():
    frame = shipped_measurements()
    assert len(frame) >= 800
    assert set(frame["kind"]) == set(KINDS)
    assert frame["id"].is_unique
    assert (frame["value"] > 0).all()
    assert frame["source"].notna().all()
    for kind, metrics in METRICS.items():
        assert set(frame.loc[frame["kind"] == kind, "metric"]) <= set(metrics)


def test_source_group_is_the_first_word():
    assert source_group("stas00/ml-engineering network/README.md @ 744d01e") == "stas00/ml-engineering"
    assert source_group("Narayanan et al. 2021, 'Efficient ...'") == "Narayanan"
    assert source_group(float("nan")) == "(no source)"


def _scored_check_files(folder):
    """(file name, validate() of its rows) for each check file in ``folder`` of data/checks, after
    asserting that it loads clean, names its source and url, and that none of its ids is a shipped
    measurement that calibrate reads."""
    from perfmodel.calibration.validate import validate
    from perfmodel.hardware.catalog import load_catalog, shipped_data_path
    from perfmodel.profile import default_profile

    paths = sorted(shipped_data_path("checks").joinpath(folder).glob("*.csv"))
    if not paths and folder == "unpredicted":
        pytest.skip("every shipped check row is predicted: data/checks/unpredicted is empty")
    assert paths, f"no check file shipped in data/checks/{folder}"
    fitted = set(shipped_measurements()["id"])
    for path in paths:
        rows = load_measurements(path)
        assert rows["source"].str.len().min() > 20 and rows["url"].str.startswith("https://").all(), path.name
        assert not fitted & set(rows["id"]), path.name
        yield path.name, validate(rows, load_catalog(), default_profile())


def test_check_files_are_sourced_predictable_and_kept_out_of_the_fit():
    """data/checks holds published rows the shipped profile was not fitted on (an out-of-sample
    check): each loads clean, names its source and url, is predicted, and none of its ids is a
    shipped measurement that calibrate reads."""
    for name, scored in _scored_check_files("."):
        assert scored["predicted"].notna().all(), (name, scored.loc[scored["predicted"].isna(), ["id", "reason"]])


def test_unpredicted_check_rows_are_sourced_and_still_say_why_they_are_not_predicted():
    """data/checks/unpredicted holds published rows of a kind the model cannot predict yet, each
    file named for the gap: they load clean, name their source and url, stay out of the fit, and
    validate() gives each a reason instead of a number.  When the model learns to predict them,
    this fails: move the file up into data/checks, where it becomes an out-of-sample check."""
    for name, scored in _scored_check_files("unpredicted"):
        assert scored["predicted"].isna().all(), (name, scored.loc[scored["predicted"].notna(), "id"].tolist())
        assert scored["reason"].str.len().gt(0).all(), name
