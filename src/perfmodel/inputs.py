"""Input limits in one place: reading user files, YAML/JSON structure, and plausible integer ranges.

Every file a user hands to perfmodel (catalog, scenario, calibration profile, measurement CSV) is
read through :func:`read_text` and, when structured, :func:`load_structured`.  The rules:

* a file larger than :data:`MAX_FILE_BYTES` is refused before it is read;
* an OS error (missing, a directory, no permission, a parent that is not a directory) is one line
  naming the path and what went wrong; non-UTF-8 bytes name the file and the byte offset;
* a YAML file may not expand to more than :data:`MAX_NODES` values, aliases (``*name``) counted
  as copies of their anchor, so an alias bomb (a few hundred bytes that expand to gigabytes) is
  refused; nor nest deeper than :data:`MAX_DEPTH`.  Both are checked on the event stream before
  any object is built, so a 100,000-deep input costs no recursion;
* counts (GPUs, nodes, batch sizes, layers, ...) have upper bounds in :data:`INTEGER_LIMITS`,
  far above any real job but low enough that every formula stays in float range; booleans are
  not counts.

Messages show at most :data:`EXCERPT_CHARS` characters of a bad value (:func:`excerpt`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

__all__ = ["InputError", "MAX_FILE_BYTES", "MAX_DEPTH", "MAX_NODES", "EXCERPT_CHARS", "INTEGER_LIMITS", "excerpt",
           "read_text", "load_structured", "parse_structured", "check_count", "Count", "os_error",
           "check_output_path"]

MAX_FILE_BYTES = 32 * 2**20
"""Largest input file read (32 MiB); the shipped catalog is ~60 KB, the shipped measurements ~1 MB."""

MAX_DEPTH = 32
"""Deepest nesting of mappings/lists in a YAML/JSON file (perfmodel's own files nest at most 4)."""

MAX_NODES = 200_000
"""Most values (scalars, mappings, lists) a YAML file may expand to, aliases expanded; the shipped
catalog has about 4,000."""

EXCERPT_CHARS = 60
"""Longest excerpt of a bad value shown in a message."""

MAX_GPUS = 2**20
INTEGER_LIMITS: dict[str, int] = {
    # hardware: ~1M GPUs is several times the largest cluster announced (2025: ~200k GPUs)
    "num_gpus": MAX_GPUS, "nodes": MAX_GPUS, "gpus_per_node": 1024, "nics": 1024,
    # parallel degrees cannot exceed the GPU count
    "tp": MAX_GPUS, "pp": MAX_GPUS, "dp": MAX_GPUS, "cp": MAX_GPUS, "group_size": MAX_GPUS,
    "vp": 10_000, "recompute_every": 10_000,
    # batch sizes in samples
    "micro_batch": 2**16, "global_batch": 2**24,
    # model shape
    "layers": 10_000, "hidden": 2**20, "ffn_hidden": 2**22, "heads": 2**16, "kv_heads": 2**16,
    "seq_len": 2**24, "mean_seq_len": 2**24, "vocab": 2**24, "image_size": 2**16,
    # mixture of experts: DeepSeek-V3 has 256 routed experts, top-8
    "experts": 2**16, "top_k": 2**16,
    # GEMM shapes and byte counts of measurement rows
    "m": 2**24, "n": 2**24, "k": 2**24, "message_bytes": 2**50, "bytes": 2**50,
}
"""Upper bound of each count field (inclusive); the lower bound is 1."""


class InputError(ValueError):
    """A user file or value perfmodel refuses; the message names the file, the field and the value."""


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (``...`` and the full length when cut)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # huge ints beyond Python's digit limit, deep nesting
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def os_error(path: str | Path, doing: str, error: OSError) -> InputError:
    """One line for an OS error: the path, what was being done, and the reason."""
    reason = error.strerror or type(error).__name__
    return InputError(f"{path}: cannot {doing} ({reason})")


def read_text(path: str | Path, what: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path`` (a ``what`` file: 'scenario file', 'catalog file', ...)."""
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise InputError(f"{path}: the {what} is {size:,} bytes; the limit is {max_bytes:,}")
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)  # a device or pipe may report size 0 and never end
    except OSError as error:
        raise os_error(path, f"read {what}", error) from None
    if len(data) > max_bytes:
        raise InputError(f"{path}: the {what} is more than {max_bytes:,} bytes, the limit")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: the {what} is not UTF-8 text (byte {error.start} is "
                         f"0x{data[error.start]:02x}); is it a binary file?") from None


def load_structured(path: str | Path, what: str):
    """Parse the YAML (or, for ``*.json``, JSON) file ``path`` within the limits above."""
    return parse_structured(read_text(path, what), str(path), json_syntax=str(path).endswith(".json"))


def parse_structured(text: str, where: str, *, json_syntax: bool = False):
    """Parse YAML/JSON ``text``; ``where`` names it in errors.  No aliases, no deep nesting."""
    if json_syntax:
        try:
            data = json.loads(text)
        except RecursionError:
            raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as error:  # JSONDecodeError, and integers past Python's digit limit
            raise InputError(f"{where}: not valid JSON ({excerpt(str(error), 160)})") from None
        _check_depth(data, where)
        return data
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_yaml_events(yaml.parse(text, Loader=loader), where)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        raise InputError(f"{where}: not valid YAML ({excerpt(str(error).replace(chr(10), ' '), 200)})") from None
    except ValueError as error:  # e.g. an integer past Python's 4300-digit conversion limit
        if isinstance(error, InputError):
            raise
        raise InputError(f"{where}: unreadable value ({excerpt(str(error), 120)})") from None


def _check_yaml_events(events, where: str) -> None:
    """Count the nodes and depth the YAML event stream expands to (an alias counts as a copy of
    what its anchor holds) and stop at the first excess, before any object is built."""
    import yaml

    expanded = 0
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, depth) of its node
    stack: list[list] = []  # open collections: [anchor, nodes before it, its depth, deepest below]

    def reached(depth: int, line: int) -> None:
        if depth > MAX_DEPTH:
            raise InputError(f"{where}: line {line}: nested deeper than {MAX_DEPTH} levels")
        if stack:
            stack[-1][3] = max(stack[-1][3], depth)

    for event in events:
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            nodes, depth = anchors.get(event.anchor, (1, 0))
            expanded += nodes
            reached(len(stack) + depth, line)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                anchors[event.anchor] = (1, 0)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            expanded += 1
            reached(len(stack) + 1, line)
            stack.append([event.anchor, expanded - 1, len(stack) + 1, len(stack) + 1])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, before, depth, deepest = stack.pop()
            if anchor:
                anchors[anchor] = (expanded - before, deepest - depth + 1)
            if stack:
                stack[-1][3] = max(stack[-1][3], deepest)
        if expanded > MAX_NODES:
            raise InputError(f"{where}: line {line}: expands to more than {MAX_NODES:,} values "
                             "(YAML aliases repeat what their anchor holds); write a smaller file")


def _check_depth(data, where: str) -> None:
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]


def check_count(field: str, value) -> int:
    """``value`` as a whole number in 1..INTEGER_LIMITS[field]; booleans and fractions refused."""
    limit = INTEGER_LIMITS[field]
    if isinstance(value, bool):
        raise InputError(f"{field} = {value!r}: a boolean is not a count; give a whole number "
                         f"from 1 to {limit:,}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) and hasattr(value, "__index__"):  # numpy integers
        value = int(value)
    if not isinstance(value, int):
        raise InputError(f"{field} = {excerpt(value)}: not a whole number")
    if not 1 <= value <= limit:
        raise InputError(f"{field} = {excerpt(value)}: must be from 1 to {limit:,} (the {field} limit)")
    return value


def _count_validator(field: str):
    from pydantic import BeforeValidator

    def check(value):
        if value is None or isinstance(value, str):
            return value  # None: not given; text: pydantic's own int parsing, then the bound below
        try:
            return check_count(field, value)
        except InputError as error:
            raise ValueError(str(error).split(": ", 1)[1]) from None  # pydantic adds the field name

    return BeforeValidator(check)


def Count(field: str):  # noqa: N802 - a type factory, used like a type
    """Pydantic type of a count field: a whole number in 1..INTEGER_LIMITS[field], not a boolean."""
    from pydantic import Field

    return Annotated[int, _count_validator(field), Field(ge=1, le=INTEGER_LIMITS[field])]


def check_output_path(path: str | Path, what: str) -> Path:
    """Refuse an output path that cannot be written, before any work is done: a directory, a
    missing parent, a parent that is not a directory, no write permission."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError(f"{path}: cannot write {what} (it is a directory)")
    if not parent.exists():
        blocker = next((p for p in [parent, *parent.parents] if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise InputError(f"{path}: cannot write {what} ({blocker} is not a directory)")
        raise InputError(f"{path}: cannot write {what} (directory {parent} does not exist)")
    if not parent.is_dir():
        raise InputError(f"{path}: cannot write {what} ({parent} is not a directory)")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"{path}: cannot write {what} (permission denied)")
    if not target.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{path}: cannot write {what} (permission denied in {parent})")
    return target
