"""Prediction intervals that widen away from the calibration data.

An estimate's error is the log ratio ``r = log(measured / predicted)`` in *rate* orientation
(predicted / measured for time metrics, so a model 20 % too fast gives the same ``r`` whether the
row reports samples/s or seconds).  The interval model describes ``r`` at the place an estimate
stands: its measurement kind, GPU architecture, scale (GPU count, model size, sequence length)
and which of its inputs were assumed.  ``r = b + sigma * z`` with

* ``b``, the systematic bias, and the residual variance ``v`` of the *nearest cross-validated
  rows*: all kinds, then the kind, then (when the estimate's workload family is known and the
  kind has rows of it) the kind's rows of that family -- transformers or convolutional networks,
  whose errors held out by source spread about threefold apart (sigma 0.10 vs 0.31) --, then
  those on this architecture, then on this architecture at this GPU-count bucket; each level is
  shrunk towards its parent with weight ``n / (n + n0)`` (a precision weighted compromise, the usual empirical-Bayes partial
  pooling; Gelman et al., *Bayesian Data Analysis*, 3rd ed., ch. 5), so a level with few rows
  says little; where the rows' sources are known (training and collective rows), a level's
  variance adds the between-source variance of its sources' medians (:func:`_between_variance`):
  a user's run is a source the rows never saw, whose error is its source's shift plus the row's
  own (one-way random effects), and the robust spread of rows that cluster by source measures
  mostly the second -- held out by source, the A100 collective rows (one source, 0.2-0.7 slower
  than predicted) were covered 0.30 at 80 % without it, 0.68 with it;
* ``sigma^2 = v + p + e``: ``p`` the fitted parameters' uncertainty propagated to the estimate,
  the sum in quadrature of the relative standard errors of the efficiencies that scale the
  kind's dominant time term (time = work / (peak x efficiency), elasticity 1; delta method), down
  to the first one fitted on the architecture's own rows, which absorbs those fitted before it
  (:func:`_kind_variance`),
  plus the host dispatch time's: the squared log change of the step when the host is one
  standard error slower (:func:`perfmodel.chain.host_log_sensitivity`, 0 for a step the host
  does not bind even then; a framework whose rows never determined it counts it uncertain by x2,
  :data:`perfmodel.models.compute.HOST_PRIOR_LOG_SIGMA`); and, when the attention kernel was
  assumed for a framework that fuses it in some versions only, the two-point variance
  ``q (1 - q) d^2`` of the step changing by ``d`` (log) with the other kernel, ``q`` =
  :data:`OTHER_KERNEL_PROBABILITY` (:func:`attention_variance`), about the two-point mean ``q d``,
  by which ``b`` moves towards the other case (:func:`attention_shift`).
  ``v`` is the spread of the rows *beyond* ``p`` (their robust variance less their mean ``p``),
  so the two are not counted twice; ``p`` grows where a parameter falls back to its pooled value
  (an architecture the fit never saw); a value fitted *at a bound* of its parameter adds its
  prior's log-variance (the Laplace error means nothing there: the fit wanted to go beyond the
  bound, by an amount the curvature does not tell) times ``n0 / (n + n0)``, ``n`` the rows of the
  kind on that architecture, whose residuals already carry what the pinned value does to them;
* ``e``, extrapolation: an architecture with no rows of this kind adds the between-architecture
  variance of the biases (``tau^2``, method of moments; or the excess variance of a
  leave-one-architecture-out study when given); a GPU *model* with few or no rows of the kind
  adds the excess variance of a leave-one-GPU-out study of the GEMM rows, ``tau_gpu^2``, times
  ``n0 / (n_gpu + n0)`` (the larger of the two terms counts, not their sum); each decade of GPU
  count, model size or sequence length outside the fitted range adds the residual trend along
  that axis (slope and its standard error, in quadrature) times the distance; each assumed input
  (framework, fabric) adds the between-group variance of the biases of that input; a step whose
  makeup the fitted rows never had -- a larger share of it in layer communication, data-parallel
  communication, the pipeline or per-step work (:data:`perfmodel.chain.STEP_SHARES`) than any
  fitted row of the kind -- adds ``(s_u u)^2``, ``u`` the sum of those shares beyond the fitted
  maximum (:func:`untested_share`) and ``s_u`` fitted by maximum likelihood on the
  cross-validated rows whose share exceeded the range of the other source families' rows (the
  prior :data:`SHARE_PRIOR_LOG_SIGMA` when fewer than :data:`MIN_SHARE_ROWS` did);
* ``z``: the empirical quantiles of the standardized cross-validated residuals
  ``(r - b) / sigma`` of the kind, each against ``b`` and ``sigma`` fitted without it
  (cross-fitting, so the quantiles are those of rows the nodes did not see; for train and
  collective rows with enough sources, without the row's whole *source*, widened for the few
  sources seen as a prediction from m draws is), blended with Student-t quantiles
  (``nu = n - 1``) with weight ``n / (n + n0)`` so a kind with few rows gets fat tails.  Quantiles
  are stored on a probability grid and interpolated, so any level in (0, 0.99] works and the
  bounds are monotone in level.

The residuals should come from source-grouped cross-validation
(:func:`perfmodel.calibration.fit.cross_validate`, ``by="train-source"``, what ``perfmodel
calibrate --cv`` uses): a user's training run is always a source the fit never saw, and residuals
of random folds measure only "another row of a source already fitted".  Collectives are held out
by experiment there (a fabric and message size the nccl-tests sources share; their source folds
give intervals about 2.7 wide).

``fit_interval_model(cv_frame, profile, context, unseen=..., unseen_gpu=...)`` builds the model
(a plain JSON-able dict, kept in the profile's ``provenance["interval_model"]``);
``ratio_bounds(...)`` evaluates it on arrays (one estimate or a million search plans, same code);
``confidence(...)`` explains one estimate.
"""

from __future__ import annotations

import math
import re

import numpy as np

from perfmodel.chain import STEP_SHARES
from perfmodel.models.compute import host_dispatch_seconds, host_log_error, host_scale_is_prior
from perfmodel.profile import PARAMETERS, TIME_METRICS, scale_by_ratio, split_key

__all__ = ["LEVEL", "N0", "GRID", "DEPENDS", "FAMILY_DEPENDS", "GEMM_UNITS", "depends", "gemm_unit", "FEATURES",
           "ASSUMABLE", "rate_ratio", "architectures",
           "row_context", "fit_interval_model", "ratio_bounds", "time_bounds", "bounds", "interval_columns",
           "interval_bounds", "interval_table", "confidence", "held_out_rows", "canonical_gpus", "framework_family",
           "gpu_bucket", "log_sigma", "parameter_variance", "host_variance", "attention_variance", "attention_shift",
           "HOST_COLUMN", "ATTENTION_COLUMN", "OTHER_KERNEL_PROBABILITY", "SHARE_COLUMNS",
           "TERM_COLUMNS", "untested_share", "source_families", "BUCKETS", "MIN_ROWS", "at_bound", "pinned", "BOUND_TOLERANCE"]

LEVEL = 0.80  # the level of the legacy ``profile.interval`` table and of validate()'s low/high
N0 = 10.0  # prior weight in rows: a level with n rows gets weight n / (n + N0)
MIN_ROWS = 2  # a kind needs this many cross-validated rows to get intervals at all
GRID = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5,
        0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995)
# efficiencies that scale each kind's dominant time term with elasticity 1, in the order of the
# calibration stages that fit them: a later one, fitted on the kind's own rows with the earlier ones
# held, absorbs their error (see _kind_variance)
DEPENDS = {
    "gemm": ("gemm_tensor_core_efficiency",),
    "memcpy": ("memory_efficiency",),
    "collective": ("link_bandwidth_efficiency",),
    "train": ("gemm_tensor_core_efficiency", "sustained_clock_fraction"),
}
# a family of a kind whose dominant term another efficiency scales: an FP32 GEMM (TF32 off) runs on
# the CUDA cores, at gemm_cuda_core_efficiency, whatever the tensor-core value
FAMILY_DEPENDS = {("gemm", "cuda-core"): ("gemm_cuda_core_efficiency",)}
GEMM_UNITS = ("cuda-core", "tensor-core")  # the family of a GEMM row: the unit its dtype runs on
FEATURES = ("num_gpus", "model_params", "seq_len")  # scale axes, compared in decades (log10)
ASSUMABLE = ("framework", "fabric")  # inputs a user may leave to a default; each has its tau
_MAD_TO_SIGMA = 1.4826  # sigma of a normal = 1.4826 x its median absolute deviation
_MIN_SPREAD_SHARE = 0.25  # the residual variance v keeps at least this share of the raw spread
CROSS_FIT_FOLDS = 5  # folds of the cross-fitted standardized residuals
HOST_STATED_LOG_CHANGE = math.log(1.05)  # confidence() names the host time when one error moves the step by this
NEAREST_KINDS = ("train",)  # kinds whose held-out rows the interval model keeps for confidence()'s nearest rows
HELD_OUT_COLUMNS = ("id", "kind", "gpu", "architecture", "framework", "metric", "measured", "predicted", "num_gpus",
                    "model_params", "seq_len")
