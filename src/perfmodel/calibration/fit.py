"""Fit efficiency parameters to measurements: ``calibrate(measurements) -> CalibrationProfile``.

Least squares on the log error log(predicted / measured) of every predictable row, in units of the
rows' robust log-error spread at the start (:func:`_log_error_scale`), plus one prior residual per
fitted value that pulls it towards its declared default (width ``Parameter.prior_log_sigma``),
within the parameter's bounds (scipy.optimize.least_squares, trust region reflective): a maximum
a posteriori fit with log-normal errors and priors, made robust by a soft-L1 loss beyond two
scales (:data:`ROBUST_SCALE`).  The priors keep a parameter that few rows
inform from running to nonsense.

Parameters are shared across rows by physics, never per row: an ``architecture`` parameter has
one value per GPU architecture in the rows, a ``link_kind`` parameter one per link kind.  The fit
runs in stages, each on the rows that identify its parameters, the later stages holding the
earlier values fixed:

1. ``kernel``: GEMM and copy micro-benchmarks fix the GEMM kernel model (perfmodel.models.gemm:
   efficiencies per architecture, tile-edge and pipeline-fill costs, L2 gain, power activity,
   per-call floor) and the memory efficiencies;
2. ``collective``: nccl-tests rows fix link efficiencies and latencies;
3. ``train``: end-to-end training rows fix what only whole steps show (attention and convolution
   efficiency, element-wise fusion, gradient-sync overlap, tensor-parallel overlap, per-step
   overhead, the clock a whole step sustains, the host's per-kernel dispatch time and
   each GPU generation's host relative to Hopper's) and the traits
   of each training framework (``per="framework"``: its kernels' speed).

Architectures (and frameworks) with no rows of their own take the median (in log space) of the
fitted ones (:func:`pool_groups`).  Uncertainty: one standard error per value, the Laplace approximation of
the posterior at the solution, (J^T J / s^2 + prior precision)^-1 with s^2 the rows' residual
variance (delta method back to parameter units).  A value whose posterior is not at most half as
wide as its prior is *not determined* by the rows: it stays at its prior (the stage is refitted
without it) and is listed in the profile's ``provenance['not_determined']``, with every value's
posterior/prior width ratio in ``provenance['identifiability']``.  A group's value its rows do
not determine on their own is *partially pooled* when the parameter pools (at least two
determined groups, :attr:`~perfmodel.parameters.Parameter.pools`): it is refitted on its rows with its prior
centred on the median of the determined groups instead of the declared default (a hierarchical
prior, Gelman et al., *Bayesian Data Analysis*, Ch. 5), so a framework with three rows is the
typical framework moved as far as those rows pull it, and a group whose rows carry no
information at all stays at the typical value.  Such values are listed in
``provenance['pooled']``.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np

from perfmodel.calibration.intervals import SOURCE_GROUPED_KINDS, architectures
from perfmodel.calibration.row_workload import row_intra
from perfmodel.calibration.validate import predict
from perfmodel.hardware.catalog import load_catalog
from perfmodel.parameters import PARAMETERS
from perfmodel.profile import CalibrationProfile, split_key

__all__ = ["STAGES", "CV_GROUPINGS", "calibrate", "cross_validate", "cv_groups", "parameter_keys", "row_groups"]

STAGES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("kernel", ("gemm", "memcpy"),
     ("gemm_cuda_core_efficiency", "gemm_linear_efficiency", "gemm_tensor_core_efficiency", "gemm_tile_edge_cost",
      "gemm_small_tile_sharing", "gemm_k_overhead", "gemm_kernel_latency", "gemm_l2_bandwidth_gain", "gemm_memory_efficiency",
      "gemm_power_activity", "gemm_boost_window", "gemm_call_floor", "gemm_linear_call_overhead",
      "gemm_floor_overlap", "memory_efficiency",
      "kernel_launch_overhead", "fp8_gemm_efficiency")),
    ("collective", ("collective",),
     ("link_bandwidth_efficiency", "link_latency", "collective_base_latency", "tree_bandwidth_efficiency",
      "nvls_bandwidth_efficiency", "nvls_tree_bandwidth_efficiency", "collnet_bandwidth_efficiency",
      "nvls_latency", "pipeline_fill")),
    ("train", ("train",),
     ("sustained_clock_fraction", "host_dispatch_time", "host_dispatch_scale", "attention_efficiency", "attention_async_kernel_gain",
      "conv_efficiency",
      "conv_winograd_gain", "elementwise_fusion", "dp_overlap", "zero3_overlap", "overlap_interference",
      "overlap_interference_per_byte", "tp_overlap_interference",
      "step_overhead", "framework_compute_efficiency")),
)

# measurement kinds whose rows inform each parameter (default: all kinds of its stage); a grouped
# parameter gets one value per group found in those rows only
INFORMED_BY = {
    "gemm_cuda_core_efficiency": ("gemm",), "gemm_linear_efficiency": ("gemm",), "gemm_tensor_core_efficiency": ("gemm",), "fp8_gemm_efficiency": ("gemm",),
    "memory_efficiency": ("memcpy",),
    "sustained_clock_fraction": ("train",), "attention_efficiency": ("train",), "conv_efficiency": ("train",),
    "host_dispatch_scale": ("train",), "conv_winograd_gain": ("train",),
    "attention_async_kernel_gain": ("train",),
}

_UNPREDICTED_PENALTY = 1.0  # log-error charged to a row that stops being predictable mid-fit
MAX_EVALUATIONS = 25  # trust-region steps per stage (each also costs one Jacobian)
REFIT_EVALUATIONS = 6  # steps of the warm-started refit without the values the rows do not determine
# A value whose posterior standard deviation is above this share of its prior's is "not determined
# by the data": the rows narrow the prior by less than half, so the optimum would only follow the
# optimizer's rounding.  calibrate() keeps such a value at its prior and says so.
DETERMINED_RATIO = 0.5
# residuals (in units of the rows' log-error scale) beyond which a row's pull grows only linearly
# (soft-L1 loss, scipy.optimize.least_squares): a row whose workload misses a kernel the model does
# not know (NMS in Mask R-CNN) or whose batch its source does not state cannot drag a parameter
# every other row shares (Huber 1981, Robust Statistics, Ch. 7)
ROBUST_SCALE = 2.0
# floor of the rows' log-error scale (2 %: repeat runs of one GPU benchmark rarely agree better)
MIN_LOG_ERROR_SCALE = 0.02


def row_groups(rows, catalog) -> dict[str, set[str]]:
    """GPU architectures, link kinds and frameworks that the rows run on (for grouped parameters)."""
    groups: dict[str, set[str]] = {"architecture": set(), "link_kind": set(),
                                   "framework": {str(name) for name in rows.get("framework", ()) if _present(name)}}
    seen = set()
    for _, row in rows.iterrows():
        key = tuple(str(row.get(c)) for c in ("gpu", "num_gpus", "gpus_per_node", "intra", "inter", "software"))
        if key in seen:
            continue
        seen.add(key)
        try:
            gpu = catalog.gpu(row["gpu"])
        except ValueError:
            continue
        groups["architecture"].add(gpu.architecture)
        try:
            hardware = {"gpu": row["gpu"]}
            for column in ("num_gpus", "gpus_per_node"):
                if _present(row.get(column)):
                    hardware[column] = int(float(row[column]))
            intra = row_intra(row, catalog)[0]  # the link the predictor times the row's collectives on
            if intra is not None:
                hardware["intra"] = intra
            if _present(row.get("inter")):
                hardware["inter"] = str(row["inter"])
            cluster = catalog.cluster(**hardware)
        except ValueError:
            continue
        groups["link_kind"].add(cluster.intra.kind)
        if cluster.nic is not None and cluster.num_gpus > cluster.gpus_per_node:
            groups["link_kind"].add(cluster.nic.kind)
    return groups


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) != ""


def parameter_keys(names, rows, catalog) -> list[str]:
    """Profile keys to fit: ``name``, or ``name[group]`` for each group that the rows informing
    the parameter (:data:`INFORMED_BY`) exercise, but its ``reference_group`` (held at its default)."""
    keys = []
    for name in names:
        parameter = PARAMETERS[name]
        if parameter.per is None:
            keys.append(name)
            continue
        informing = rows[rows["kind"].isin(INFORMED_BY.get(name, rows["kind"].unique()))]
        keys += [f"{name}[{group}]" for group in sorted(row_groups(informing, catalog)[parameter.per])
                 if group != parameter.reference_group]
    return keys


def pool_groups(values: dict[str, float], uncertainty: dict[str, float], skip=()) -> None:
    """Partial pooling: a grouped parameter that pools (:attr:`~perfmodel.parameters.Parameter.pools`) gets an ungrouped
    value, the median of its fitted groups in log space (uncertainty: their standard deviation),
    which :meth:`CalibrationProfile.get` uses for groups with no rows of their own (a new GPU
    architecture is then predicted like the typical known one, not by the bare prior).  The median,
    not the mean, so one atypical group does not drag every new one: Pascal's fp32 ``nn.Linear``
    path runs at about half the rate of its batched GEMMs (NeuSight rows), and with the mean an
    unmeasured architecture inherited that.  Keys in ``skip`` (values the data did not determine)
    do not enter the median."""
    by_name: dict[str, list[float]] = {}
    for key, value in values.items():
        name, group = split_key(key)
        if key not in skip and group is not None and PARAMETERS[name].pools and value > 0:
            by_name.setdefault(name, []).append(value)
    for name, group_values in by_name.items():
        if len(group_values) >= 2:
            logs = np.log(group_values)
            values[name] = float(np.exp(np.median(logs)))
            uncertainty[name] = float(values[name] * logs.std(ddof=1))


def _pooled_centre(key: str, fitted: dict[str, float], determined: list[str]) -> float | None:
    """The prior centre of an undetermined group ``key`` under partial pooling: the median (log
    space) of the determined groups of its parameter when :func:`pool_groups` would pool them (two
    or more, a parameter that pools); None when it does not pool (the key keeps its prior)."""
    name, group = split_key(key)
    if group is None:
        return None
    siblings = {k: fitted[k] for k in determined if split_key(k)[0] == name and split_key(k)[1] is not None}
    pool_groups(siblings, {})  # the same median as the profile's pooled value
    return siblings.get(name)


def _transform(parameter):
    """Log space for parameters bounded away from 0, linear otherwise."""
    return parameter.low > 0


def _fit_stage(rows, keys, profile, catalog, prior=None, max_evaluations=MAX_EVALUATIONS):
    """Fit ``keys`` on ``rows`` from ``profile``'s values (a key the profile lacks starts at its
    parameter's ``fit_start`` when it has one); ``prior`` maps keys to prior centres (default: the
    profile's value, else the declared default)."""
    from scipy.optimize import least_squares

    parameters = [PARAMETERS[split_key(key)[0]] for key in keys]
    logs = np.array([_transform(p) for p in parameters])
    start = np.array([profile.get(*split_key(key)) if key in profile.values or parameter.fit_start is None
                      else parameter.fit_start for key, parameter in zip(keys, parameters)], dtype=float)
    if prior is None:
        prior = {key: profile.get(*split_key(key)) if key in profile.values else _registered_default(key)
                 for key in keys}
    prior = np.array([prior[key] for key in keys], dtype=float)
    low = np.array([p.low for p in parameters])
    high = np.array([p.high for p in parameters])
    width = np.array([p.prior_log_sigma for p in parameters])

    def to_x(values):
        out = np.array(values, dtype=float)
        out[logs] = np.log(np.maximum(out[logs], 1e-300))
        return out

    def from_x(x):
        out = np.array(x, dtype=float)
        out[logs] = np.exp(out[logs])
        return out

    lower, upper = to_x(low), to_x(high)
    x0 = np.clip(to_x(start), lower + 1e-9 * (upper - lower), upper - 1e-9 * (upper - lower))
    measured = rows["value"].to_numpy(dtype=float)
    scale = _log_error_scale(np.log(predict(rows, catalog, profile)["predicted"].to_numpy(dtype=float) / measured))

    def residuals(x):
        values = from_x(x)
        trial = profile.with_values(**dict(zip(keys, values)))
        predicted = predict(rows, catalog, trial)["predicted"].to_numpy(dtype=float)
        error = np.log(predicted / measured)
        error = np.where(np.isfinite(error), error, _UNPREDICTED_PENALTY) / scale
        prior_error = np.where(logs, (x - to_x(prior)) / width, (values - prior) / (width * (high - low)))
        return np.concatenate([error, prior_error])

    result = least_squares(residuals, x0, bounds=(lower, upper), method="trf", x_scale="jac",
                           loss="soft_l1", f_scale=ROBUST_SCALE, jac_sparsity=_sparsity(rows, keys, catalog) if len(keys) > 1 else None,
                           diff_step=1e-3, ftol=1e-4, xtol=1e-4, max_nfev=max_evaluations)
    values = from_x(result.x)
    prior_sd_x = np.where(logs, width, width * (high - low))
    jacobian = result.jac.toarray() if hasattr(result.jac, "toarray") else np.asarray(result.jac)
    std_x = _posterior_sd(jacobian[:len(rows)], result.fun[:len(rows)], prior_sd_x)
    std = np.where(logs, values * std_x, std_x)
    return (dict(zip(keys, values)), dict(zip(keys, std)), dict(zip(keys, std_x / prior_sd_x)),
            dict(zip(keys, prior)), result)


