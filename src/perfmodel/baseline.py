"""The baseline database: a team's measured runs kept over time, and regressions against them.

``BaselineStore(url_or_path)`` opens (creating if needed) a database of measurement rows in the
measurement format (``perfmodel.calibration.measurements``):

* a plain path, or nothing, opens a SQLite file (default ``$PERFMODEL_BASELINE_DB``, else
  ``$XDG_DATA_HOME/perfmodel/baseline.sqlite``, else ``~/.local/share/perfmodel/baseline.sqlite``);
* a SQLAlchemy URL such as ``postgresql+psycopg://user@host/db`` opens a shared server database
  (schemes in ``URL_SCHEMES``; a driver may follow ``+``).

A database that is not empty and has no perfmodel schema (another application's SQLite file) is
refused, never written to.  Driver and permission errors become one line (the database and the
driver's reason), without the SQL or its parameters.

Every row is stored under its *configuration key*: the columns that say what was measured
(``CONFIG_COLUMNS``: hardware, workload, plan, collective, GEMM shape, buffer size and metric).
Rows with the same key are repeated measurements of one configuration, so a new row is compared
with the stored values of its key.

Safety: SQLite runs in WAL mode with a busy timeout, and every transaction starts with
``BEGIN IMMEDIATE``, so concurrent writers queue instead of failing; each :meth:`BaselineStore.add`
is one transaction (all rows or none).  The schema carries a version (table ``schema_version``),
checked on open.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.calibration.measurements import SHAPE_COLUMNS
from perfmodel.profile import TIME_METRICS

__all__ = ["BaselineStore", "BaselineError", "CONFIG_COLUMNS", "URL_SCHEMES", "METRIC_DIRECTION", "SCHEMA_VERSION",
           "default_path", "metric_direction", "parse_threshold"]

SCHEMA_VERSION = 1

URL_SCHEMES = ("sqlite", "postgresql")
"""Database URL schemes the store is tested with (``scheme[+driver]://...``)."""

CONFIG_COLUMNS = [
    "kind", "gpu", "num_gpus", "gpus_per_node", "intra", "inter", "model", *SHAPE_COLUMNS,
    "precision", "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero",
    "collective", "algorithm", "message_bytes", "m", "n", "k", "dtype", "bytes", "metric",
]

# +1: higher is better (throughput-like); -1: lower is better (time-like), for every metric of
# the measurement format
METRIC_DIRECTION = {metric: -1 if metric in TIME_METRICS else +1
                    for metrics in MEASUREMENT_METRICS.values() for metric in metrics}

_IN_CHUNK = 500  # configuration hashes per SELECT ... IN (...), below every backend's limit


class BaselineError(ValueError):
    """A baseline database that cannot be used (wrong schema version, not a baseline database),
    or a bad argument to the store."""


def default_path() -> Path:
    """``$PERFMODEL_BASELINE_DB``, else ``$XDG_DATA_HOME/perfmodel/baseline.sqlite``, else
    ``~/.local/share/perfmodel/baseline.sqlite``."""
    if os.environ.get("PERFMODEL_BASELINE_DB"):
        return Path(os.environ["PERFMODEL_BASELINE_DB"]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "perfmodel" / "baseline.sqlite"


def metric_direction(metric: str) -> int:
    """+1 when a higher value of ``metric`` is better (throughput), -1 when lower is (time)."""
    try:
        return METRIC_DIRECTION[metric]
    except KeyError:
        raise BaselineError(f"metric {metric!r} has no known direction; allowed: "
                            f"{', '.join(METRIC_DIRECTION)}") from None


def parse_threshold(text: str | float) -> float:
    """``"5%"`` or ``"0.05"`` -> 0.05.  A bare number is a fraction in [0, 1)."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise BaselineError(f"threshold {text!r} is not a number; write e.g. 5% or 0.05") from None
    if not math.isfinite(value) or value < 0 or (not raw.endswith("%") and value >= 1):
        raise BaselineError(f"threshold {text!r} must be a fraction in [0, 1) or a percentage "
                            "such as 5%")
    return value


def _plain(value):
    """JSON-ready scalar for the configuration key: None for empty, int for whole floats."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _records(frame) -> list[dict]:
    """Rows of ``frame`` as plain JSON-ready dicts (NaN -> None, numpy scalars -> Python), with
    every float kept exactly (``DataFrame.to_json`` would round to 10 decimal places)."""
    def plain(value):
        value = value.item() if hasattr(value, "item") else value
        return None if isinstance(value, float) and math.isnan(value) else value

    return [{str(column): plain(value) for column, value in record.items()}
            for record in frame.to_dict(orient="records")]


def config_key(row: dict) -> tuple[str, str]:
    """(hash, canonical JSON) of the configuration columns of one row."""
    config = {column: _plain(row.get(column)) for column in CONFIG_COLUMNS}
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), text


class BaselineStore:
    """A database of measured rows: ``add`` them, ``list`` configurations, ``compare`` new runs."""

    def __init__(self, url_or_path: str | os.PathLike | None = None):
        from sqlalchemy import create_engine, event
        from sqlalchemy.engine import make_url

        target = default_path() if url_or_path is None else url_or_path
        if isinstance(target, str) and "://" in target:
            url = _parse_url(target)
        else:
            path = Path(target).expanduser().resolve()
            if path.is_dir():
                raise BaselineError(f"{target}: cannot open baseline database (it is a directory)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise BaselineError(f"{target}: cannot create the directory of the baseline database "
                                    f"({error.strerror}: {error.filename})") from None
            url = make_url(f"sqlite:///{path}")
        self.url = url
        self.name = url.render_as_string(hide_password=True)
        try:
            self.engine = create_engine(url, future=True)
        except Exception as error:  # unknown dialect, driver not installed
            raise BaselineError(f"cannot open baseline database {self.name}: {_reason(error)}") from None
        if url.get_backend_name() == "sqlite":
            event.listen(self.engine, "connect", _sqlite_connect)
            event.listen(self.engine, "begin", _sqlite_begin)
        self._metadata, self._version, self._table = _tables()
        self._open()

    # -- schema ------------------------------------------------------------------------------
    def _open(self) -> None:
        """Create the schema in a fresh database or check the version of an existing one."""
        from sqlalchemy import inspect, select, text

        version = self._version
        try:
            with self.engine.begin() as connection:
                if connection.dialect.name == "postgresql":  # serialise concurrent first opens
                    connection.execute(text("SELECT pg_advisory_xact_lock(7310)"))
                names = set(inspect(connection).get_table_names())
                if "schema_version" not in names:
                    if names:
                        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
                        raise BaselineError(f"{self.name} is not a perfmodel baseline database (it has "
                                            f"tables {shown} and no schema_version); perfmodel will not "
                                            "add its tables to it: give a new file or an empty database")
                    self._metadata.create_all(connection)
                    connection.execute(version.insert().values(version=SCHEMA_VERSION))
                    return
                found = connection.execute(select(version.c.version)).scalars().all()
        except BaselineError:
            raise
        except Exception as error:
            raise BaselineError(f"cannot open baseline database {self.name}: {_reason(error)}") from None
        if found != [SCHEMA_VERSION]:
            raise BaselineError(
                f"baseline database {self.name} has schema version "
                f"{found[0] if len(found) == 1 else found}; this perfmodel reads version "
                f"{SCHEMA_VERSION}. Use a perfmodel release that matches the database, or a new "
                "--db file.")

    # -- writing -----------------------------------------------------------------------------
    def add(self, measurements, label: str | None = None) -> int:
        """Store every row of ``measurements`` (a DataFrame in the measurement format) in one
        transaction and return the number of rows stored.  The rows are checked first
        (:func:`perfmodel.calibration.measurements.check_measurements`): a bad file raises
        ``MeasurementError`` listing every bad row, and nothing is written."""
        from perfmodel.calibration.measurements import check_measurements

        frame = check_measurements(measurements)
        now = datetime.now(timezone.utc)
        rows = []
        for record in _records(frame):
            key_hash, key_text = config_key(record)
            rows.append({
                "config_hash": key_hash, "config": key_text, "row_id": str(record.get("id")),
                "kind": record["kind"], "gpu": record["gpu"], "metric": record["metric"],
                "value": float(record["value"]), "source": record.get("source"),
                "label": label, "added_at": now, "row": json.dumps(record, sort_keys=True),
            })
        if rows:
            with self._errors("write to"), self.engine.begin() as connection:
                connection.execute(self._table.insert(), rows)
        return len(rows)

    @contextlib.contextmanager
    def _errors(self, doing: str):
        """Driver errors (read-only file, lost server, full disk) as one BaselineError line."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except SQLAlchemyError as error:
            raise BaselineError(f"cannot {doing} baseline database {self.name}: {_reason(error)}") from None

    # -- reading -----------------------------------------------------------------------------
    def _rows(self, hashes: list[str] | None = None):
        """Stored rows (optionally only those of the given configuration hashes), oldest first."""
        import pandas as pd
        from sqlalchemy import select

        table = self._table
        columns = [table.c.pk, table.c.config_hash, table.c.config, table.c.value,
                   table.c.added_at, table.c.label]
        queries = ([select(*columns)] if hashes is None else
                   [select(*columns).where(table.c.config_hash.in_(hashes[i:i + _IN_CHUNK]))
                    for i in range(0, len(hashes), _IN_CHUNK)])
        with self._errors("read"), self.engine.begin() as connection:
            found = [row._mapping for query in queries for row in connection.execute(query)]
        frame = pd.DataFrame(found, columns=["pk", "config_hash", "config", "value",
                                             "added_at", "label"])
        return frame.sort_values("pk", kind="stable").reset_index(drop=True)

    def count(self) -> int:
        """Number of stored rows."""
        from sqlalchemy import func, select

        with self._errors("read"), self.engine.begin() as connection:
            return int(connection.execute(select(func.count()).select_from(self._table)).scalar())

    def list(self):
        """One line per stored configuration: its non-empty configuration columns, ``latest``
        value, ``count``, ``first`` and ``last`` time added (UTC), ``label`` of the latest row."""
        import pandas as pd

        rows = self._rows()
        out_columns = CONFIG_COLUMNS + ["latest", "count", "first", "last", "label"]
        if rows.empty:
            return pd.DataFrame(columns=out_columns)
        grouped = rows.groupby("config_hash", sort=False)
        summary = grouped.agg(config=("config", "last"), latest=("value", "last"),
                              count=("value", "size"), first=("added_at", "min"),
                              last=("added_at", "max"), label=("label", "last"))
        configs = pd.DataFrame([json.loads(text) for text in summary["config"]])
        result = pd.concat([configs, summary.drop(columns="config").reset_index(drop=True)], axis=1)
        result = result.sort_values(["kind", "gpu", "metric"], kind="stable", na_position="last")
        result = result.dropna(axis=1, how="all").reset_index(drop=True)
        return result[[c for c in out_columns if c in result]]

    def compare(self, measurements, threshold: float = 0.05, window: int = 5):
        """Compare each row of ``measurements`` with the stored baseline of its configuration.

        The baseline is the **median of the latest ``window`` stored values** of the same
        configuration (``window=1``: the latest value alone); the median keeps one noisy run from
        setting the bar, the window lets the bar follow real improvements.  ``change`` =
        (value - baseline) / baseline.  ``status`` is ``new`` (no stored value), ``regression``
        (worse by more than ``threshold``: higher for time-like metrics, lower for
        throughput-like ones, see ``METRIC_DIRECTION``), ``improvement`` (better by more than
        ``threshold``) or ``ok``; ``regression`` is the boolean flag.
        """
        import numpy as np
        import pandas as pd

        from perfmodel.calibration.measurements import check_measurements

        if not (isinstance(threshold, (int, float)) and 0 <= threshold < 1):
            raise BaselineError(f"threshold {threshold!r} must be a fraction in [0, 1)")
        if not (isinstance(window, int) and window >= 1):
            raise BaselineError(f"window {window!r} must be a whole number >= 1")
        frame = check_measurements(measurements)
        records = _records(frame)
        directions = [metric_direction(record["metric"]) for record in records]
        hashes = [config_key(record)[0] for record in records]
        stored = self._rows(sorted(set(hashes)))
        history = stored.groupby("config_hash")["value"]
        baseline = history.apply(lambda values: float(np.median(values.to_numpy()[-window:])))
        counts = history.size()
        result = pd.DataFrame({
            "id": [str(record.get("id")) for record in records],
            "kind": [record["kind"] for record in records],
            "gpu": [record["gpu"] for record in records],
            "metric": [record["metric"] for record in records],
            "value": [float(record["value"]) for record in records],
            "baseline": [baseline.get(h, np.nan) for h in hashes],
            "baseline_n": [int(counts.get(h, 0)) for h in hashes],
        })
        result["change"] = (result["value"] - result["baseline"]) / result["baseline"]
        worse = -np.asarray(directions) * result["change"]
        result["status"] = np.select(
            [result["baseline"].isna(), worse > threshold, worse < -threshold],
            ["new", "regression", "improvement"], default="ok")
        result["regression"] = result["status"] == "regression"
        return result


def _parse_url(text: str):
    """A SQLAlchemy URL of a supported scheme, else a BaselineError listing the schemes."""
    from sqlalchemy.engine import make_url

    allowed = ("a file path (SQLite), " + ", ".join(f"{s}[+driver]://..." for s in URL_SCHEMES)
               + " (e.g. sqlite:///runs.sqlite, postgresql+psycopg://user@host/db)")
    try:
        url = make_url(text)
    except Exception:  # sqlalchemy.exc.ArgumentError: not a URL at all
        raise BaselineError(f"--db {text[:80]!r} is not a database URL; supported: {allowed}") from None
    if url.get_backend_name() not in URL_SCHEMES:
        raise BaselineError(f"--db {text[:80]!r}: unsupported scheme {url.drivername!r}; supported: {allowed}")
    return url


def _reason(error: Exception) -> str:
    """The driver's own one-line reason, without SQLAlchemy's statement, parameters and link."""
    original = getattr(error, "orig", None) or error
    text = str(original).strip().splitlines()
    return f"{type(original).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


def _tables():
    from sqlalchemy import Column, DateTime, Float, Integer, MetaData, String, Table, Text

    metadata = MetaData()
    version = Table("schema_version", metadata, Column("version", Integer, nullable=False))
    measurements = Table(
        "measurements", metadata,
        Column("pk", Integer, primary_key=True, autoincrement=True),
        Column("config_hash", String(64), nullable=False, index=True),
        Column("config", Text, nullable=False),
        Column("row_id", Text),
        Column("kind", String(32), nullable=False),
        Column("gpu", Text, nullable=False),
        Column("metric", String(64), nullable=False),
        Column("value", Float, nullable=False),
        Column("source", Text),
        Column("label", Text),
        Column("added_at", DateTime(timezone=True), nullable=False),
        Column("row", Text, nullable=False),
    )
    return metadata, version, measurements


SQLITE_BUSY_TIMEOUT_S = 60.0
"""How long a connection waits for another one's lock before it reports the database locked."""


def _sqlite_connect(dbapi_connection, _record) -> None:
    """WAL journal (readers never block the writer), a 60 s busy wait for the write lock, full
    fsync at commit; transactions are begun explicitly by :func:`_sqlite_begin`."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous = FULL")
    cursor.close()


def _switch_to_wal(cursor) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the lock it needs.

    Switching a new database file to WAL takes its exclusive lock.  When two processes open the
    same new file at once, each holds a shared lock and wants the exclusive one, and SQLite then
    returns SQLITE_BUSY at once instead of calling the busy handler, since waiting could deadlock
    (SQLite C API, ``sqlite3_busy_handler``).  One of them succeeds; the other retries here within
    the same timeout the busy handler would have given it."""
    import sqlite3
    import time

    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    delay_s = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() + delay_s > deadline:
                raise
            time.sleep(delay_s)
            delay_s = min(2 * delay_s, 0.5)


def _sqlite_begin(connection) -> None:
    """BEGIN IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so two
    writers never deadlock upgrading a read lock."""
    connection.exec_driver_sql("BEGIN IMMEDIATE")