HOST_COLUMN = "host_log_sensitivity"  # validate()'s column of each train row's chain.host_log_sensitivity
# validate()'s column (and a Choice's result key) of the log change of the step when its assumed attention
# kernel is the other one (set by perfmodel.choice.choose_plans: > 0 where fused was assumed, < 0 where
# unfused was; 0 when the attention kernel was known)
ATTENTION_COLUMN = "attention_log_sensitivity"
SHARE_COLUMNS = tuple(f"share_{group}" for group in STEP_SHARES)  # validate()'s columns of the chain's step shares
TERM_COLUMNS = (HOST_COLUMN, ATTENTION_COLUMN, *SHARE_COLUMNS)  # per-row interval inputs besides the value
# ASSUMPTION (shown by confidence()): an attention kernel assumed for a framework that fuses it in some
# versions only is the other kernel with probability 1/2 -- no row with an unstated attention kernel
# tested it (the assumed kernel is the likelier one: perfmodel.vocabulary.FRAMEWORK_FLASH_ATTENTION_ASSUMED)
OTHER_KERNEL_PROBABILITY = 0.5
ATTENTION_STATED_LOG_CHANGE = math.log(1.05)  # confidence() names the assumed attention when it moves the step this much
# ASSUMPTION (shown by confidence()): with too few rows to fit it, a share of the step that no fitted
# row tested is uncertain by x2 at one standard error, the spread assumed for a host dispatch time no
# row determined (perfmodel.models.compute.HOST_PRIOR_LOG_SIGMA)
SHARE_PRIOR_LOG_SIGMA = math.log(2.0)
MIN_SHARE_ROWS = 5  # cross-validated rows beyond the other source families' range needed to fit s_u
SHARE_ROW_THRESHOLD = 0.01  # a row counts as beyond the range when its untested share exceeds this
SHARE_STATED = 0.05  # confidence() names a step share that exceeds the fitted range by this much
SHARE_LABELS = {"share_layer_comm": "tensor/context/expert-parallel communication",
                "share_data_comm": "data-parallel communication", "share_pipeline": "pipeline bubble and transfers",
                "share_step_work": "optimizer, offload, fixed step overhead and input"}
BOUND_TOLERANCE = 1e-3  # a fitted value within this share of its parameter's range of a bound is at it


def rate_ratio(metric, measured, predicted):
    """measured / predicted for rate metrics, predicted / measured for time metrics."""
    is_time = np.isin(np.asarray(metric), TIME_METRICS)
    return np.where(is_time, predicted / measured, measured / predicted)


def depends(kind: str, family=None) -> tuple[str, ...]:
    """The efficiencies that scale the dominant time term of ``kind``'s rows of ``family``
    (:data:`FAMILY_DEPENDS`, else :data:`DEPENDS` of the kind), in calibration-stage order."""
    return FAMILY_DEPENDS.get((kind, family), DEPENDS.get(kind, ()))


def gemm_unit(dtype) -> str | None:
    """'cuda-core' for a dtype whose GEMMs run on the CUDA cores (fp32, TF32 off:
    :data:`perfmodel.models.gemm.CUDA_CORE_DTYPES`), 'tensor-core' for the others, None when unknown."""
    from perfmodel.models.gemm import CUDA_CORE_DTYPES

    if not isinstance(dtype, str) or not dtype.strip():
        return None
    return GEMM_UNITS[0] if dtype.strip().lower() in CUDA_CORE_DTYPES else GEMM_UNITS[1]


def _architecture(catalog, name) -> str | None:
    try:
        return catalog.gpu(name).architecture
    except (ValueError, TypeError):
        return None


def canonical_gpus(gpus, catalog):
    """Catalog name of each GPU name or alias (the name itself when the catalog does not know it),
    so a row's GPU and an estimate's ``cluster.gpu.name`` compare equal."""
    def name(value):
        try:
            return catalog.gpu(value).name
        except (ValueError, TypeError):
            return value

    names = {value: name(value) for value in set(gpus)}
    return [names[value] for value in gpus]


def architectures(gpus, catalog):
    """GPU architecture of each GPU name (None when the catalog does not know it)."""
    names = {name: _architecture(catalog, name) for name in set(gpus)}
    return [names[name] for name in gpus]


def framework_family(value) -> str | None:
    """'PyTorch (NGC 22.11)' -> 'pytorch', 'Megatron-LM + DeepSpeed' -> 'megatron-lm': the first
    word of a free-text framework field, lower case (None when missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or not str(value).strip():
        return None
    return re.split(r"[\s(/+,]", str(value).strip(), maxsplit=1)[0].lower()


BUCKETS = ("1", "2-8", "9-64", "65-512", "513+", "?")  # GPU-count buckets ('?': unknown count)


def _bucket_codes(num_gpus) -> np.ndarray:
    n = np.asarray(num_gpus, dtype=float)
    codes = np.searchsorted(np.array([1.5, 8.5, 64.5, 512.5]), np.nan_to_num(n, nan=1.0))
    return np.where(np.isfinite(n), codes, len(BUCKETS) - 1)


def gpu_bucket(num_gpus):
    """GPU-count bucket of each estimate: '1', '2-8' (one node), '9-64', '65-512', '513+', '?'."""
    return np.asarray(BUCKETS, dtype=object)[_bucket_codes(num_gpus)]


def _workload_facts(rows) -> tuple[np.ndarray, np.ndarray]:
    """(parameter count, workload family) of each row's model: the ``params`` and ``family``
    ('transformer' | 'cnn') of the workload the train predictor builds from the row
    (:mod:`perfmodel.calibration.row_workload`, the same ``Workload`` attributes that
    :func:`perfmodel.estimate` passes for an estimate, so rows and estimates are placed alike);
    NaN and None for rows without a model or whose model cannot be built."""
    from perfmodel.calibration.row_workload import workload_of_spec, workload_spec

    params = np.full(len(rows), np.nan)
    family = np.full(len(rows), None, dtype=object)
    if "model" not in rows:
        return params, family
    known: dict[str, tuple[float, str | None]] = {}
    named = np.flatnonzero(rows["model"].map(lambda m: isinstance(m, str) and bool(m.strip())).to_numpy(dtype=bool))
    for i in named:
        row = rows.iloc[i]
        try:
            spec = workload_spec(row).model_dump_json()
        except ValueError:
            continue
        if spec not in known:
            try:
                workload = workload_of_spec(spec)
                known[spec] = (float(workload.params), workload.family)
            except (ValueError, KeyError, TypeError):
                known[spec] = (np.nan, None)
        params[i], family[i] = known[spec]
    return params, family


# kinds whose rows come from many sources: source-grouped cross-validation holds out all rows of
# a source (the ``source`` field: one table or section of a document, one results file: one
# campaign on one machine and software stack).  The other kinds (GEMM and copy micro-benchmarks:
# almost every GEMM row comes from one source, NeuSight) would give one fold per source,
# meaningless there: they are grouped by experiment.
SOURCE_GROUPED_KINDS = ("train", "collective")


def _intra_links(measurements, catalog):
    """Each row's intra-node link as the train predictor times it: the ``intra`` column, or the GPU's
    PCIe link where the row's harness disables NCCL peer-to-peer
    (:func:`perfmodel.calibration.row_workload.row_intra`)."""
    import pandas as pd

    from perfmodel.calibration.row_workload import row_intra
    from perfmodel.vocabulary import harness_of

    intra = (measurements["intra"] if "intra" in measurements
             else pd.Series(np.nan, index=measurements.index)).astype(object)
    if "software" not in measurements:
        return intra
    for index in measurements.index[measurements["software"].map(lambda text: harness_of(text) is not None)]:
        try:
            intra.at[index] = row_intra(measurements.loc[index], catalog)[0]
        except ValueError:  # a GPU the catalog does not know: the row is not predicted either
            continue
    return intra


def row_context(measurements, catalog):
    """The context columns of measurement rows (same index): gpu, architecture, num_gpus,
    model_params, family (a training row's workload's: transformer or cnn; a GEMM row's
    :func:`gemm_unit`: an FP32 GEMM on an architecture whose rows are all tensor-core GEMMs is a
    regime the rows never tested), seq_len, framework (family), fabric (the inter-node link, else
    the intra-node one), source."""
    import pandas as pd

    def column(name):
        return measurements[name] if name in measurements else pd.Series(np.nan, index=measurements.index)

    fabric = column("inter").where(column("inter").notna(), _intra_links(measurements, catalog))
    params, family = _workload_facts(measurements)
    if "dtype" in measurements and "kind" in measurements:
        gemm = (measurements["kind"] == "gemm").to_numpy()
        family[gemm] = [gemm_unit(dtype) for dtype in measurements["dtype"].to_numpy(dtype=object)[gemm]]
    return pd.DataFrame({
        "gpu": canonical_gpus(measurements["gpu"], catalog),
        "architecture": architectures(measurements["gpu"], catalog),
        "num_gpus": pd.to_numeric(column("num_gpus"), errors="coerce"),
        "model_params": params,
        "family": family,
        "seq_len": pd.to_numeric(column("seq_len"), errors="coerce"),
        "framework": column("framework").map(framework_family),
        "fabric": fabric.astype(object).where(fabric.notna(), None),
        "source": column("source"),
    }, index=measurements.index)


# ---------------------------------------------------------------- parameter uncertainty (p)

def _relative(profile, key: str) -> float | None:
    """The squared relative standard error of ``key`` (:meth:`CalibrationProfile.relative_error`)."""
    error = profile.relative_error(key)
    return None if error is None else error ** 2


def at_bound(profile, key: str) -> bool:
    """Whether the profile's value of ``key`` sits at a bound of its parameter (within
    :data:`BOUND_TOLERANCE` of the range)."""
    value, parameter = profile.values.get(key), PARAMETERS.get(split_key(key)[0])
    if value is None or parameter is None:
        return False
    margin = BOUND_TOLERANCE * (parameter.high - parameter.low)
    return bool(value <= parameter.low + margin or value >= parameter.high - margin)


def _relative_variance(profile, name: str, group) -> float:
    """(standard error / value)^2 of ``name`` for ``group``.  A group fitted on rows of its own:
    its own standard error.  A group without rows (or no group given, as for an estimate whose
    link kind is not known here): the predictive variance of a new group, the spread of the fitted
    groups' values (the pooled key's uncertainty, see ``fit.pool_groups``) plus their mean squared
    relative error.  A parameter the fit never touched: 0 (its prior error is in the residuals)."""
    own = _relative(profile, f"{name}[{group}]") if group else None
    if own is not None:
        return own
    fitted = [_relative(profile, key) for key in profile.values if key.startswith(f"{name}[")]
    fitted = [value for value in fitted if value is not None]
    pooled = _relative(profile, name) or 0.0
    return pooled + (float(np.mean(fitted)) if fitted else 0.0)


def pinned(profile, kind: str, architecture, family=None) -> list[str]:
    """Keys of :func:`depends` of ``kind`` (and ``family``) whose value for ``architecture`` sits at
    a bound (link kinds are not known from an architecture: their pooled key is checked)."""
    keys = []
    for name in depends(kind, family):
        per_architecture = PARAMETERS.get(name) is None or PARAMETERS[name].per == "architecture"
        key = profile.applying_key(name, architecture if per_architecture else None)
        if at_bound(profile, key):
            keys.append(key)
    return keys


def _factorize(values, shape=None):
    """(codes shaped like ``values`` broadcast to ``shape``, unique values): a factorization that
    handles None/NaN as one more value (None), so per-estimate work is done once per distinct
    value."""
    values = np.asarray(values, dtype=object)
    shape = values.shape if shape is None else shape
    if values.ndim == 0:
        value = values.item()
        return np.zeros(shape, dtype=np.intp), [None if value != value else value]
    import pandas as pd

    codes, uniques = pd.factorize(values.ravel(), use_na_sentinel=True)
    uniques = list(uniques)
    if (codes < 0).any():
        uniques.append(None)
        codes = np.where(codes < 0, len(uniques) - 1, codes)
    return np.broadcast_to(codes.reshape(values.shape), shape), uniques


def parameter_variance(profile, kind, architecture, family=None) -> np.ndarray:
    """``p``: :func:`_kind_variance` per estimate (arrays of kind, architecture and family)."""
    shape = np.broadcast_shapes(np.shape(kind), np.shape(architecture), np.shape(family))
    return _per_place(lambda k, a, f: _kind_variance(profile, k, a, f), kind, architecture, family, shape)


def _per_place(function, kind, architecture, family, shape) -> np.ndarray:
    """``function(kind, architecture, family)`` per estimate, evaluated once per distinct triple."""
    kind_codes, kinds = _factorize(kind, shape)
    arch_codes, archs = _factorize(architecture, shape)
    family_codes, families = _factorize(family, shape)
    table = np.array([[[function(k, a, f) for f in families] for a in archs] for k in kinds],
                     dtype=float).reshape(len(kinds), len(archs), len(families))
    return table[kind_codes, arch_codes, family_codes]


def host_variance(host_log_sensitivity, shape=None) -> np.ndarray:
    """The host dispatch time's share of ``p``: the square of the log change of the estimate when
    the host is one standard error slower (:func:`perfmodel.chain.host_log_sensitivity`; delta
    method with the elasticity measured over one standard error, since the step is a max of GPU
    and host time and its derivative at the estimate can be 0 while a slower host would bind).
    Missing (NaN) counts as 0: a row or kind the host does not time."""
    value = np.nan_to_num(np.asarray(host_log_sensitivity, dtype=float), nan=0.0) ** 2
    return np.broadcast_to(value, shape if shape is not None else value.shape).astype(float)


def attention_variance(attention_log_sensitivity, shape=None) -> np.ndarray:
    """An assumed attention kernel's share of ``p``: the step's log time changes by ``d`` with
    probability ``q`` (the other kernel) and not otherwise, a two-point distribution of variance
    ``q (1 - q) d^2`` about its mean ``q d`` (:func:`attention_shift`; ``q`` =
    :data:`OTHER_KERNEL_PROBABILITY`, ``d`` the estimate's :data:`ATTENTION_COLUMN`; NaN counts as 0:
    attention known or absent)."""
    d = np.nan_to_num(np.asarray(attention_log_sensitivity, dtype=float), nan=0.0)
    value = OTHER_KERNEL_PROBABILITY * (1.0 - OTHER_KERNEL_PROBABILITY) * d ** 2
    return np.broadcast_to(value, shape if shape is not None else value.shape).astype(float)


def attention_shift(attention_log_sensitivity, shape=None) -> np.ndarray:
    """The mean of that two-point distribution in rate orientation, ``-q d``: the estimate is the
    assumed kernel's step, so the interval is centred ``q d`` towards the other one (the variance
    of :func:`attention_variance` is about this mean, so the interval spans both cases' middle)."""
    d = np.nan_to_num(np.asarray(attention_log_sensitivity, dtype=float), nan=0.0)
    return np.broadcast_to(-OTHER_KERNEL_PROBABILITY * d, shape if shape is not None else d.shape).astype(float)