def _sparsity(rows, keys, catalog):
    """Which residuals each key can move: a ``name[architecture]`` value only the rows on GPUs of
    that architecture, a ``name[framework]`` value only the rows of that framework (and each its
    own prior residual), every other key every row.  least_squares then perturbs the values of
    different groups together when it differences the Jacobian (Curtis, Powell and Reid 1974),
    which makes a training-stage fit several times cheaper."""
    row_group = {"architecture": np.array(architectures(list(rows["gpu"]), catalog), dtype=object),
                 "framework": np.asarray(rows["framework"] if "framework" in rows else [None] * len(rows), dtype=object)}
    pattern = np.zeros((len(rows) + len(keys), len(keys)), dtype=bool)
    for column, key in enumerate(keys):
        name, group = split_key(key)
        if group is not None and PARAMETERS[name].per in row_group:
            pattern[:len(rows), column] = row_group[PARAMETERS[name].per] == group
        else:
            pattern[:len(rows), column] = True
        pattern[len(rows) + column, column] = True
    return pattern


def _log_error_scale(start_errors) -> float:
    """The rows' log-error scale that weighs them against the priors: the robust spread (1.4826 x
    the median absolute deviation from the median, a normal sigma; Huber 1981) of the log errors at
    the starting values, so a common bias does not count as noise; at least
    :data:`MIN_LOG_ERROR_SCALE`."""
    finite = start_errors[np.isfinite(start_errors)]
    if finite.size < 2:
        return 1.0
    spread = 1.4826 * float(np.median(np.abs(finite - np.median(finite))))
    return max(spread, MIN_LOG_ERROR_SCALE)


