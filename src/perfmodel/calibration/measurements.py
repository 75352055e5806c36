"""Measurement files: read, check and combine the CSV rows that ``validate`` and ``calibrate`` use.

One row is one measured number with everything needed to predict it (the format is described in
``data/measurements/README.md``).  :func:`load_measurements` reads any number of files and returns
one DataFrame; a bad file raises :class:`MeasurementError` listing *every* bad row (file, line, id,
column, value and what is allowed), never just the first.  Checks here are about the format
(columns, kinds, metrics, numbers, required fields, unique ids); whether a configuration is
feasible (a plan that does not divide the GPUs, an unknown GPU or model) is for the predictors,
which answer such rows with a ``reason``.

pandas is imported inside the functions: ``import perfmodel`` stays light.
"""

from __future__ import annotations

import csv
import gzip
import math
from pathlib import Path

from perfmodel.inputs import INTEGER_LIMITS, excerpt
from perfmodel.vocabulary import FRAMEWORKS, framework_from_text

__all__ = ["COLUMNS", "KINDS", "METRICS", "MeasurementError", "check_measurements",
           "load_measurements", "shipped_measurements", "source_group"]

COLUMNS = (
    "id", "kind", "gpu", "num_gpus", "gpus_per_node", "intra", "inter",
    "model", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act", "seq_len", "mean_seq_len", "vocab",
    "precision", "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero",
    "framework", "software", "train_samples", "train_tokens",
    "collective", "algorithm", "message_bytes",
    "m", "n", "k", "batch", "dtype", "bytes",
    "metric", "value", "source", "url", "notes",
)
"""Every known column, in output order (unknown columns of a file follow them)."""

REQUIRED_COLUMNS = ("id", "kind", "gpu", "metric", "value")

KINDS = ("train", "collective", "gemm", "memcpy")

METRICS = {
    "train": ("step_time_s", "samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu",
              "time_to_train_s", "gpu_hours"),
    "collective": ("time_us", "algbw_GBps", "busbw_GBps"),
    "gemm": ("tflops", "time_us"),
    "memcpy": ("GBps",),
}

KIND_FIELDS = {
    "train": ("model", "precision", "num_gpus"),
    "collective": ("collective", "message_bytes", "num_gpus"),
    "gemm": ("m", "n", "k", "dtype"),
    "memcpy": ("bytes",),
}
"""Fields a row of each kind must fill in (besides REQUIRED_COLUMNS)."""

SHAPE_COLUMNS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "ffn_act", "seq_len", "mean_seq_len", "vocab")
"""The transformer-shape columns of the format (``model = transformer`` rows)."""

TRANSFORMER_FIELDS = ("layers", "hidden", "heads", "seq_len", "vocab")
"""Fields a ``train`` row with ``model = transformer`` must fill in."""

WHOLE_COLUMNS = ("num_gpus", "gpus_per_node", "layers", "hidden", "heads", "kv_heads", "ffn_hidden",
                 "seq_len", "mean_seq_len", "vocab", "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch",
                 "message_bytes", "m", "n", "k", "batch", "bytes")
"""Counts and sizes: whole numbers > 0."""

NUMERIC_COLUMNS = WHOLE_COLUMNS + ("zero", "train_samples", "train_tokens", "value")

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
CHOICES = {
    "precision": PRECISIONS,
    "dtype": PRECISIONS,
    "intra": ("nvlink2", "nvlink3", "nvlink4", "nvlink5", "pcie3", "pcie4", "pcie5"),
    "ffn_act": ("gelu", "swiglu"),
    "recompute": ("none", "selective", "full"),
    "collective": ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"),
    # NCCL's algorithms: the spec's ring/tree/nvls/auto plus nvlstree and collnet (IB SHARP),
    # which published nccl-tests runs force too.
    "algorithm": ("auto", "ring", "tree", "nvls", "nvlstree", "collnet"),
}
ZERO_STAGES = (0, 1, 2, 3)


SHOWN_PROBLEMS = 100
"""Most problems printed in one error message (``MeasurementError.problems`` keeps them all)."""