def untested_share(shares, share_range, shape=()) -> np.ndarray:
    """``u``: the sum over the step-share columns of ``share_range`` (column -> the largest share of
    the fitted rows) of each estimate's share beyond it, ``sum_c max(0, s_c - max_c)``.
    ``shares`` maps a :data:`SHARE_COLUMNS` name to the estimates' shares (arrays broadcast; a
    missing column or NaN counts as within the range)."""
    total = np.zeros(shape)
    for column, top in share_range.items():
        value = (shares or {}).get(column)
        if value is not None:
            total = total + np.maximum(np.nan_to_num(np.asarray(value, dtype=float), nan=0.0) - top, 0.0)
    return total


def source_families(sources) -> np.ndarray:
    """Each row's source family (:func:`perfmodel.calibration.measurements.source_group`: the
    first word of ``source``, one repository's or one author's runs; None without a source)."""
    from perfmodel.calibration.measurements import source_group

    return np.array([source_group(s) if isinstance(s, str) and s.strip() else None for s in sources], dtype=object)


def _share_term(shares, groups, r, bias, variance) -> tuple[dict, np.ndarray]:
    """(the kind's ``shares`` entry, each row's untested share ``u``) from its cross-validated rows.

    ``shares``: the rows' step shares (column -> array); ``groups``: each row's source family
    (:func:`source_families`; None: unknown, no row is beyond a range); ``r``, ``bias``,
    ``variance``: the rows' log ratios, the bias and the variance (v + p) the nodes give them.
    ``range``: each column's largest share; ``u`` of a row is against the range of the rows of
    the *other* families: how far beyond anything other labs' runs showed the fit this row's step
    makeup is (a user's run is a family the fit never saw).  ``log_sigma`` (``s_u``) maximizes
    the normal likelihood of ``r ~ N(bias, variance + (s_u u)^2)``; with fewer than
    :data:`MIN_SHARE_ROWS` rows beyond their range it is the prior :data:`SHARE_PRIOR_LOG_SIGMA`."""
    from scipy.optimize import minimize_scalar

    share_range = {c: float(np.nanmax(v)) if np.isfinite(v).any() else 0.0 for c, v in shares.items()}
    u = np.zeros(r.size)
    if groups is not None:
        for group in set(groups) - {None}:
            held = groups == group
            if held.all():
                continue
            fitted = {c: float(np.nanmax(np.where(held, np.nan, v))) if np.isfinite(v[~held]).any() else 0.0
                      for c, v in shares.items()}
            u[held] = untested_share({c: v[held] for c, v in shares.items()}, fitted, (int(held.sum()),))
    beyond = int((u > SHARE_ROW_THRESHOLD).sum())
    entry = {"range": share_range, "log_sigma": SHARE_PRIOR_LOG_SIGMA, "rows_beyond": beyond, "fitted": False}
    if beyond >= MIN_SHARE_ROWS:
        def negative_log_likelihood(log_s):
            total = variance + (math.exp(log_s) * u) ** 2
            return 0.5 * float(np.sum(np.log(total) + (r - bias) ** 2 / total))

        best = minimize_scalar(negative_log_likelihood, bounds=(math.log(1e-3), math.log(20.0)), method="bounded")
        entry.update(log_sigma=float(math.exp(best.x)), fitted=True)
    return entry, u


def _kind_variance(profile, kind: str, architecture, family=None) -> float:
    """``p`` of one kind (and family) on one architecture: the squared relative standard errors of
    its :func:`depends`, last stage first, stopping at a value fitted on the architecture's own rows.

    The stages fit in sequence, each holding the values of the earlier ones: the training stage
    fits ``sustained_clock_fraction[arch]`` with the kernel stage's
    ``gemm_tensor_core_efficiency[arch]`` held, so on an architecture with training rows the clock
    absorbs the efficiency's error and the product that scales a step is known to the clock's own
    standard error (conditional on the held value: the posterior of the product given the rows;
    Bates & Watts 1988, Sec. 2.3).  Summing both marginal errors counted the efficiency twice: on
    Volta, whose tensor-core efficiency no GEMM row measures (pooled, x1.5 uncertain), every
    training interval was 3.1 wide while its rows spread 13 % in-sample (median absolute log error).
    A partially pooled value (``profile.pooled``: refitted on the architecture's rows with its prior
    centred on the typical architecture) stops the walk as well: it too was fitted with the earlier
    value held, and its own standard error, wider for the prior's pull, says what is left.  Summing
    both there made Volta's training intervals 2.7 wide at 0.95 coverage held out by source (its
    clock, pushed against its bound, came out pooled), and, through the kind's standardized
    residuals that every architecture shares, Ampere's and Hopper's too narrow (0.73 and 0.77).
    A value at a bound of its range stops the walk too but adds nothing: its Laplace error means
    nothing there, and :func:`_bound_variance` charges its prior instead.  An architecture whose last
    value no row of its own fitted (kept at its prior, or none) sums every term."""
    total = 0.0
    for name in reversed(depends(kind, family)):
        per_architecture = PARAMETERS.get(name) is None or PARAMETERS[name].per == "architecture"
        group = architecture if per_architecture else None  # link kinds are not known from an architecture
        key = f"{name}[{group}]" if group else None
        own = (key is not None and key in profile.values and profile.relative_error(key) is not None
               and not profile.prior_only(name, group))
        if own and at_bound(profile, key):
            return total
        total += _relative_variance(profile, name, group)
        if own:
            return total
    return total


