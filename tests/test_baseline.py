"""The baseline database: round trip, regressions by metric direction, concurrent writers, crash
safety, schema versioning and bad input -- on SQLite, and on PostgreSQL when
PERFMODEL_TEST_POSTGRES_URL points at a server (``.ci/postgres.sh`` starts one)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import tempfile
import uuid

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from perfmodel.baseline import (METRIC_DIRECTION, SCHEMA_VERSION, BaselineError, BaselineStore,
                                default_path, metric_direction, parse_threshold)
from perfmodel.calibration.measurements import METRICS, MeasurementError

POSTGRES_URL = os.environ.get("PERFMODEL_TEST_POSTGRES_URL")
SOURCE = "perfmodel test suite (synthetic rows)"


def train_row(value, row_id="t1", **changes):
    row = {"id": row_id, "kind": "train", "gpu": "A100-SXM4-80GB", "num_gpus": 8,
           "gpus_per_node": 8, "intra": "nvlink3", "model": "llama2-7b", "precision": "bf16",
           "tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 64,
           "metric": "step_time_s", "value": value, "source": SOURCE}
    row.update(changes)
    return row


def gemm_row(value, row_id="g1", **changes):
    row = {"id": row_id, "kind": "gemm", "gpu": "H100-SXM5-80GB", "num_gpus": 1, "m": 4096,
           "n": 4096, "k": 4096, "dtype": "bf16", "metric": "tflops", "value": value,
           "source": SOURCE}
    row.update(changes)
    return row


def collective_row(value, row_id="c1", **changes):
    row = {"id": row_id, "kind": "collective", "gpu": "A100-SXM4-80GB", "num_gpus": 8,
           "gpus_per_node": 8, "collective": "all_reduce", "algorithm": "ring",
           "message_bytes": 2**30, "metric": "busbw_GBps", "value": value, "source": SOURCE}
    row.update(changes)
    return row


def frame(*rows):
    return pd.DataFrame(list(rows))


# -- stores: a SQLite file per test; a fresh PostgreSQL schema per test ------------------------

def _postgres_schema_url(schema: str) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request, tmp_path):
    """A database location (path or URL) with nothing in it yet."""
    if request.param == "sqlite":
        yield str(tmp_path / "baseline.sqlite")
        return
    if not POSTGRES_URL:
        pytest.skip("PERFMODEL_TEST_POSTGRES_URL is not set (.ci/postgres.sh starts a server)")
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    yield _postgres_schema_url(schema)
    with admin.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


# -- round trip --------------------------------------------------------------------------------

def test_add_list_round_trip(db):
    store = BaselineStore(db)
    assert store.add(frame(train_row(10.0), gemm_row(700.0), collective_row(230.0)),
                     label="v1") == 3
    assert store.add(frame(train_row(11.0, row_id="t2")), label="v2") == 1
    table = store.list()
    assert len(table) == 3
    train = table[table["kind"] == "train"].iloc[0]
    assert (train["count"], train["latest"], train["label"]) == (2, 11.0, "v2")
    assert train["first"] <= train["last"]
    assert train["tp"] == 1 and train["model"] == "llama2-7b"
    gemm = table[table["kind"] == "gemm"].iloc[0]
    assert (gemm["count"], gemm["latest"], gemm["m"]) == (1, 700.0, 4096)
    assert store.count() == 4
    assert BaselineStore(db).count() == 4  # persisted, reopened


def test_configuration_key(db):
    """Same configuration = same identifying columns, whatever the id, source, notes or
    framework; any identifying column that differs makes another configuration."""
    store = BaselineStore(db)
    store.add(frame(train_row(10.0, row_id="a", notes="run 1", framework="megatron"),
                    train_row(10.5, row_id="b", notes="run 2", source="elsewhere"),
                    train_row(9.0, row_id="c", tp=2, dp=4),
                    train_row(9.5, row_id="d", metric="samples_per_s")))
    counts = sorted(store.list()["count"])
    assert counts == [1, 1, 2]


def test_empty_store_lists_nothing(db):
    store = BaselineStore(db)
    assert store.list().empty
    assert list(store.compare(frame(train_row(1.0)))["status"]) == ["new"]


# -- compare -----------------------------------------------------------------------------------

def test_compare_flags_ten_percent_slower_not_three(db):
    store = BaselineStore(db)
    store.add(frame(train_row(10.0)))
    result = store.compare(frame(train_row(11.0, row_id="slow"), train_row(10.3, row_id="bit"),
                                 train_row(10.0, row_id="new", gpu="H100-SXM5-80GB")),
                           threshold=0.05).set_index("id")
    assert result.loc["slow", "status"] == "regression" and result.loc["slow", "regression"]
    assert result.loc["slow", "change"] == pytest.approx(0.10)
    assert result.loc["bit", "status"] == "ok" and not result.loc["bit", "regression"]
    assert result.loc["new", "status"] == "new" and pd.isna(result.loc["new", "baseline"])
    assert result.loc["new", "baseline_n"] == 0
    assert store.count() == 1  # compare writes nothing


@pytest.mark.parametrize("metric, make", [("step_time_s", train_row), ("tflops", gemm_row),
                                          ("busbw_GBps", collective_row)])
def test_direction_of_metrics(db, metric, make):
    """Time-like metrics regress when they grow, throughput-like ones when they shrink."""
    store = BaselineStore(db)
    store.add(frame(make(100.0, metric=metric)))
    result = store.compare(frame(make(110.0, row_id="up", metric=metric),
                                 make(90.0, row_id="down", metric=metric))).set_index("id")
    if metric_direction(metric) < 0:
        assert list(result["status"]) == ["regression", "improvement"]
    else:
        assert list(result["status"]) == ["improvement", "regression"]


def test_every_metric_of_the_format_has_a_direction():
    metrics = {metric for names in METRICS.values() for metric in names}
    assert metrics <= set(METRIC_DIRECTION)
    for metric in ("step_time_s", "time_us", "time_to_train_s", "gpu_hours"):
        assert metric_direction(metric) == -1
    for metric in ("samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops", "GBps",
                   "algbw_GBps", "busbw_GBps"):
        assert metric_direction(metric) == +1
    with pytest.raises(BaselineError, match="'furlongs'"):
        metric_direction("furlongs")


def test_baseline_is_median_of_recent_window(db):
    """One noisy stored run does not set the bar; old values leave the window."""
    store = BaselineStore(db)
    for index, value in enumerate([50.0, 10.0, 10.0, 20.0, 10.0, 10.0]):
        store.add(frame(train_row(value, row_id=f"r{index}")))
    result = store.compare(frame(train_row(10.4)))
    assert result.loc[0, "baseline"] == 10.0  # median of the latest 5: 10, 10, 20, 10, 10
    assert result.loc[0, "baseline_n"] == 6
    assert result.loc[0, "status"] == "ok"
    latest_only = store.compare(frame(train_row(10.4)), window=1)
    assert latest_only.loc[0, "baseline"] == 10.0


@settings(max_examples=40, deadline=None)
@given(stored=st.floats(1e-3, 1e6), ratio=st.floats(0.25, 4.0), threshold=st.floats(0.0, 0.5),
       metric=st.sampled_from(["step_time_s", "samples_per_s"]))
def test_regression_iff_worse_beyond_threshold(stored, ratio, threshold, metric):
    """For any stored value, new value and threshold: a regression exactly when the change in
    the metric's bad direction exceeds the threshold; an improvement exactly when the change in
    the good direction does."""
    assume(abs(abs(ratio - 1) - threshold) > 1e-9)  # not on the boundary, where rounding decides
    with tempfile.TemporaryDirectory() as folder:
        store = BaselineStore(os.path.join(folder, "b.sqlite"))
        store.add(frame(train_row(stored, metric=metric)))
        row = store.compare(frame(train_row(stored * ratio, metric=metric)), threshold).iloc[0]
        store.engine.dispose()
    worse = (ratio - 1) * (1 if metric == "step_time_s" else -1)
    assert row["change"] == pytest.approx(ratio - 1)
    assert row["regression"] == (worse > threshold)
    assert (row["status"] == "improvement") == (worse < -threshold)


def test_compare_rejects_bad_threshold(db):
    store = BaselineStore(db)
    with pytest.raises(BaselineError, match="threshold"):
        store.compare(frame(train_row(1.0)), threshold=5)


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.05", 0.05), (" 12.5% ", 0.125),
                                         ("0", 0.0)])
def test_parse_threshold(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["5", "abc", "-1%", "nan", "-0.1"])
def test_parse_threshold_rejects(text):
    with pytest.raises(BaselineError, match=repr(text)):
        parse_threshold(text)


# -- safety ------------------------------------------------------------------------------------

def _writer(location: str, worker: int, rows: int) -> None:
    store = BaselineStore(location)
    for index in range(rows):
        store.add(frame(train_row(1.0 + index, row_id=f"w{worker}-{index}", micro_batch=worker + 1)))


def test_two_processes_writing_at_once_lose_no_row(db):
    """Both processes open the (not yet created) database and add 200 rows each, one
    transaction per row: all 400 are there."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(db, worker, 200)) for worker in range(2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=300)
    assert [process.exitcode for process in workers] == [0, 0]
    store = BaselineStore(db)
    assert store.count() == 400
    assert sorted(store.list()["count"]) == [200, 200]