def _posterior_sd(data_jacobian, data_residuals, prior_sd_x):
    """Posterior standard deviation of each fitted coordinate (Gauss-Newton / Laplace
    approximation): covariance = (J_d^T J_d / s^2 + diag(1 / prior_sd^2))^-1, with J_d the
    Jacobian of the rows' log errors and s^2 their residual variance (Bates & Watts 1988,
    *Nonlinear Regression Analysis*, Sec. 2.3; Gelman et al., *Bayesian Data Analysis*, Ch. 4)."""
    dof = max(1, data_residuals.size - prior_sd_x.size)
    variance = max(float(data_residuals @ data_residuals) / dof, 1e-6)
    information = data_jacobian.T @ data_jacobian / variance + np.diag(1.0 / prior_sd_x**2)
    try:
        return np.sqrt(np.clip(np.diag(np.linalg.pinv(information)), 0.0, None))
    except np.linalg.LinAlgError:
        return np.full(prior_sd_x.size, np.nan)


def _prior_sd(key: str, value: float) -> float:
    """The prior's standard deviation of ``key`` in parameter units (at centre ``value``)."""
    parameter = PARAMETERS[split_key(key)[0]]
    if _transform(parameter):
        return float(value * parameter.prior_log_sigma)
    return float(parameter.prior_log_sigma * (parameter.high - parameter.low))