def _bound_variance(profile, kind, architecture, family=None) -> float:
    """The sum of ``prior_log_sigma^2`` over the :func:`depends` values at a bound (:func:`pinned`).
    The Laplace standard error assumes a posterior normal around an interior optimum; at a bound the
    fit wanted to go beyond it by an amount the curvature does not tell, so the only statement left
    about the value is its prior (elasticity 1: the prior's log-variance is the estimate's).
    :func:`_evaluate` weights it by ``n0 / (n + n0)``."""
    return sum(PARAMETERS[split_key(key)[0]].prior_log_sigma ** 2
               for key in pinned(profile, kind, architecture, family))


# ---------------------------------------------------------------- fitting the model

def _robust(values) -> tuple[float, float]:
    """(median, robust variance (1.4826 MAD)^2) of finite ``values``."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0, 0.0
    centre = float(np.median(values))
    return centre, float((_MAD_TO_SIGMA * np.median(np.abs(values - centre))) ** 2)


def _node(r, p, parent=None, n0=N0, sources=None) -> dict:
    """Bias and residual variance of a group of rows, shrunk towards ``parent`` (n / (n + n0));
    with ``sources`` (each row's source), the variance adds the between-source variance of the
    sources' medians, the part of a new source's error that rows of known sources hide."""
    n = int(np.isfinite(r).sum())
    bias, spread = _robust(r)
    if sources is not None:
        spread += _between_variance(r, list(sources))
    variance = max(spread - float(np.nanmean(p)) if n else 0.0, _MIN_SPREAD_SHARE * spread)
    if parent is not None:
        weight = n / (n + n0)
        bias = weight * bias + (1 - weight) * parent["bias"]
        variance = weight * variance + (1 - weight) * parent["variance"]
    return {"n": n, "bias": bias, "variance": variance}


def _between_variance(r, groups) -> float:
    """tau^2: variance of the group medians beyond what their sampling noise explains
    (method of moments, var(median) ~ (pi/2) s^2 / n), over groups of >= 3 rows; 0 with < 2."""
    medians, noise = [], []
    for name in sorted({g for g in groups if g is not None}, key=str):  # sorted: one sum in every process
        values = r[np.array([g == name for g in groups])]
        values = values[np.isfinite(values)]
        if values.size >= 3:
            centre, spread = _robust(values)
            medians.append(centre)
            noise.append(math.pi / 2 * spread / values.size)
    if len(medians) < 2:
        return 0.0
    return float(max(np.var(medians, ddof=1) - np.mean(noise), 0.0))


def _trend(r, x) -> dict | None:
    """Fitted range [lo, hi] of log10 x, and the residual trend per decade sqrt(beta^2 + se^2)."""
    ok = np.isfinite(r) & np.isfinite(x) & (x > 0)
    if ok.sum() < 3:
        return None
    logx = np.log10(x[ok])
    lo, hi = float(logx.min()), float(logx.max())
    if hi - lo < 1e-9:
        return {"range": [lo, hi], "per_decade": 0.0}
    design = np.column_stack([np.ones_like(logx), logx])
    coef, *_ = np.linalg.lstsq(design, r[ok], rcond=None)
    residual = r[ok] - design @ coef
    dof = max(int(ok.sum()) - 2, 1)
    covariance = np.linalg.pinv(design.T @ design) * float(residual @ residual) / dof
    slope_se = math.sqrt(max(covariance[1, 1], 0.0))
    return {"range": [lo, hi], "per_decade": float(math.hypot(coef[1], slope_se))}


def _student_t(probabilities, dof):
    from scipy.stats import t

    return t.ppf(probabilities, df=max(dof, 1))


def _rows(values, mask):
    """``values[mask]``, or None when ``values`` is None."""
    return None if values is None else values[mask]


def _branch(parent: dict, r, p, arch, bucket, n0, sources=None) -> dict:
    """``parent``'s architectures' nodes and their GPU-count buckets' nodes (each shrunk towards
    the node above it), in ``parent["architectures"]``."""
    parent["architectures"] = {}
    for name in sorted({a for a in arch if a is not None}):
        in_arch = arch == name
        node = _node(r[in_arch], p[in_arch], parent, n0, _rows(sources, in_arch))
        node["buckets"] = {b: _node(r[in_arch & (bucket == b)], p[in_arch & (bucket == b)], node, n0,
                                    _rows(sources, in_arch & (bucket == b)))
                           for b in sorted(set(bucket[in_arch]))}
        parent["architectures"][name] = node
    return parent


def _families(info) -> np.ndarray:
    """Each row's workload family from a :func:`row_context` frame (None where unknown or absent)."""
    if "family" not in info:
        return np.full(len(info), None, dtype=object)
    return np.array([f if isinstance(f, str) else None for f in info["family"]], dtype=object)


def _tree(r, p, arch, bucket, pooled, n0, family=None, sources=None, gpu=None) -> dict:
    """The kind's node, its architectures' nodes and their GPU-count buckets' nodes; with
    ``family`` (each row's workload family, None: unknown), also ``families``: a node per family
    with its own architectures and buckets below it, the nearest rows of an estimate whose
    family is known (the shipped fit's residuals, training rows held out by source: log
    variance 0.095 for convolutional networks, 0.010 for transformers).  ``sources`` (each row's
    source, or None) adds each node's between-source variance (:func:`_node`); ``gpu`` (each row's
    GPU, or None) keeps the rows per GPU in ``gpus`` of the kind's node and of each family's."""
    entry = _branch({**_node(r, p, pooled, n0, sources), "tau": {}, "scale": {}}, r, p, arch, bucket, n0,
                    sources)
    if gpu is not None:
        entry["gpus"] = _counts(gpu)
    if family is not None:
        entry["families"] = {}
        for name in sorted({f for f in family if f is not None}):
            mine = family == name
            entry["families"][name] = _branch(_node(r[mine], p[mine], entry, n0, _rows(sources, mine)), r[mine],
                                              p[mine], arch[mine], bucket[mine], n0, _rows(sources, mine))
            if gpu is not None:
                entry["families"][name]["gpus"] = _counts(gpu[mine])
    return entry


def _measured(entry: dict, kind: str, family) -> dict:
    """The node whose ``architectures`` and ``gpus`` say whether an estimate's architecture and
    GPU were measured: for a kind whose families run on different units (:data:`FAMILY_DEPENDS`:
    GEMMs on CUDA cores or tensor cores), the estimate's family's node (an FP32 GEMM on a GPU
    measured only with tensor-core GEMMs is a GPU never measured in that regime); else the kind's."""
    if family is not None and any(k == kind for k, _ in FAMILY_DEPENDS):
        return entry.get("families", {}).get(family, {"architectures": {}, "gpus": {}})
    return entry


def _extrapolation(tau_architecture, tau_gpu, n0, arch_seen, gpu_rows):
    """Extrapolation variance of estimates: an architecture with no rows adds ``tau_architecture``;
    a GPU model with ``gpu_rows`` rows adds ``tau_gpu * n0 / (gpu_rows + n0)`` (all of it for a GPU
    never measured, shrinking as its rows grow, the weight of the partial pooling of
    :func:`_node`).  The two are not added: the leave-one-GPU-out rows that measure ``tau_gpu`` are
    mostly of GPUs alone in their architecture, so it already holds the novelty of an
    architecture; an estimate gets the larger."""
    gpu_term = tau_gpu * n0 / (np.asarray(gpu_rows, dtype=float) + n0)
    return np.maximum(np.where(arch_seen, 0.0, tau_architecture), gpu_term)


def _gpu_rows(counts: dict, gpus) -> np.ndarray:
    return np.array([counts.get(g, 0) if g is not None else np.inf for g in gpus], dtype=float)


def _cross_fitted_z(r, p, arch, bucket, pooled, n0, tau_architecture, gpu=None, tau_gpu: float = 0.0,
                    groups=None, folds: int = CROSS_FIT_FOLDS, family=None, sources=None, kind=None) -> np.ndarray:
    """Standardized residuals ``(r - b) / sigma`` of each row against nodes fitted on the other
    ``folds - 1`` parts of the rows (cross-fitting), so the quantiles measure the spread of a row
    the nodes did not see, not the smaller in-sample spread around nodes fitted to it (NaN where a
    row has no finite residual).  ``groups``
    (the source of each row; None: each row alone) keep rows together, so with sources the
    quantiles are those of a row from a *source* the nodes did not see, which is what every
    user's run is.  A row whose architecture or GPU the other parts lack gets the extrapolation
    term an estimate would (:func:`_measured`: for ``kind``'s families that run on different units,
    the architectures and GPUs of the row's family).  ``sources`` (each row's source, or None)
    gives the nodes their between-source variance, as :func:`fit_interval_model` does."""
    import pandas as pd

    codes = np.arange(r.size) if groups is None else pd.factorize(_source_labels(groups))[0]
    order = (np.random.default_rng(0).permutation(codes.max() + 1 if r.size else 0) % folds)[codes]
    codes = np.array([BUCKETS.index(b) for b in bucket], dtype=np.intp)
    gpu = np.full(r.size, None, dtype=object) if gpu is None else gpu
    family = np.full(r.size, None, dtype=object) if family is None else family
    z = np.full(r.size, np.nan)
    for fold in range(min(folds, r.size)):
        held = order == fold
        if held.all():
            continue
        entry = _tree(r[~held], p[~held], arch[~held], bucket[~held], pooled, n0, family[~held],
                      _rows(sources, ~held), gpu[~held])
        bias, variance = _lookup(entry, arch[held], codes[held], family[held])
        places = [_measured(entry, kind, f) for f in family[held]]
        seen = np.array([a in place["architectures"] for a, place in zip(arch[held], places)], dtype=bool)
        rows = np.array([_gpu_rows(place.get("gpus", {}), [g])[0] for g, place in zip(gpu[held], places)])
        extra = _extrapolation(tau_architecture, tau_gpu, n0, seen, rows)
        z[held] = (r[held] - bias) / np.sqrt(variance + p[held] + extra)
    return z