class MeasurementError(ValueError):
    """Bad measurement rows; ``problems`` holds one line per problem, all of them."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        count = len(self.problems)
        shown = self.problems[:SHOWN_PROBLEMS]
        more = [f"... and {count - len(shown)} more"] if count > len(shown) else []
        super().__init__(f"{count} problem{'s' if count != 1 else ''} in the measurements:\n"
                         + "\n".join(f"  {line}" for line in shown + more))


def load_measurements(*paths: str | Path):
    """All rows of the CSV files ``paths``, checked, as one DataFrame.

    Columns: every name in ``COLUMNS`` (absent ones all NaN), then any unknown columns the files
    carry (kept as text).  Numeric columns are float64, empty cells NaN.  Ids must be unique over
    all the files given together.  Raises :class:`MeasurementError` listing every bad row.
    """
    if not paths:
        raise MeasurementError(["no measurement file given"])
    rows: list[dict[str, str]] = []
    places: list[str] = []
    problems: list[str] = []
    for path in paths:
        file_rows, file_places = _read_csv(Path(path), problems)
        rows += file_rows
        places += file_places
    frame = _checked_frame(rows, places, problems)
    frame.attrs["files"] = [Path(path).name for path in paths]
    return frame


def check_measurements(frame):
    """Check an in-memory DataFrame in the measurement format and return the normalized copy
    :func:`load_measurements` would give (rows named ``row N`` in errors, N from 1)."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise MeasurementError([f"expected a pandas DataFrame, got {type(frame).__name__}"])
    problems = _missing_columns("the DataFrame", list(frame.columns))
    if problems:
        raise MeasurementError(problems)
    rows = [{str(column): _text(value) for column, value in record.items()}
            for record in frame.to_dict(orient="records")]
    return _checked_frame(rows, [f"row {number}" for number in range(1, len(rows) + 1)], [])


def shipped_measurements():
    """The published measurements shipped in ``perfmodel/data/measurements/`` (all files)."""
    from perfmodel.hardware.catalog import shipped_data_path

    folder = shipped_data_path("measurements")
    paths = sorted([*folder.glob("*.csv"), *folder.glob("*.csv.gz")])
    return load_measurements(*paths)


def source_group(source) -> str:
    """A short name for a row's ``source``: its first word (``owner/repo`` or first author),
    used to group validation results by where the numbers come from."""
    if not isinstance(source, str) or not source.strip():
        return "(no source)"
    return source.strip().split()[0].rstrip(",;:")


# -- internals ---------------------------------------------------------------------------------

def _text(value) -> str:
    """A cell as stripped text; None, NaN and pandas' missing markers become ''."""
    import pandas as pd

    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return ""
    return str(value).strip()


def _missing_columns(where: str, header: list[str]) -> list[str]:
    problems = []
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        problems.append(f"{where}: missing required column(s) {', '.join(missing)}; every file "
                        f"needs {', '.join(REQUIRED_COLUMNS)}")
    duplicated = sorted({column for column in header if header.count(column) > 1})
    if duplicated:
        problems.append(f"{where}: column(s) {', '.join(duplicated)} appear more than once in the header")
    return problems