def _registered_default(key: str) -> float:
    name, group = split_key(key)
    return CalibrationProfile().get(name, group)


def calibrate(measurements, params=None, profile: CalibrationProfile | None = None, catalog=None,
              stages=STAGES) -> CalibrationProfile:
    """Fit the efficiency parameters to ``measurements`` (a DataFrame in the measurement format).

    ``params``: names to fit (default: every parameter of every stage whose rows are present);
    ``profile``: the starting point and prior centres (default: the declared defaults, so a
    refit never depends on the shipped profile it regenerates).  Returns a new profile with the
    fitted ``values``, their ``uncertainty`` (one standard error, parameter units) and
    ``provenance`` (inputs, date, package version, per-stage residual summary).
    """
    import perfmodel

    catalog = catalog or load_catalog()
    profile = profile or CalibrationProfile()
    wanted = set(params) if params is not None else None
    if wanted is not None:
        unknown = wanted - set(PARAMETERS)
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)}; known: {', '.join(sorted(PARAMETERS))}")
    values, uncertainty, summary = dict(profile.values), dict(profile.uncertainty), {}
    identifiability: dict[str, float] = {}
    not_determined: list[str] = []
    pooled: list[str] = []
    for stage, kinds, names in stages:
        rows = measurements[measurements["kind"].isin(kinds)]
        names = [n for n in names if n in PARAMETERS and (wanted is None or n in wanted)]
        if rows.empty or not names:
            continue
        current = profile.model_copy(update={"values": values})
        start = predict(rows, catalog, current)
        rows = rows[start["predicted"].notna()]
        keys = parameter_keys(names, rows, catalog)
        if rows.empty or not keys:
            continue
        fitted, std, ratio, prior, result = _fit_stage(rows, keys, current, catalog)
        undetermined = [key for key in keys if not ratio[key] <= DETERMINED_RATIO]
        if undetermined:
            # what the rows cannot pin down on their own: a pooling group is refitted with its prior
            # centred on the determined groups' median; anything else stays at its prior
            determined = [key for key in keys if key not in undetermined]
            centres = {key: _pooled_centre(key, fitted, determined) for key in undetermined}
            stage_pooled = {key: centre for key, centre in centres.items() if centre is not None}
            undetermined = [key for key in undetermined if key not in stage_pooled]
            for key in undetermined:
                fitted[key] = prior[key]
                std[key] = _prior_sd(key, prior[key])
            refit = determined + list(stage_pooled)
            if refit:
                fixed = current.model_copy(update={"values": {**values, **fitted, **stage_pooled}})
                refitted, restd, reratio, _, result = _fit_stage(
                    rows, refit, fixed, catalog, prior={**{key: prior[key] for key in determined}, **stage_pooled},
                    max_evaluations=REFIT_EVALUATIONS)
                fitted.update(refitted)
                std.update(restd)
                ratio.update({key: reratio[key] for key in determined})  # a pooled key keeps the ratio that pooled it
            pooled += list(stage_pooled)
        values.update(fitted)
        uncertainty.update(std)
        identifiability.update(ratio)
        not_determined += undetermined
        before = np.abs(start.loc[rows.index, "predicted"] / rows["value"] - 1.0)
        after = predict(rows, catalog, profile.model_copy(update={"values": values}))["predicted"]
        after_ape = np.abs(after / rows["value"] - 1.0)
        summary[stage] = {"rows": int(len(rows)), "parameters": len(keys),
                          "mape_before": float(before.mean()), "mape_after": float(after_ape.mean()),
                          "evaluations": int(result.nfev), "converged": bool(result.success)}
    pool_groups(values, uncertainty, skip=set(not_determined) | set(pooled))
    for key in not_determined:  # an undetermined group of a pooled parameter follows the pooled value
        name, group = split_key(key)
        if group is not None and PARAMETERS[name].pools and name in values:
            values.pop(key, None)
            uncertainty.pop(key, None)
    provenance = {
        "name": "calibrated",
        "created": dt.date.today().isoformat(),
        "perfmodel_version": perfmodel.__version__,
        "inputs": {kind: int(n) for kind, n in measurements["kind"].value_counts().sort_index().items()},
        "sources": sorted(measurements.attrs.get("files", [])),
        "stages": summary,
        "identifiability": {key: round(float(value), 4) for key, value in sorted(identifiability.items())},
        "not_determined": sorted(not_determined),
        "pooled": sorted(pooled),
        "method": "scipy.optimize.least_squares (trf) on log(predicted/measured) with log-normal priors",
    }
    return CalibrationProfile(values=values, uncertainty=uncertainty, provenance=provenance)