def _crash_during_add(location: str) -> None:
    from sqlalchemy import event

    store = BaselineStore(location)

    def die(connection, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO MEASUREMENTS"):
            os._exit(3)  # the process dies after the INSERT, before the COMMIT

    event.listen(store.engine, "after_cursor_execute", die)
    store.add(frame(*[train_row(1.0, row_id=f"x{index}", global_batch=64 * (index + 1))
                      for index in range(50)]))


def test_crash_mid_add_writes_nothing(db):
    store = BaselineStore(db)
    store.add(frame(train_row(10.0)))
    process = multiprocessing.get_context("spawn").Process(target=_crash_during_add, args=(db,))
    process.start()
    process.join(timeout=120)
    assert process.exitcode == 3
    reopened = BaselineStore(db)
    assert reopened.count() == 1
    assert reopened.add(frame(train_row(10.0, row_id="after"))) == 1  # still writable


def test_schema_version_mismatch_is_a_clear_error(db):
    from sqlalchemy import create_engine, text

    BaselineStore(db).add(frame(train_row(10.0)))
    engine = create_engine(db if "://" in db else f"sqlite:///{db}")
    with engine.begin() as connection:
        connection.execute(text("UPDATE schema_version SET version = 99"))
    engine.dispose()
    with pytest.raises(BaselineError, match=f"schema version 99; this perfmodel reads version "
                                            f"{SCHEMA_VERSION}"):
        BaselineStore(db)


def test_foreign_database_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE measurements (x INTEGER)")
    with pytest.raises(BaselineError, match="not a perfmodel baseline database"):
        BaselineStore(str(path))


def test_unknown_url_scheme_is_a_clear_error():
    with pytest.raises(BaselineError, match="unsupported scheme 'nosuchdialect'; supported: .*postgresql"):
        BaselineStore("nosuchdialect://user@localhost/db")


# -- bad input ---------------------------------------------------------------------------------

def test_missing_column_writes_nothing(db):
    store = BaselineStore(db)
    with pytest.raises(MeasurementError, match="missing required column"):
        store.add(frame(train_row(10.0)).drop(columns=["metric"]))
    assert store.count() == 0


def test_every_bad_row_is_listed_and_nothing_written(db):
    store = BaselineStore(db)
    store.add(frame(train_row(10.0)))
    bad = frame(train_row(10.0, row_id="ok"), train_row(-1.0, row_id="negative"),
                gemm_row("fast", row_id="text"), train_row(1.0, row_id="ok"),
                train_row(1.0, row_id="kindless", kind="inference"))
    with pytest.raises(MeasurementError) as error:
        store.add(bad)
    message = str(error.value)
    for expected in ("id negative", "id text", "duplicate id", "id kindless"):
        assert expected in message
    assert store.count() == 1
    with pytest.raises(MeasurementError):
        store.compare(bad)


# -- locations ---------------------------------------------------------------------------------

def test_default_path(monkeypatch, tmp_path):
    monkeypatch.delenv("PERFMODEL_BASELINE_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "perfmodel" / "baseline.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / ".local" / "share" / "perfmodel" / "baseline.sqlite"
    monkeypatch.setenv("PERFMODEL_BASELINE_DB", str(tmp_path / "team.sqlite"))
    assert default_path() == tmp_path / "team.sqlite"
    BaselineStore().add(frame(train_row(1.0)))
    assert (tmp_path / "team.sqlite").is_file()


# -- command line ------------------------------------------------------------------------------

def _cli(argv: list[str]) -> int:
    from perfmodel.cli import baseline

    parser = argparse.ArgumentParser(prog="perfmodel")
    baseline.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_add_list_compare(tmp_path, capsys):
    db = str(tmp_path / "cli.sqlite")
    stored, slower, same = (tmp_path / name for name in ("stored.csv", "slower.csv", "same.csv"))
    frame(train_row(10.0), gemm_row(700.0)).to_csv(stored, index=False)
    frame(train_row(11.0), gemm_row(700.0)).to_csv(slower, index=False)
    frame(train_row(10.2), gemm_row(690.0)).to_csv(same, index=False)

    assert _cli(["baseline", "add", str(stored), "--label", "main@abc", "--db", db]) == 0
    assert "added 2 rows" in capsys.readouterr().out
    assert _cli(["baseline", "list", "--db", db, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {row["label"] for row in listed} == {"main@abc"} and len(listed) == 2

    assert _cli(["baseline", "compare", str(slower), "--db", db, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["regressions"] == 1 and report["threshold"] == 0.05
    assert _cli(["baseline", "compare", str(same), "--db", db, "--threshold", "5%"]) == 0
    assert "0 regression(s)" in capsys.readouterr().out
    assert _cli(["baseline", "compare", str(slower), "--db", db, "--threshold", "0.2"]) == 0


class _FlakyCursor:
    """A cursor whose first ``busy`` executions fail as SQLite does when a lock it needs is held."""

    def __init__(self, busy: int, message: str = "database is locked"):
        self.busy, self.message, self.calls = busy, message, 0

    def execute(self, statement):
        self.calls += 1
        if self.calls <= self.busy:
            raise sqlite3.OperationalError(self.message)


def test_switching_a_new_file_to_wal_waits_for_the_other_opener_instead_of_failing():
    """Two first opens of one new file: SQLite answers one of them 'database is locked' without
    waiting (its busy handler would risk a deadlock), so the switch to WAL retries it."""
    from perfmodel.baseline import _switch_to_wal

    cursor = _FlakyCursor(busy=3)
    _switch_to_wal(cursor)
    assert cursor.calls == 4
    other = _FlakyCursor(busy=1, message="disk I/O error")  # anything but a lock is not retried
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _switch_to_wal(other)
    assert other.calls == 1