def _read_csv(path: Path, problems: list[str]) -> tuple[list[dict[str, str]], list[str]]:
    """Rows of one file as {column: stripped text} and their places ``file:line``."""
    from perfmodel.inputs import MAX_FILE_BYTES

    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            problems.append(f"{path}: the file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
            return [], []
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                problems.append(f"{path}: empty file; the first line must be the header")
                return [], []
            header = [name.strip() for name in header]
            header_problems = _missing_columns(str(path), header)
            if header_problems:
                problems += header_problems
                return [], []
            rows, places, line = [], [], reader.line_num
            for record in reader:
                start, line = line + 1, reader.line_num
                if not any(cell.strip() for cell in record):
                    continue
                if len(record) != len(header):
                    problems.append(f"{path}:{start}: {len(record)} fields but the header has "
                                    f"{len(header)}")
                    continue
                rows.append({name: cell.strip() for name, cell in zip(header, record)})
                places.append(f"{path}:{start}")
            return rows, places
    except OSError as error:
        problems.append(f"{path}: cannot read ({error.strerror})")
    except (UnicodeDecodeError, csv.Error, gzip.BadGzipFile, EOFError) as error:
        problems.append(f"{path}: not a UTF-8 CSV file ({error})")
    return [], []


def _checked_frame(rows: list[dict[str, str]], places: list[str], problems: list[str]):
    import numpy as np
    import pandas as pd

    first_seen: dict[str, str] = {}
    for row, place in zip(rows, places):
        ident = row.get("id", "")
        problems += [f"{place} (id {ident[:60] or '?'}): {message}" for message in _row_problems(row)]
        if ident:
            if ident in first_seen:
                problems.append(f"{place} (id {ident}): duplicate id, already used at "
                                f"{first_seen[ident]}; ids must be unique over all files loaded together")
            else:
                first_seen[ident] = place
    if problems:
        raise MeasurementError(problems)

    extra = [c for c in dict.fromkeys(name for row in rows for name in row) if c not in COLUMNS]
    frame = pd.DataFrame(rows, columns=list(COLUMNS) + extra)
    frame = frame.replace("", np.nan)
    _name_frameworks(frame)
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    for column in frame.columns.difference(NUMERIC_COLUMNS):
        frame[column] = frame[column].astype(object)
    return frame.reset_index(drop=True)


def _name_frameworks(frame) -> None:
    """``framework`` as a :data:`~perfmodel.vocabulary.FRAMEWORKS` name, in place.

    The measurement spec has ``framework`` as free text ("Megatron-LM (PTD-P)", "PyTorch (NGC
    21.03)"): text that is not a vocabulary name is read with
    :func:`~perfmodel.vocabulary.framework_from_text` (the row's source helps name NVIDIA
    DeepLearningExamples recipes) and kept in ``software`` when that is empty; text naming no
    framework leaves ``framework`` empty, so the row is predicted with the pooled traits and says so.
    """
    import numpy as np

    frame["framework"] = frame["framework"].astype(object)
    frame["software"] = frame["software"].astype(object)
    for index in frame.index[frame["framework"].notna()]:
        text = frame.at[index, "framework"]
        if text in FRAMEWORKS:
            continue
        if not isinstance(frame.at[index, "software"], str):
            frame.at[index, "software"] = text
        named = framework_from_text(text, frame.at[index, "source"])
        frame.at[index, "framework"] = named if named is not None else np.nan


def _row_problems(row: dict[str, str]) -> list[str]:
    """Messages for one row (empty when the row is good)."""
    problems = []

    def missing(column: str, why: str) -> None:
        problems.append(f"column {column}: missing value; {why}")

    for column in REQUIRED_COLUMNS:
        if not row.get(column):
            missing(column, "every row needs one")

    for column in NUMERIC_COLUMNS:
        text = row.get(column, "")
        if text:
            message = _number_problem(column, text)
            if message:
                problems.append(f"column {column} = {excerpt(text)}: {message}")

    for column, allowed in CHOICES.items():
        text = row.get(column, "")
        if text and text not in allowed:
            problems.append(f"column {column} = {excerpt(text)}: not one of {', '.join(allowed)}")

    kind = row.get("kind", "")
    if kind and kind not in KINDS:
        problems.append(f"column kind = {kind!r}: unknown kind; allowed: {', '.join(KINDS)}")
    elif kind:
        metric = row.get("metric", "")
        if metric and metric not in METRICS[kind]:
            problems.append(f"column metric = {metric!r}: not a metric of kind {kind}; allowed: "
                            f"{', '.join(METRICS[kind])}")
        fields = KIND_FIELDS[kind]
        if kind == "train" and row.get("model") == "transformer":
            fields = fields + TRANSFORMER_FIELDS
        for column in fields:
            if not row.get(column):
                missing(column, f"required for kind {kind}"
                        + (" with model = transformer" if column in TRANSFORMER_FIELDS else ""))
    return problems


def _number_problem(column: str, text: str) -> str | None:
    """Why ``text`` is not an allowed value of numeric ``column`` (None when it is)."""
    try:
        number = float(text)
    except ValueError:
        return "not a number"
    if not math.isfinite(number):
        return "not a finite number"
    if number < 0:
        return "negative; must be > 0" if column != "zero" else "negative; ZeRO stage is 0, 1, 2 or 3"
    if column == "zero":
        return None if number in ZERO_STAGES else "ZeRO stage must be 0, 1, 2 or 3"
    if number == 0:
        return "zero; must be > 0"
    if column in WHOLE_COLUMNS and not number.is_integer():
        return "must be a whole number"
    limit = INTEGER_LIMITS.get(column)
    if limit is not None and number > limit:
        return f"must be at most {limit:,} (the {column} limit)"
    return None