def _counts(values) -> dict:
    """{value: rows} of the non-missing values."""
    import pandas as pd

    return {str(k): int(n) for k, n in pd.Series(values, dtype=object).dropna().value_counts().items()}


def _excess(frame, kind, entry, profile, pooled_parameters: bool) -> float | None:
    """Variance of the log ratios of the held-out rows of ``kind`` in ``frame`` (a leave-group-out
    frame) beyond what the k-fold model gives them: robust spread plus squared shift of their
    median from the kind's bias, less the kind's residual variance and, when
    ``pooled_parameters``, the pooled (new-architecture) parameter variance; None with fewer than
    3 rows.  The leave-one-GPU-out excess subtracts no parameter variance: its rows are fp32 GEMMs
    that run on CUDA cores, not on the tensor-core efficiency that ``p`` charges a GEMM, so their
    ``p`` would explain away an error it has no part in; the refits' own parameter error is part
    of what the excess measures."""
    held = frame[(frame["kind"] == kind) & frame["predicted"].notna() & (frame["measured"] > 0)]
    if len(held) < 3:
        return None
    r = np.log(rate_ratio(held["metric"], held["measured"].to_numpy(float), held["predicted"].to_numpy(float)))
    centre, spread = _robust(r)
    p = float(parameter_variance(profile, kind, None)) if pooled_parameters else 0.0
    return float(spread + (centre - entry["bias"]) ** 2 - entry["variance"] - p)


def fit_interval_model(cv_frame, profile, context, unseen=None, unseen_gpu=None, n0: float = N0) -> dict:
    """The interval model (a JSON-able dict) from cross-validated residuals.

    ``cv_frame``: held-out rows with kind, metric, measured, predicted (from
    :func:`perfmodel.calibration.fit.cross_validate`); ``profile``: the fitted profile (its
    uncertainty gives ``p``); ``context``: :func:`row_context` of the measurements (indexed like
    ``cv_frame``); ``unseen``: optionally a leave-one-architecture-out frame of the same rows
    (:func:`perfmodel.calibration.coverage.leave_group_out`), whose spread beyond the k-fold one
    and beyond a new architecture's parameter variance bounds ``tau^2`` of the architecture from
    below; ``unseen_gpu``: optionally a leave-one-GPU-out frame (of GEMM rows:
    :func:`perfmodel.calibration.coverage.leave_gpu_out`), whose spread beyond the k-fold one is
    ``tau^2`` of a GPU model without rows (``tau["gpu"]``) for its kinds and for every kind whose
    :data:`DEPENDS` shares a parameter with them (a new GPU's GEMM efficiency error reaches a
    training step with elasticity at most 1).  Each kind also keeps ``gpus``: its rows per GPU."""
    scored = cv_frame[cv_frame["predicted"].notna() & (cv_frame["measured"] > 0)]
    info = context.loc[scored.index]
    r_all = np.log(rate_ratio(scored["metric"], scored["measured"].to_numpy(float),
                              scored["predicted"].to_numpy(float)))
    arch_all = info["architecture"].to_numpy(dtype=object)
    gpu_all = info["gpu"].to_numpy(dtype=object) if "gpu" in info else np.full(len(info), None, dtype=object)
    source_all = info["source"].to_numpy(dtype=object) if "source" in info else None
    family_all = _families(info)
    kinds = scored["kind"].to_numpy(dtype=object)
    # the sources of the rows held out by source (their nodes add the between-source variance)
    sources = (np.where(np.isin(kinds, SOURCE_GROUPED_KINDS), source_all, None).astype(object)
               if source_all is not None else None)
    p_all = parameter_variance(profile, kinds, arch_all, family_all)
    if HOST_COLUMN in scored:
        p_all = p_all + host_variance(scored[HOST_COLUMN].to_numpy(dtype=float))
    if ATTENTION_COLUMN in scored:  # a row whose attention was assumed: its error about the two-point mean
        p_all = p_all + attention_variance(scored[ATTENTION_COLUMN].to_numpy(dtype=float))
        r_all = r_all - attention_shift(scored[ATTENTION_COLUMN].to_numpy(dtype=float))
    bucket_all = gpu_bucket(info["num_gpus"].to_numpy(dtype=float))
    model: dict = {"version": 2, "n0": n0, "grid": list(GRID), "kinds": {}}
    gpu_measured = set()
    pooled = _node(r_all, p_all)  # every kind together: the prior of a kind with few rows
    for kind in sorted(set(kinds)):
        mask = kinds == kind
        r, p, arch, bucket, family = r_all[mask], p_all[mask], arch_all[mask], bucket_all[mask], family_all[mask]
        if np.isfinite(r).sum() < MIN_ROWS:
            continue
        entry = _tree(r, p, arch, bucket, pooled, n0, family, _rows(sources, mask), gpu_all[mask])
        shares = {c: scored[c].to_numpy(dtype=float)[mask] for c in SHARE_COLUMNS if c in scored}
        if shares and any(np.isfinite(v).any() for v in shares.values()):
            # a step makeup beyond the fitted rows' (train rows): its term joins p, and the nodes
            # are refitted so that v is the spread beyond it
            bias, variance = _lookup(entry, arch, np.array([BUCKETS.index(b) for b in bucket], dtype=np.intp),
                                     family)
            groups = source_families(info["source"])[mask] if "source" in info else None
            share_entry, u = _share_term(shares, groups, r, bias, variance + p)
            p = p + (share_entry["log_sigma"] * u) ** 2
            p_all[mask] = p
            entry = _tree(r, p, arch, bucket, pooled, n0, family, _rows(sources, mask), gpu_all[mask])
            entry["shares"] = share_entry
        entry["tau"]["architecture"] = _between_variance(r, list(arch))
        if unseen is not None:
            excess = _excess(unseen, kind, entry, profile, pooled_parameters=True)
            if excess is not None:
                entry["tau"]["architecture"] = max(entry["tau"]["architecture"], excess)
        entry["tau"]["gpu"] = 0.0
        if unseen_gpu is not None:
            excess = _excess(unseen_gpu, kind, entry, profile, pooled_parameters=False)
            if excess is not None:
                entry["tau"]["gpu"] = max(excess, 0.0)
                gpu_measured.add(kind)
        for name in ASSUMABLE:
            entry["tau"][name] = _between_variance(r, list(info[name].to_numpy(dtype=object)[mask]))
        for feature in FEATURES:
            trend = _trend(r, info[feature].to_numpy(dtype=float)[mask])
            if trend is not None:
                entry["scale"][feature] = trend
        model["kinds"][kind] = entry
    _share_gpu_term(model, gpu_measured)
    model["held_out"] = _held_out_table(scored, info, NEAREST_KINDS)
    for kind, entry in model["kinds"].items():
        # standardized residuals -> shape of the distribution, shrunk to Student-t when rows are few
        mask = kinds == kind
        # cross-fit by source where the kind has enough sources to hold some out (else by row)
        by_source = (source_all is not None and kind in SOURCE_GROUPED_KINDS
                     and len(_counts(source_all[mask])) >= CROSS_FIT_FOLDS)
        groups = source_all[mask] if by_source else None
        z = _cross_fitted_z(r_all[mask], p_all[mask], arch_all[mask], bucket_all[mask], pooled, n0,
                            entry["tau"]["architecture"], gpu_all[mask], entry["tau"]["gpu"], groups,
                            family=family_all[mask], sources=_rows(sources, mask), kind=kind)
        finite = np.isfinite(z)
        # held out by source, every source counts once: a user's run (a held-back set) is one new
        # source, so the quantiles are those of a row of a random source, not of a random row of the
        # sources at hand, where the largest (and best-fitted) ones would set the width
        weights = _source_weights(groups)[finite] if by_source else None
        z = z[finite]
        t = _student_t(np.array(GRID), z.size - 1)
        weight = z.size / (z.size + n0)
        empirical = _weighted_quantiles(z, GRID, weights) if z.size else t
        if by_source and z.size:
            # m sources are m independent draws of a source's shift: widen their quantiles as a
            # prediction interval from m draws is widened (Student-t(m - 1) over normal
            # quantiles, times sqrt(1 + 1/m); Geisser 1993, Predictive Inference, ch. 2)
            m = len(_counts(groups))
            empirical = empirical * _small_sample_factor(m)
        entry["z"] = [float(v) for v in weight * empirical + (1 - weight) * t]
    return model


def _held_out_table(scored, info, kinds) -> dict[str, list]:
    """The cross-validated rows of ``kinds`` as JSON-able column lists (:data:`HELD_OUT_COLUMNS`;
    missing values None), kept in the model so that :func:`confidence` can name the measured rows
    nearest an estimate and the model's held-out error on them."""
    keep = scored["kind"].isin(kinds).to_numpy()
    rows, context = scored[keep], info[keep]  # info is indexed like scored, row for row
    table = {}
    for column in HELD_OUT_COLUMNS:
        source = rows if column in ("id", "kind", "metric", "measured", "predicted") else context
        values = source[column].tolist() if column in source else [None] * len(rows)
        table[column] = [_json_scalar(value) for value in values]
    return table