def _configuration_groups(measurements):
    """Rows measured in one experiment (same everything but id/metric/value) share a group, so a
    fold never holds one metric of a measurement while fitting on another metric of it."""
    columns = [c for c in measurements.columns if c not in ("id", "metric", "value", "notes", "source", "url")]
    import pandas as pd

    keys = pd.util.hash_pandas_object(measurements[columns].astype(object), index=False)
    return keys.factorize()[0]


CV_GROUPINGS = ("train-source", "source", "experiment", "gpu")


def cv_groups(measurements, by: str = "source") -> np.ndarray:
    """Group label of each row for :func:`cross_validate` (the rows of a group share one fold).

    ``experiment``: one measured configuration (:func:`_configuration_groups`: every metric of
    one run); ``source``: rows of the kinds of
    :data:`~perfmodel.calibration.intervals.SOURCE_GROUPED_KINDS` (train, collective) by their
    ``source`` field (one table or section of a document, one results file), every other kind
    (GEMM and copy micro-benchmarks, almost all from one source) and a row without a source by
    experiment; ``train-source``: only the train rows by their source, every other kind by
    experiment (the shipped profile's intervals: a user's training run is a source the fit never
    saw, while a collective is a fabric and message size the nccl-tests sources share);
    ``gpu``: the GPU name."""
    if by not in CV_GROUPINGS:
        raise ValueError(f"cross-validation grouping {by!r} is not known; use one of {', '.join(CV_GROUPINGS)}")
    kinds = measurements["kind"].astype(str).to_numpy(dtype=object)
    if by == "gpu":
        return np.array([f"gpu|{g}" for g in measurements["gpu"]], dtype=object)
    experiment = np.array([f"{k}|experiment {g}" for k, g in zip(kinds, _configuration_groups(measurements))],
                          dtype=object)
    if by == "experiment" or "source" not in measurements:
        return experiment
    sources = measurements["source"].to_numpy(dtype=object)
    source_kinds = ("train",) if by == "train-source" else SOURCE_GROUPED_KINDS
    by_source = np.isin(kinds, source_kinds) & measurements["source"].notna().to_numpy()
    return np.where(by_source, np.array([f"{k}|{d}" for k, d in zip(kinds, sources)], dtype=object), experiment)


