"""``perfmodel validate``: JSON shape, ape and MAPE arithmetic, reasons for unmodelled rows.

Predictors are replaced by simple known functions so the numbers checked here do not depend on
the efficiency model; kinds without a predictor must come back with a reason, never a number.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import perfmodel.cli as cli
import perfmodel.cli.validate as validate_cli
from perfmodel.calibration.validate import PREDICTORS, validate

CSV = """id,kind,gpu,num_gpus,metric,value,m,n,k,dtype,bytes,collective,message_bytes,model,precision,source
g1,gemm,H100-SXM5-80GB,1,tflops,500,1000,8,8,bf16,,,,,,alice/bench run 1
g2,gemm,H100-SXM5-80GB,1,tflops,40,100,8,8,bf16,,,,,,alice/bench run 2
g3,gemm,A100-SXM4-80GB,1,tflops,300,4000,8,8,bf16,,,,,,bob/paper Table 2
c1,memcpy,T4,1,GBps,250,,,,,2000000,,,,,bob/paper Table 3
n1,collective,A100-SXM4-80GB,8,busbw_GBps,230,,,,,,all_reduce,1048576,,,carol/nccl
t1,train,A100-SXM4-80GB,8,samples_per_s,2400,,,,,,,,resnet50,fp16,carol/dle
"""
# fake model: gemm predicts m / 2 TFLOP/s, memcpy predicts bytes / 1e4 GB/s
EXPECTED = {"g1": 500.0, "g2": 50.0, "g3": 2000.0, "c1": 200.0}
MEASURED = {"g1": 500.0, "g2": 40.0, "g3": 300.0, "c1": 250.0}
SEEN = {}


def _fake(column, scale):
    def predictor(rows, catalog, profile):
        SEEN["profile"] = profile
        return pd.DataFrame({"predicted": rows[column].astype(float) * scale, "reason": None},
                            index=rows.index)
    return predictor


@pytest.fixture
def run(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli, "COMMANDS", ("validate",))  # only this command's parser
    monkeypatch.setattr(validate_cli, "catalog_from", lambda args: object())
    monkeypatch.setitem(PREDICTORS, "gemm", _fake("m", 0.5))
    monkeypatch.setitem(PREDICTORS, "memcpy", _fake("bytes", 1e-4))
    monkeypatch.delitem(PREDICTORS, "collective", raising=False)
    monkeypatch.delitem(PREDICTORS, "train", raising=False)
    path = tmp_path / "runs.csv"
    path.write_text(CSV, encoding="utf-8")

    def invoke(*argv):
        code = cli.main(["validate", *[str(a) for a in argv]])
        out = capsys.readouterr()
        return code, out.out, out.err

    invoke.path = path
    return invoke


def test_json_shape_counts_and_ape(run):
    code, out, _ = run(run.path, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"summary", "by", "rows"}
    rows = {row["id"]: row for row in data["rows"]}
    assert list(rows) == ["g1", "g2", "g3", "c1", "n1", "t1"]
    for row in data["rows"]:
        assert {"id", "kind", "gpu", "metric", "measured", "predicted", "ape", "reason"} <= set(row)
    for ident, predicted in EXPECTED.items():
        row = rows[ident]
        assert row["predicted"] == pytest.approx(predicted)
        assert row["ape"] == pytest.approx(abs(predicted - MEASURED[ident]) / MEASURED[ident])
        assert row["reason"] is None
    summary = data["summary"]
    assert summary["all"]["n"] == 6 and summary["all"]["predicted"] == 4
    assert (summary["gemm"]["n"], summary["gemm"]["predicted"]) == (3, 3)
    assert (summary["train"]["n"], summary["train"]["predicted"]) == (1, 0)
    assert summary["train"]["mape"] is None
    apes = [rows[i]["ape"] for i in EXPECTED]
    assert summary["all"]["mape"] == pytest.approx(np.mean(apes))
    assert summary["all"]["median_ape"] == pytest.approx(np.median(apes))
    assert summary["gemm"]["mape"] == pytest.approx(np.mean(apes[:3]))


def test_rows_of_unmodelled_kinds_get_a_reason_not_a_number(run):
    _, out, _ = run(run.path, "--json")
    rows = {row["id"]: row for row in json.loads(out)["rows"]}
    for ident, kind in (("n1", "collective"), ("t1", "train")):
        assert rows[ident]["predicted"] is None and rows[ident]["ape"] is None
        assert kind in rows[ident]["reason"] and "not modelled" in rows[ident]["reason"]


def test_grouping_by_gpu_and_source(run):
    _, out, _ = run(run.path, "--json")
    groups = json.loads(out)["by"]
    assert groups["key"] == "gpu"
    h100 = groups["groups"]["H100-SXM5-80GB"]
    assert h100["n"] == 2 and h100["mape"] == pytest.approx((0 + 0.25) / 2)
    _, out, _ = run(run.path, "--json", "--by", "source")
    data = json.loads(out)
    assert set(data["by"]["groups"]) == {"all", "alice/bench", "bob/paper", "carol/nccl", "carol/dle"}
    assert data["by"]["groups"]["bob/paper"]["predicted"] == 2
    assert "source" not in data["rows"][0]


def test_table_lists_worst_rows_first_and_reasons(run):
    code, out, _ = run(run.path, "--top", "2")
    assert code == 0
    assert "MAPE" in out and "Error by gpu" in out
    worst = out[out.index("Worst 2 of 4"):]
    assert worst.index("g3") < worst.index("g2")  # ape 5.67 before 0.25
    assert "g1" not in worst.split("rows not predicted")[0]
    assert "kind 'train' is not modelled" in out


def test_calibration_profile_is_passed_to_the_predictors(run, tmp_path):
    profile = tmp_path / "profile.yaml"
    profile.write_text("provenance: {made_by: test}\n", encoding="utf-8")
    assert run(run.path, "--calibration", profile, "--json")[0] == 0
    assert SEEN["profile"].provenance == {"made_by": "test"}


def test_bad_file_exits_2_listing_every_bad_row(run, tmp_path):
    bad = tmp_path / "bad.csv"
    lines = CSV.splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace(",500,", ",-500,"), lines[2],
                              lines[3].replace("gemm", "gemmm")]) + "\n", encoding="utf-8")
    code, out, err = run(bad, run.path)
    assert code == 2 and out == ""
    assert f"{bad}:2 (id g1)" in err and "negative" in err
    assert f"{bad}:4 (id g3)" in err and "unknown kind" in err
    assert f"{run.path}:2 (id g1): duplicate id" in err


def test_validate_api_gives_reason_for_an_unknown_kind(monkeypatch):
    monkeypatch.setitem(PREDICTORS, "gemm", _fake("m", 0.5))
    frame = pd.DataFrame({"id": ["a", "b"], "kind": ["gemm", "quantum"], "gpu": ["T4", "T4"],
                          "metric": ["tflops", "qops"], "value": [10.0, 3.0], "m": [40.0, math.nan]})
    result = validate(frame, catalog=object())
    assert result.loc[0, "predicted"] == 20.0 and result.loc[0, "ape"] == pytest.approx(1.0)
    assert math.isnan(result.loc[1, "predicted"]) and math.isnan(result.loc[1, "ape"])
    assert result.loc[1, "reason"] == "kind 'quantum' is not modelled"


def test_validate_accepts_rows_concatenated_from_several_files():
    """pd.concat of two loaded files repeats index labels; validate scores them like one file."""
    import pandas as pd

    from perfmodel.calibration.measurements import load_measurements
    from perfmodel.calibration.validate import validate
    from perfmodel.hardware.catalog import shipped_data_path

    rows = load_measurements(shipped_data_path("measurements") / "collective.csv").iloc[:6]
    twice = pd.concat([rows, rows])
    assert not twice.index.is_unique
    result = validate(twice)
    assert list(result.index) == list(twice.index)
    once = validate(rows)
    assert result["predicted"].iloc[:6].tolist() == once["predicted"].tolist()
    assert result["predicted"].iloc[6:].tolist() == once["predicted"].tolist()
