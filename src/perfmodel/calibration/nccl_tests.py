"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) into ``collective`` rows.

nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md) prints one line per size:
``size count type [redop] [root] time algbw busbw #wrong [time algbw busbw #wrong]``, the first
group out-of-place and the second in-place; time in microseconds, bandwidths in GB/s (1e9 B/s).
Comment lines start with ``#``; ``# Rank ... on HOST device ...`` lines give the ranks and hosts,
and newer versions print ``# Collective test starting: all_reduce_perf``.  Each size becomes
three rows of the measurement format (time_us, algbw_GBps, busbw_GBps).
"""

from __future__ import annotations

import re

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.models.comm import COLLECTIVES

_RANK = re.compile(r"^#\s*Rank\s+\d+.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_TEST = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
METRICS = MEASUREMENT_METRICS["collective"]  # nccl-tests prints them in this order
PLACEMENTS = ("out-of-place", "in-place")


def _numbers(tokens: list[str]) -> list[float] | None:
    if not all(_NUMBER.match(t) or t == "N/A" for t in tokens):
        return None
    return [float("nan") if t == "N/A" else float(t) for t in tokens]


def parse_nccl_tests(text: str, *, collective: str | None = None, gpu: str | None = None,
                     num_gpus: int | None = None, gpus_per_node: int | None = None, intra: str | None = None,
                     inter: str | None = None, algorithm: str = "auto", placement: str = "out-of-place",
                     source: str = "nccl-tests output", id_prefix: str = "nccl"):
    """Rows of kind ``collective`` (a pandas DataFrame in the measurement format) from nccl-tests text.

    ``collective``, ``num_gpus`` and ``gpus_per_node`` default to what the text says (the test
    name; the ``# Rank`` lines and their distinct hosts); ``gpu`` defaults to the device name the
    text prints (map it to a catalog name for :func:`perfmodel.calibration.validate.validate`).
    """
    import pandas as pd

    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r} is unknown; allowed: {', '.join(PLACEMENTS)}")
    hosts: list[str] = []
    devices: list[str] = []
    sizes: list[tuple[float, list[float]]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            rank = _RANK.match(stripped)
            if rank:
                hosts.append(rank.group(1))
                devices.append(rank.group(2))
            test = _TEST.search(stripped)
            if test and collective is None:
                collective = test.group(1)
            continue
        tokens = stripped.split()
        if len(tokens) < 7 or not tokens[0].isdigit() or not tokens[1].isdigit():
            continue
        rest = tokens[3:]  # after size, count, type
        if rest and not _NUMBER.match(rest[0]):
            rest = rest[1:]  # the reduction op (sum, none, ...)
        values = _numbers(rest)
        if values is None or len(values) % 4 not in (0, 1) or len(values) < 4:
            raise ValueError(f"nccl-tests line not understood: {line.strip()!r}")
        values = values[len(values) % 4:]  # drop the root column when printed
        offset = 4 if placement == "in-place" else 0
        if len(values) < offset + 4:
            raise ValueError(f"nccl-tests line has no {placement} columns: {line.strip()!r}")
        sizes.append((float(tokens[0]), values[offset:offset + 3]))
    if not sizes:
        raise ValueError("no nccl-tests result lines found (expected 'size count type ... time algbw busbw')")
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r} is unknown or not in the text; give one of "
                         f"{', '.join(COLLECTIVES)}")
    num_gpus = num_gpus or len(hosts) or None
    if num_gpus is None:
        raise ValueError("num_gpus is not in the text (no '# Rank' lines); give it")
    if gpus_per_node is None:
        gpus_per_node = num_gpus // len(set(hosts)) if hosts else num_gpus
    rows = []
    for size, measured in sizes:
        for metric, value in zip(METRICS, measured):
            rows.append({
                "id": f"{id_prefix}-{int(size)}-{metric}", "kind": "collective",
                "gpu": gpu or (devices[0] if devices else None), "num_gpus": num_gpus,
                "gpus_per_node": gpus_per_node, "intra": intra, "inter": inter, "collective": collective,
                "algorithm": algorithm, "message_bytes": int(size), "metric": metric, "value": value,
                "source": source, "notes": f"parsed from nccl-tests text, {placement} columns"})
    return pd.DataFrame(rows)