def _balanced_folds(groups, kinds, k: int, seed: int) -> np.ndarray:
    """Fold of each row.  Groups are taken in a seeded random order, largest first (a stable
    sort), each into the fold that holds the smallest share of the group's own kind(s) so far
    (greedy longest-processing-time balancing, Graham 1969, per kind), so each fold holds about
    1/k of every kind's rows whatever the group sizes."""
    import pandas as pd

    group_codes, _ = pd.factorize(pd.Series(groups, dtype=object))
    kind_codes, kind_names = pd.factorize(pd.Series(kinds, dtype=object))
    counts = np.zeros((group_codes.max() + 1, len(kind_names)))
    np.add.at(counts, (group_codes, kind_codes), 1.0)
    share = counts / counts.sum(axis=0)
    order = np.random.default_rng(seed).permutation(len(counts))
    order = order[np.argsort(-counts.sum(axis=1)[order], kind="stable")]
    load = np.zeros((k, len(kind_names)))
    fold_of_group = np.empty(len(counts), dtype=int)
    for group in order:
        fold = int(np.argmin(load @ share[group]))
        fold_of_group[group] = fold
        load[fold] += share[group]
    return fold_of_group[group_codes]


def cross_validate(measurements, k: int = 5, seed: int = 0, params=None, catalog=None, jobs: int = 1,
                   by: str = "experiment", profile: CalibrationProfile | None = None):
    """k-fold cross-validation: refit without each fold, predict the fold.

    Returns a DataFrame (id, kind, gpu, metric, measured, predicted, ape, reason, fold); every row
    is predicted by a profile fitted on the other folds only.  ``by`` (:func:`cv_groups`) keeps
    rows together: ``experiment`` (default) holds out configurations at random (another row of a
    source already fitted); ``source`` holds out all rows of a source of train and collective rows,
    a source the fit never saw (collectives: 80 % intervals about 2.7 wide, see docs/accuracy.md);
    ``train-source`` only the train rows' sources (what ``perfmodel calibrate --cv`` stores the
    intervals from);
    ``gpu`` holds out GPUs (``k`` = the number of GPUs: leave-one-GPU-out).  Groups fill the
    folds balanced by rows of each kind (:func:`_balanced_folds`; ``experiment`` keeps the
    seeded round-robin of configurations).  ``profile``: the fits' starting point and prior
    centres, as in :func:`calibrate` (with ``params``, the values of parameters not refitted).
    ``jobs`` > 1 fits the folds in that many processes; the result is the same as with one.
    """
    import pandas as pd

    if k < 2:
        raise ValueError(f"cv folds must be >= 2, got {k}")
    catalog = catalog or load_catalog()
    if by == "experiment":
        groups = _configuration_groups(measurements)
        order = np.random.default_rng(seed).permutation(groups.max() + 1)
        fold_of_group = np.empty_like(order)
        fold_of_group[order] = np.arange(order.size) % k
        folds = fold_of_group[groups]
    else:
        folds = _balanced_folds(cv_groups(measurements, by), measurements["kind"].to_numpy(dtype=object), k, seed)
    tasks = [(measurements[folds != fold], measurements[folds == fold], fold, params, catalog, profile)
             for fold in range(k) if (folds == fold).any()]
    if jobs > 1 and len(tasks) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            parts = list(pool.map(_score_fold, *zip(*tasks)))
    else:
        parts = [_score_fold(*task) for task in tasks]
    return pd.concat(parts).sort_index()


def _score_fold(train, held, fold, params, catalog, start=None):
    """Fit on ``train`` and score ``held`` (one fold of :func:`cross_validate`)."""
    from perfmodel.calibration.validate import validate

    profile = calibrate(train, params=params, profile=start, catalog=catalog)
    scored = validate(held, catalog, profile.model_copy(update={"interval": {}}))
    scored["fold"] = fold
    return scored