def _json_scalar(value):
    """A number as a float (None when not finite), anything else as its text (None stays None)."""
    if isinstance(value, (int, float, np.number)):
        return float(value) if math.isfinite(value) else None
    return None if value is None else str(value)


def held_out_rows(model: dict):
    """The model's cross-validated rows (:func:`_held_out_table`) as a DataFrame, None when the
    model keeps none (fitted before it kept them)."""
    import pandas as pd

    table = model.get("held_out")
    if not table or not table.get("id"):
        return None
    frame = pd.DataFrame(table)
    for column in ("measured", "predicted", "num_gpus", "model_params", "seq_len"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def _source_labels(groups):
    """Each row's source as a Series; a row without one is a source of its own."""
    import pandas as pd

    labels = pd.Series(groups, dtype=object)
    return labels.where(labels.notna(), pd.Series([f"row {i}" for i in range(len(labels))], dtype=object))


def _source_weights(groups) -> np.ndarray:
    """1 / (rows of the row's source) for each row: every source weighs one in total."""
    labels = _source_labels(groups)
    return 1.0 / labels.map(labels.value_counts()).to_numpy(dtype=float)


def _weighted_quantiles(values, probabilities, weights=None) -> np.ndarray:
    """Quantiles of ``values``: ``np.quantile``'s without ``weights``; with them, interpolated
    between the weighted mid-ranks ``(cumsum(w) - w/2) / sum(w)`` of the sorted values (for equal
    weights, the Hazen plotting positions ``(i - 1/2) / n``)."""
    values = np.asarray(values, dtype=float)
    if weights is None:
        return np.quantile(values, probabilities)
    weights = np.asarray(weights, dtype=float)
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    positions = (np.cumsum(weights) - 0.5 * weights) / weights.sum()
    return np.interp(probabilities, positions, values)


def _small_sample_factor(m: int) -> np.ndarray:
    """Per grid probability: Student-t(m - 1) quantile / normal quantile x sqrt(1 + 1/m) (1 at the
    median, where both quantiles are 0)."""
    from scipy.stats import norm, t

    grid = np.array(GRID)
    normal = norm.ppf(grid)
    ratio = np.divide(t.ppf(grid, df=m - 1), normal, out=np.ones_like(grid), where=np.abs(normal) > 1e-12)
    return ratio * math.sqrt(1.0 + 1.0 / m)


def _share_gpu_term(model: dict, measured_kinds) -> None:
    """A kind without a leave-one-GPU-out measurement of its own takes the largest ``tau["gpu"]``
    of the measured kinds whose :data:`DEPENDS` share a parameter with it."""
    measured = {k: model["kinds"][k]["tau"]["gpu"] for k in measured_kinds}
    for kind, entry in model["kinds"].items():
        if kind in measured:
            continue
        shared = [tau for other, tau in measured.items() if set(DEPENDS.get(other, ())) & set(DEPENDS.get(kind, ()))]
        entry["tau"]["gpu"] = max(shared, default=0.0)


def _node_table(entry: dict, archs, family=None) -> tuple[np.ndarray, np.ndarray]:
    """(bias, variance) tables [architecture, bucket] of the deepest node each reaches:
    kind > (workload family, when the model has rows of it) > architecture > GPU-count bucket."""
    root = entry.get("families", {}).get(family, entry) if family is not None else entry
    bias = np.empty((len(archs), len(BUCKETS)))
    variance = np.empty_like(bias)
    for i, a in enumerate(archs):
        for j, b in enumerate(BUCKETS):
            node = root["architectures"].get(a)
            node = root if node is None else node["buckets"].get(b, node)
            bias[i, j], variance[i, j] = node["bias"], node["variance"]
    return bias, variance


def _lookup(entry: dict, arch, bucket_codes, family=None):
    """(bias, variance) of each estimate (arrays of architecture, GPU-count bucket code and
    workload family; family None: not known)."""
    arch = np.asarray(arch, dtype=object)
    arch_codes, archs = _factorize(arch)
    family_codes, families = _factorize(None if family is None else family, arch.shape)
    bias, variance = np.empty(arch.shape), np.empty(arch.shape)
    for index, name in enumerate(families):
        mine = family_codes == index
        table_bias, table_variance = _node_table(entry, archs, name)
        bias[mine] = table_bias[arch_codes[mine], bucket_codes[mine]]
        variance[mine] = table_variance[arch_codes[mine], bucket_codes[mine]]
    return bias, variance


# ---------------------------------------------------------------- evaluating it

def _check_level(level) -> float:
    level = float(level)
    if not 0 < level <= 1 - 2 * GRID[0]:
        raise ValueError(f"interval level must be in (0, {1 - 2 * GRID[0]:.2f}], got {level}")
    return level


def _evaluate(model: dict, profile, kind, architecture, num_gpus, model_params, seq_len, assumed, gpu=None,
              host=0.0, shares=None, attention=0.0, family=None):
    """(pieces of :func:`log_sigma`, kind codes, kinds): the work of one evaluation, done once
    per distinct kind, architecture, workload family and GPU and vectorized over estimates."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in (kind, architecture, num_gpus, model_params, seq_len, gpu,
                                                        host, attention, family)),
                                *(np.shape(flag) for flag in (assumed or {}).values()),
                                *(np.shape(share) for share in (shares or {}).values()))
    unknown = set(assumed or {}) - set(ASSUMABLE)
    if unknown:
        raise ValueError(f"assumed inputs {sorted(unknown)} have no interval term; known: {', '.join(ASSUMABLE)}")
    unknown = set(shares or {}) - set(SHARE_COLUMNS)
    if unknown:
        raise ValueError(f"step shares {sorted(unknown)} have no interval term; known: {', '.join(SHARE_COLUMNS)}")
    kind_codes, kinds = _factorize(kind, shape)
    missing = [k for k in kinds if k not in model["kinds"]]
    if missing:
        raise ValueError(f"the interval model has no kind {missing[0]!r}; it has {', '.join(sorted(model['kinds']))}")
    arch_codes, archs = _factorize(architecture, shape)
    family_codes, families = _factorize(family, shape)
    gpu_codes, gpus = _factorize(gpu, shape)
    bucket_codes = np.broadcast_to(_bucket_codes(num_gpus), shape)
    logs = {name: np.broadcast_to(np.log10(np.where(np.asarray(v, dtype=float) > 0, v, np.nan)), shape)
            for name, v in (("num_gpus", num_gpus), ("model_params", model_params), ("seq_len", seq_len))}
    out = {name: np.zeros(shape) for name in ("bias", "residual", "architecture", "gpu", "bounds", "scale",
                                               "assumed", "shares")}
    out["parameters"] = _per_place(lambda k, a, f: _kind_variance(profile, k, a, f), kind, architecture, family,
                                   shape)
    out["host"] = host_variance(host, shape)
    out["attention"] = attention_variance(attention, shape)
    shift = attention_shift(attention, shape)
    n0 = model.get("n0", N0)
    for index, name in enumerate(kinds):
        entry = model["kinds"][name]
        mask = kind_codes == index if len(kinds) > 1 else np.ones(shape, dtype=bool)
        for family_index, family_name in enumerate(families):
            mine = mask & (family_codes == family_index)
            if not mine.any():
                continue
            codes = arch_codes[mine]
            bias, variance = _node_table(entry, archs, family_name)
            out["bias"][mine] = bias[codes, bucket_codes[mine]] + shift[mine]
            out["residual"][mine] = variance[codes, bucket_codes[mine]]
            measured = _measured(entry, name, family_name)
            tau = np.array([0.0 if a in measured["architectures"] else entry["tau"].get("architecture", 0.0)
                            for a in archs])
            out["architecture"][mine] = tau[codes]
            # a GPU model with few rows: the excess beyond the architecture term (the larger of the two counts)
            gpu_term = _extrapolation(0.0, entry["tau"].get("gpu", 0.0), n0, True,
                                      _gpu_rows(measured.get("gpus", {}), gpus))
            out["gpu"][mine] = np.maximum(gpu_term[None, :] - tau[:, None], 0.0)[codes, gpu_codes[mine]]
            # a value at its bound: its prior, in the share the architecture's own rows leave open
            # (their cross-validated residuals already carry what the pinned value does to them)
            rows = np.array([measured["architectures"].get(a, {}).get("n", 0) for a in archs], dtype=float)
            pinned_variance = np.array([_bound_variance(profile, name, a, family_name) for a in archs])
            out["bounds"][mine] = (pinned_variance * n0 / (rows + n0))[codes]
        scale = np.zeros(int(mask.sum()))
        for feature, trend in entry["scale"].items():
            x = logs[feature][mask]
            lo, hi = trend["range"]
            scale += (trend["per_decade"] * np.nan_to_num(np.maximum(lo - x, 0.0) + np.maximum(x - hi, 0.0))) ** 2
        out["scale"][mask] = scale
        if "shares" in entry and shares:
            untested = untested_share({c: np.broadcast_to(np.asarray(v, dtype=float), shape)[mask]
                                       for c, v in shares.items()}, entry["shares"]["range"], (int(mask.sum()),))
            out["shares"][mask] = (entry["shares"]["log_sigma"] * untested) ** 2
        for input_name, flag in (assumed or {}).items():
            out["assumed"][mask] += np.where(np.broadcast_to(np.asarray(flag, dtype=bool), shape)[mask],
                                             entry["tau"].get(input_name, 0.0), 0.0)
    out["total"] = np.sqrt(out["residual"] + out["parameters"] + out["host"] + out["attention"] + out["bounds"]
                           + out["architecture"]
                           + out["gpu"] + out["scale"] + out["assumed"] + out["shares"])
    return out, kind_codes, kinds


def log_sigma(model: dict, profile, kind, architecture, num_gpus=np.nan, model_params=np.nan,
              seq_len=np.nan, assumed=None, gpu=None, host=0.0, shares=None, attention=0.0,
              family=None) -> dict[str, np.ndarray]:
    """The pieces of each estimate's log-ratio spread (arrays broadcast together): ``bias``,
    ``residual`` (v), ``parameters`` (p), ``host`` (the host dispatch time's part of p:
    :func:`host_variance` of ``host``, each estimate's :func:`perfmodel.chain.host_log_sensitivity`),
    ``attention`` (an assumed attention kernel's part of p: :func:`attention_variance` of ``attention``;
    ``bias`` includes its :func:`attention_shift`),
    ``bounds`` (the prior of a value at its bound, weighted
    by ``n0 / (n + n0)`` of the architecture's rows), ``architecture``, ``gpu`` (a GPU model with
    few or no rows, beyond the architecture term),
    ``scale``, ``assumed`` and ``shares`` (extrapolation variances; ``shares``: a step makeup
    beyond the fitted rows', :func:`untested_share`) and ``total`` (sqrt of their sum: sigma).
    ``gpu``: the GPU name of each estimate (None: not known, no GPU term); ``shares``: the chain's
    step shares by :data:`SHARE_COLUMNS` name (None: no share term); ``family``: each estimate's
    workload family ('transformer' | 'cnn'; None: not known, the kind's architecture nodes)."""
    return _evaluate(model, profile, kind, architecture, num_gpus, model_params, seq_len, assumed, gpu, host,
                     shares, attention, family)[0]


def ratio_bounds(model: dict, profile, kind, architecture, level: float = LEVEL, num_gpus=np.nan,
                 model_params=np.nan, seq_len=np.nan, assumed=None, gpu=None,
                 host=0.0, shares=None, attention=0.0, family=None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) ratio bounds in rate orientation of the central ``level`` interval of each
    estimate: ``exp(b + sigma z_(1-level)/2)``, ``exp(b + sigma z_(1+level)/2)``.  Arrays broadcast;
    ``assumed`` maps an input of :data:`ASSUMABLE` to a bool (array): that input was a default;
    ``gpu``: GPU names (None: not known, no GPU-model term); ``host``: each estimate's
    :func:`perfmodel.chain.host_log_sensitivity` (0: the host time cannot move it); ``shares``: the
    chain's step shares by :data:`SHARE_COLUMNS` name (None: no share term); ``attention``: each
    estimate's :data:`ATTENTION_COLUMN` (0: its attention kernel was known); ``family``: the
    workload family of each estimate (None: not known)."""
    level = _check_level(level)
    parts, kind_codes, kinds = _evaluate(model, profile, kind, architecture, num_gpus, model_params, seq_len,
                                         assumed, gpu, host, shares, attention, family)
    grid = np.asarray(model["grid"])
    z = np.array([np.interp([(1 - level) / 2, (1 + level) / 2], grid, model["kinds"][k]["z"]) for k in kinds])
    low = np.exp(parts["bias"] + parts["total"] * z[kind_codes, 0])
    high = np.exp(parts["bias"] + parts["total"] * z[kind_codes, 1])
    return low, high


def time_bounds(profile, time_s, architecture, num_gpus=np.nan, model_params=np.nan, seq_len=np.nan,
                assumed=None, level: float = LEVEL, kind: str = "train", gpu=None, host=0.0, shares=None,
                attention=0.0, family=None):
    """(low, high) of predicted times (step time, time to train; arrays broadcast) of training
    estimates, for ``estimate``/``search``/``rank``: from the profile's interval model when it has
    one, else from its ``kind[architecture]`` ratio table (80 % only), else (NaN, NaN).  ``host``:
    the chain's ``host_log_sensitivity`` of each estimate; ``shares``: its step shares
    (``share_<group>`` outputs of the chain, by :data:`SHARE_COLUMNS` name); ``attention``: its
    :data:`ATTENTION_COLUMN` (0: attention kernel known); ``family``: the workload's family
    (``Workload.family``)."""
    time_s = np.asarray(time_s, dtype=float)
    model = profile.provenance.get("interval_model")
    if model is not None and kind in model["kinds"]:
        ratio_low, ratio_high = ratio_bounds(model, profile, kind, architecture, level, num_gpus, model_params,
                                             seq_len, assumed, gpu, host, shares, attention, family)
    else:
        if level != LEVEL:
            raise ValueError(f"the profile has only {LEVEL:.0%} intervals (no interval model); refit it with "
                             "`perfmodel calibrate --cv 5` for other levels")
        arch = np.broadcast_to(np.asarray(architecture, dtype=object), time_s.shape)
        table = {a: profile.interval_ratio(kind, a) or (np.nan, np.nan) for a in set(arch.ravel())}
        ratio_low = np.array([table[a][0] for a in arch.ravel()], dtype=float).reshape(arch.shape)
        ratio_high = np.array([table[a][1] for a in arch.ravel()], dtype=float).reshape(arch.shape)
    return time_s / ratio_high, time_s / ratio_low


def bounds(metric, predicted, ratio_low, ratio_high):
    """(low, high) of predictions from rate-oriented ratio bounds (time metrics invert them)."""
    is_time = np.isin(np.asarray(metric, dtype=object), TIME_METRICS)
    predicted = np.asarray(predicted, dtype=float)
    return (np.where(is_time, predicted / ratio_high, predicted * ratio_low),
            np.where(is_time, predicted / ratio_low, predicted * ratio_high))


def interval_columns(frame, context, profile, model=None, levels=(0.5, 0.8, 0.95), assumed=None):
    """``frame`` (a validate() frame) with ``low_50``/``high_50``, ``low_80``/``high_80``, ... and
    ``low``/``high`` (= the 80 % interval) from ``model`` (default: the profile's
    ``provenance["interval_model"]``); ``context`` is :func:`row_context` of the same rows."""
    model = model or profile.provenance.get("interval_model")
    if model is None:
        raise ValueError("the profile has no interval model (provenance['interval_model']); "
                         "refit it with `perfmodel calibrate --cv 5`")
    out = frame.copy()
    info = context.loc[frame.index]
    known = np.isin(frame["kind"].to_numpy(dtype=object), list(model["kinds"]))
    for level in levels:
        tag = f"{round(100 * level):d}"
        low = np.full(len(frame), np.nan)
        high = np.full(len(frame), np.nan)
        if known.any():
            r_low, r_high = ratio_bounds(
                model, profile, frame["kind"].to_numpy(dtype=object)[known],
                info["architecture"].to_numpy(dtype=object)[known], level,
                info["num_gpus"].to_numpy(dtype=float)[known], info["model_params"].to_numpy(dtype=float)[known],
                info["seq_len"].to_numpy(dtype=float)[known],
                {k: np.asarray(v)[known] for k, v in (assumed or {}).items()},
                info["gpu"].to_numpy(dtype=object)[known] if "gpu" in info else None,
                frame[HOST_COLUMN].to_numpy(dtype=float)[known] if HOST_COLUMN in frame else 0.0,
                {c: frame[c].to_numpy(dtype=float)[known] for c in SHARE_COLUMNS if c in frame},
                frame[ATTENTION_COLUMN].to_numpy(dtype=float)[known] if ATTENTION_COLUMN in frame else 0.0,
                _families(info)[known])
            low[known], high[known] = bounds(frame["metric"].to_numpy(dtype=object)[known],
                                             frame["predicted"].to_numpy(dtype=float)[known], r_low, r_high)
        out[f"low_{tag}"], out[f"high_{tag}"] = low, high
    if "low_80" in out:
        out["low"], out["high"] = out["low_80"], out["high_80"]
    return out


def interval_bounds(result, profile, catalog=None, measurements=None):
    """(low, high) 80 % bounds for the rows of a validate() result.

    With the profile's interval model and ``measurements`` (the rows ``result`` scores, same
    index), bounds come from :func:`ratio_bounds` at each row's context; otherwise from the
    kind[architecture] ratio table ``profile.interval`` (no scale or assumed-input terms)."""
    from perfmodel.hardware.catalog import load_catalog

    catalog = catalog or load_catalog()
    model = profile.provenance.get("interval_model")
    if model is not None:
        if measurements is not None:
            context = row_context(measurements.loc[result.index], catalog)
        else:
            import pandas as pd

            context = pd.DataFrame({"gpu": canonical_gpus(result["gpu"], catalog),
                                    "architecture": architectures(result["gpu"], catalog), "num_gpus": np.nan,
                                    "model_params": np.nan, "seq_len": np.nan}, index=result.index)
        scored = interval_columns(result, context, profile, model, levels=(LEVEL,))
        return scored["low"].to_numpy(), scored["high"].to_numpy()
    low = np.full(len(result), np.nan)
    high = np.full(len(result), np.nan)
    rows = zip(result["kind"], result["gpu"], result["metric"], result["predicted"])
    for i, (kind, gpu, metric, predicted) in enumerate(rows):
        ratio = profile.interval_ratio(kind, _architecture(catalog, gpu))
        if ratio is not None and np.isfinite(predicted):
            low[i], high[i] = scale_by_ratio(metric, predicted, ratio)
    return low, high


def interval_table(model: dict, profile) -> dict[str, tuple[float, float]]:
    """``{kind: (low, high), "kind[architecture]": (low, high)}``: the 80 % ratio bounds of the
    model at each kind's and each measured architecture's rows (no scale or assumed-input terms),
    the compact table kept in ``profile.interval`` for :meth:`CalibrationProfile.interval_ratio`.
    A kind's own entry is its bound on an architecture with no rows."""
    table: dict[str, tuple[float, float]] = {}
    for kind, entry in model["kinds"].items():
        low, high = ratio_bounds(model, profile, kind, None)
        table[kind] = (float(low), float(high))
        for arch in entry["architectures"]:
            low, high = ratio_bounds(model, profile, kind, arch)
            table[f"{kind}[{arch}]"] = (float(low), float(high))
    return table


# ---------------------------------------------------------------- explaining it

def confidence(model: dict, profile, kind: str, architecture: str | None, num_gpus=None, model_params=None,
               seq_len=None, assumed: dict[str, str] | None = None, rows=None, level: float = LEVEL,
               gpu: str | None = None, host: float = 0.0, framework: str | None = None,
               shares: dict[str, float] | None = None, attention: float = 0.0, family: str | None = None) -> dict:
    """Why an estimate's interval is as wide as it is: a JSON-able dict with ``assumed`` (input ->
    the value assumed), ``extrapolates`` (one line per step beyond the data), ``measured_rows``
    (rows of this kind on this architecture and their median error), ``nearest`` (up to 3
    nearest held-out rows of ``rows``, a cross-validated frame joined with :func:`row_context`,
    and the model's error on each), ``interval_ratio`` (low, high), ``log_sigma`` (the bias and
    total sigma of the log ratio, and each variance term of :func:`log_sigma` as its own sigma)
    and ``text`` (one line for the CLI).  ``host``: the estimate's
    :func:`perfmodel.chain.host_log_sensitivity` under ``framework``'s host dispatch time;
    ``shares``: its step shares by :data:`SHARE_COLUMNS` name; ``attention``: its
    :data:`ATTENTION_COLUMN` (the log change of the step if the assumed attention kernel is the other one);
    ``family``: the workload's family (its rows' spread is the residual's)."""
    assumed = dict(assumed or {})
    flags = {name: True for name in assumed if name in ASSUMABLE}
    nan = float("nan")
    parts = log_sigma(model, profile, kind, architecture, nan if num_gpus is None else num_gpus,
                      nan if model_params is None else model_params, nan if seq_len is None else seq_len, flags, gpu,
                      host, shares, attention, family)
    low, high = ratio_bounds(model, profile, kind, architecture, level, nan if num_gpus is None else num_gpus,
                             nan if model_params is None else model_params, nan if seq_len is None else seq_len, flags,
                             gpu, host, shares, attention, family)
    entry = model["kinds"][kind]
    place = _measured(entry, kind, family)
    node = place["architectures"].get(architecture)
    extrapolates = []
    if node is None:
        pooled_from = f"pooled from {', '.join(sorted(entry['architectures'])) or 'none'}"
        # the inheriting parameters are the training step's (clock, attention, convolution)
        inherited = [profile.applying_key(name, architecture) for name, parameter in PARAMETERS.items()
                     if architecture and kind == "train" and parameter.inherits]
        inherited = [key for key in inherited if split_key(key)[1] not in (None, architecture)]
        extrapolates.append(f"no {kind} rows on {architecture or 'this'} architecture: parameters " + (
            f"{', '.join(inherited)} inherited from its nearest predecessor with rows, the others {pooled_from}"
            if inherited else pooled_from))
    gpu_rows = place.get("gpus", {}).get(gpu, 0) if gpu is not None else None
    if gpu is not None and entry["tau"].get("gpu", 0.0) > 0 and gpu_rows < model.get("n0", N0):
        extrapolates.append(f"{gpu_rows or 'no'} {kind} rows on {gpu}: a GPU model the fit barely or never saw")
    for key in pinned(profile, kind, architecture, family):
        extrapolates.append(f"{key} = {profile.values[key]:.3g} sits at a bound of its range: "
                            f"its prior width counts, in the share the measured rows leave open")
    if host >= HOST_STATED_LOG_CHANGE:
        value = host_dispatch_seconds(profile, framework, architecture)
        if profile.prior_only("host_dispatch_time", framework):
            known = "its prior"
        elif profile.pooled("host_dispatch_time", framework):
            known = "pooled over the stacks whose rows determine it"
        else:
            known = "fitted"
        if architecture is not None and host_scale_is_prior(profile, architecture):
            known += f"; the {architecture} host's speed relative to DGX H100's is a prior"
        extrapolates.append(
            f"a host dispatch time one standard error slower ({value * 1e6:.3g} us per kernel x "
            f"{math.exp(host_log_error(profile, framework, architecture)):.2f}, {known}) would slow the step "
            f"{math.expm1(host):.0%}")
    if abs(attention) >= ATTENTION_STATED_LOG_CHANGE:
        assumed_kernel, other = ("fused", "unfused") if attention > 0 else ("unfused", "fused")
        extrapolates.append(
            f"attention assumed {assumed_kernel}; {other} it would {'slow' if attention > 0 else 'speed up'} the step "
            f"{abs(math.expm1(attention)):.0%} (counted as a {OTHER_KERNEL_PROBABILITY:.0%} chance, assumed)")
    share_entry = entry.get("shares")
    for column, top in (share_entry["range"] if share_entry else {}).items():
        value = float((shares or {}).get(column, 0.0))
        if value - top >= SHARE_STATED:
            extrapolates.append(
                f"{value:.0%} of the step is {SHARE_LABELS[column]}, beyond the fitted {kind} rows' "
                f"{top:.0%}: the untested share counts uncertain by x{math.exp(share_entry['log_sigma']):.2f}"
                + ("" if share_entry["fitted"] else " (assumed)"))
    values = {"num_gpus": num_gpus, "model_params": model_params, "seq_len": seq_len}
    for feature, trend in entry["scale"].items():
        value = values[feature]
        if value is None or not value > 0:
            continue
        lo, hi = (10 ** v for v in trend["range"])
        if not lo <= value <= hi:
            extrapolates.append(f"{feature} {value:.3g} outside the fitted {lo:.3g}..{hi:.3g}")
    rows = held_out_rows(model) if rows is None else rows
    nearest = []
    if rows is not None:
        nearest = _nearest(rows, kind, architecture, values, framework=framework)
    family_node = entry.get("families", {}).get(family) if family is not None else None
    family_rows = family_node["architectures"].get(architecture, {}).get("n", 0) if family_node else None
    measured = {"n": node["n"] if node else 0, "architecture": architecture, "family": family,
                "family_n": family_rows,
                "median_error": _median_error(rows, kind, architecture) if rows is not None else None}
    width = float(high / low)
    text = (f"{round(100 * level)}% x{float(low):.2f}..x{float(high):.2f} (high/low {width:.2f}); "
            f"{measured['n']} {kind} rows on {architecture}"
            + (f", {family_rows} of {family} models" if family_rows is not None else "")
            + (f" (median held-out error {measured['median_error']:.0%})" if measured["median_error"] is not None
               else "")
            + (f"; nearest measured: {nearest[0]['id']} ("
               + (f"{nearest[0]['num_gpus']:.0f} x " if nearest[0].get("num_gpus") else "") + f"{nearest[0]['gpu']}"
               + (f", {nearest[0]['framework']}" if nearest[0].get("framework") else "")
               + f"), measured {1.0 + nearest[0]['error']:.2f}x the held-out prediction" if nearest else "")
            + (f"; extrapolates: {'; '.join(extrapolates)}" if extrapolates else "")
            # a long assumption (a fabric with its source) is named only: the estimate lists it in full
            + (f"; assumed: {', '.join(k if len(str(v)) > 40 else f'{k}={v}' for k, v in assumed.items())}"
               if assumed else ""))
    return {"level": level, "interval_ratio": (float(low), float(high)),
            "log_sigma": {k: float(np.sqrt(v)) if k not in ("bias", "total") else float(v)
                          for k, v in parts.items()},
            "assumed": assumed, "extrapolates": extrapolates, "measured_rows": measured,
            "nearest": nearest, "text": text}


def _scored(rows, kind):
    ok = rows[(rows["kind"] == kind) & rows["predicted"].notna() & (rows["measured"] > 0)]
    error = rate_ratio(ok["metric"], ok["measured"].to_numpy(float), ok["predicted"].to_numpy(float)) - 1.0
    return ok, error


def _median_error(rows, kind, architecture):
    ok, error = _scored(rows, kind)
    mine = (ok["architecture"] == architecture).to_numpy()
    return float(np.median(np.abs(error[mine]))) if mine.any() else None


def _nearest(rows, kind, architecture, values, count=3, framework=None) -> list[dict]:
    """Held-out rows of ``kind`` closest to the estimate: same architecture first, then the
    distance in decades over the scale axes both have, plus one decade for another framework
    (when the estimate states one).  ``error`` is the row's measured / predicted rate - 1 (its
    prediction by a fit that did not see it)."""
    ok, error = _scored(rows, kind)
    if ok.empty:
        return []
    distance = np.where((ok["architecture"] == architecture).to_numpy(), 0.0, 10.0)
    if framework is not None and "framework" in ok:
        distance = distance + (ok["framework"].to_numpy(dtype=object) != framework_family(framework))
    for feature, value in values.items():
        if value is not None and value > 0 and feature in ok:
            x = ok[feature].to_numpy(dtype=float)
            decades = np.abs(np.log10(np.where(x > 0, x, np.nan)) - math.log10(value))
            distance = distance + np.nan_to_num(decades, nan=3.0)
    order = np.argsort(distance, kind="stable")[:count]
    def optional(i, column):
        return _json_scalar(ok[column].iloc[i]) if column in ok else None

    return [{"id": str(ok["id"].iloc[i]), "gpu": str(ok["gpu"].iloc[i]), "framework": optional(i, "framework"),
             "num_gpus": optional(i, "num_gpus"), "metric": str(ok["metric"].iloc[i]),
             "measured": float(ok["measured"].iloc[i]), "predicted": float(ok["predicted"].iloc[i]),
             "error": float(error[i])} for i in order]
