"""Predictor for ``collective`` rows (nccl-tests measurements): time_us, algbw_GBps, busbw_GBps.

The cluster comes from the row's gpu, num_gpus, gpus_per_node, intra and inter through
``Catalog.cluster``; the group is every GPU of the row.  Algorithms ring, tree, nvls, nvlstree,
collnet and auto are modelled (:mod:`perfmodel.models.comm`).  A row spanning nodes without ``inter``
takes the GPU's reference fabric (``GPU.reference_fabric``), listed in ``assumed``; a GPU without one
gets the reason "inter not stated".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.calibration.measurements import METRICS as MEASUREMENT_METRICS
from perfmodel.hardware.catalog import Catalog
from perfmodel.models import comm
from perfmodel.profile import CalibrationProfile

METRICS = MEASUREMENT_METRICS["collective"]
ROW_ALGORITHMS = ("ring", "tree", "nvls", "nvlstree", "collnet", "auto")
KEYS = ["gpu", "num_gpus", "gpus_per_node", "intra", "inter", "collective", "algorithm"]


def _text(value) -> str | None:
    return None if pd.isna(value) or str(value).strip() == "" else str(value).strip()


def _whole(value, column: str) -> int:
    number = pd.to_numeric(value, errors="coerce")
    if not np.isfinite(number) or number < 1 or number != round(number):
        raise ValueError(f"column {column!r} must be a whole number >= 1, got {value!r}")
    return int(number)


def _predict_group(key: tuple, rows: pd.DataFrame, catalog: Catalog,
                   profile: CalibrationProfile) -> tuple[np.ndarray, str | None]:
    """(predicted values, what was assumed or None) for rows sharing one cluster and algorithm."""
    gpu, num_gpus, gpus_per_node, intra, inter, collective, algorithm = key
    if algorithm not in ROW_ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r} is not modelled (modelled: {', '.join(ROW_ALGORITHMS)})")
    if collective not in comm.COLLECTIVES:
        raise ValueError(f"collective {collective!r} is unknown; allowed: {', '.join(comm.COLLECTIVES)}")
    total, per_node = _whole(num_gpus, "num_gpus"), _whole(gpus_per_node, "gpus_per_node")
    cluster = catalog.cluster(gpu=gpu, num_gpus=total, gpus_per_node=per_node, intra=intra, inter=inter)
    if cluster.nodes > 1 and cluster.nic is None:
        raise ValueError("the run spans nodes but 'inter' (the network) is not stated and the catalog has no "
                         f"reference fabric for {cluster.gpu.name}")
    sizes = pd.to_numeric(rows["message_bytes"], errors="coerce").to_numpy(dtype=float)
    if np.any(~np.isfinite(sizes) | (sizes <= 0)):
        raise ValueError("column 'message_bytes' must be a positive number of bytes")
    time = comm.cluster_collective_time(cluster, profile, collective, sizes, algorithm=algorithm)
    metric = rows["metric"].to_numpy()
    unknown = sorted(set(metric) - set(METRICS))
    if unknown:
        raise ValueError(f"metric {unknown[0]!r} is not a collective metric ({', '.join(METRICS)})")
    values = np.select([metric == "time_us", metric == "algbw_GBps"],
                       [time * 1e6, comm.algbw(sizes, time) / 1e9],
                       comm.busbw(collective, sizes, time, total) / 1e9)
    return values, "; ".join([*cluster.gpu.assumed, *cluster.assumed]) or None


def predict_collective(rows: pd.DataFrame, catalog: Catalog, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted time_us / algbw_GBps / busbw_GBps per row, or the reason it cannot be predicted,
    and what was assumed (``assumed``: a reference fabric, filled-in GPU specs)."""
    out = pd.DataFrame({"predicted": np.nan, "reason": None, "assumed": None}, index=rows.index)
    out["reason"] = out["reason"].astype(object)
    out["assumed"] = out["assumed"].astype(object)
    keys = pd.DataFrame({column: rows.get(column, pd.Series(None, index=rows.index)).map(_text)
                         for column in KEYS}, index=rows.index)
    keys["algorithm"] = keys["algorithm"].fillna("auto")
    for key, index in keys.groupby(KEYS, dropna=False, sort=False).groups.items():
        key = tuple(None if isinstance(k, float) and np.isnan(k) else k for k in key)
        try:
            out.loc[index, "predicted"], out.loc[index, "assumed"] = _predict_group(key, rows.loc[index], catalog,
                                                                                      profile)
        except ValueError as error:  # CatalogError is a ValueError
            out.loc[index, "reason"] = str(error).splitlines()[0]
    return out
