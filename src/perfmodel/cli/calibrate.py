"""`perfmodel calibrate FILE.csv ... -o profile.yaml [--cv 5 [--cv-by train-source]] [--params a,b]`."""

from __future__ import annotations

import os

from perfmodel.calibration.fit import CV_GROUPINGS
from perfmodel.cli.common import catalog_from, int_arg, print_json, print_table


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="fit the efficiency parameters to measured runs (least squares on log error)")
    parser.add_argument("files", nargs="*", metavar="FILE.csv",
                        help="measurement files (default: the shipped measurements)")
    parser.add_argument("-o", "--output", metavar="PROFILE.yaml", help="write the fitted profile here")
    parser.add_argument("--cv", type=int_arg(0), default=0, metavar="K",
                        help="also report K-fold cross-validated error and store prediction intervals "
                             "(K >= 2, at most the number of groups of --cv-by; adds a leave-one-GPU-out "
                             "study of the GEMM rows for the term of a GPU model without rows)")
    parser.add_argument("--cv-by", choices=CV_GROUPINGS, default="train-source",
                        help="rows held out together: 'train-source' (default: train rows by their source, "
                             "the error on a training run of a source never fitted; other kinds by "
                             "experiment), 'source' (train and collective rows by their source), "
                             "'experiment' (one measured configuration) or 'gpu' (K = number of GPUs: "
                             "leave-one-GPU-out)")
    parser.add_argument("--save-cv", metavar="DIR",
                        help="with --cv: also write the cross-validated rows here (held_out.csv.gz, "
                             "leave_one_gpu_out.csv.gz), from which scripts/refit_intervals.py refits the "
                             "interval model alone, without the folds' fits")
    parser.add_argument("--params", help="comma-separated parameter names to fit (default: all)")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed of the CV folds")
    parser.add_argument("--jobs", type=int_arg(1, 1024), default=os.cpu_count() or 1, metavar="N",
                        help="processes for the cross-validation folds (default: all cores; same result as 1)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from perfmodel.calibration.coverage import leave_gpu_out
    from perfmodel.calibration.fit import calibrate, cross_validate, cv_groups
    from perfmodel.calibration.measurements import load_measurements, shipped_measurements
    from perfmodel.calibration.validate import summarize
    from perfmodel.cli.progress import working
    from perfmodel.inputs import check_output_path

    if args.output:  # before the fit, which can take minutes
        check_output_path(args.output, "the calibration profile")
    if args.save_cv:
        if not args.cv:
            raise ValueError("--save-cv: needs --cv K (it saves the cross-validated rows)")
        for name in CV_FILES:
            check_output_path(os.path.join(args.save_cv, name), "the cross-validated rows")
    catalog = catalog_from(args)
    measurements = load_measurements(*args.files) if args.files else shipped_measurements()
    if measurements.empty:
        raise ValueError(f"{', '.join(args.files)}: no measurement rows (only a header); nothing to fit")
    if args.cv:
        groups = len(set(cv_groups(measurements, args.cv_by)))
        if not 2 <= args.cv <= groups:
            raise ValueError(f"--cv {args.cv}: must be from 2 to {groups}, the number of groups by "
                             f"{args.cv_by} (rows of one group stay in one fold)")
    params = [p.strip() for p in args.params.split(",")] if args.params else None
    with working("calibrating", enabled=not args.json):
        profile = calibrate(measurements, params=params, catalog=catalog)
    if not profile.values:
        raise ValueError(_nothing_fitted(measurements, catalog, args.files))
    cv_summary = None
    if args.cv:
        with working(f"{args.cv}-fold cross-validation", enabled=not args.json):
            held_out = cross_validate(measurements, k=args.cv, seed=args.seed, params=params, catalog=catalog,
                                      jobs=args.jobs, by=args.cv_by)
        cv_summary = {"by_kind": summarize(held_out), "by_kind_gpu": summarize(held_out, by=["kind", "gpu"])}
        with working("leave-one-GPU-out on the GEMM rows", enabled=not args.json):
            unseen_gpu = leave_gpu_out(measurements, params=params, catalog=catalog)
        if args.save_cv:
            held_out.to_csv(os.path.join(args.save_cv, CV_FILES[0]))
            unseen_gpu.to_csv(os.path.join(args.save_cv, CV_FILES[1]))
        profile = with_intervals(profile, held_out, unseen_gpu, measurements, catalog,
                                 {"folds": args.cv, "by": args.cv_by, "seed": args.seed})
    if args.output:
        profile.save(args.output)
    if args.json:
        print_json({"values": profile.values, "uncertainty": profile.uncertainty,
                    "provenance": profile.provenance, "cross_validation": cv_summary})
        return 0
    rows = [{"parameter": key, "value": value, "std_error": profile.uncertainty.get(key),
             "source": _value_source(key, profile.provenance)} for key, value in sorted(profile.values.items())]
    print_table(rows, ["parameter", "value", "std_error", "source"])
    for stage, info in profile.provenance.get("stages", {}).items():
        print(f"stage {stage}: {info['rows']} rows, {info['parameters']} values, "
              f"MAPE {info['mape_before']:.1%} -> {info['mape_after']:.1%}")
    if cv_summary:
        print(f"\n{args.cv}-fold cross-validated error (held-out rows, folds by {args.cv_by}):")
        print_table([{"group": k, **v} for k, v in cv_summary["by_kind_gpu"].items()],
                    ["group", "n", "predicted", "mape", "median_ape"])
    if args.output:
        print(f"\nwrote {args.output}")
    return 0


CV_FILES = ("held_out.csv.gz", "leave_one_gpu_out.csv.gz")
"""What ``--save-cv`` writes: the cross-validated rows (:func:`perfmodel.calibration.fit.cross_validate`)
and the leave-one-GPU-out rows (:func:`perfmodel.calibration.coverage.leave_gpu_out`)."""


def with_intervals(profile, held_out, unseen_gpu, measurements, catalog, folds: dict):
    """``profile`` with the interval model fitted on the cross-validated rows ``held_out`` and the
    leave-one-GPU-out rows ``unseen_gpu`` (:func:`perfmodel.calibration.intervals.fit_interval_model`),
    its legacy table and the cross-validation's provenance (``folds``: folds, by, seed)."""
    from perfmodel.calibration.intervals import fit_interval_model, interval_table, row_context
    from perfmodel.calibration.validate import summarize

    model = fit_interval_model(held_out, profile, row_context(measurements, catalog),
                               unseen_gpu=unseen_gpu if len(unseen_gpu) else None)
    profile = profile.model_copy(update={"interval": interval_table(model, profile)})
    profile.provenance["interval_model"] = model
    profile.provenance["cross_validation"] = {**folds, "leave_one_gpu_out": sorted(set(unseen_gpu.get("fold", []))),
                                              "mape": summarize(held_out)}
    return profile


def _value_source(key: str, provenance: dict) -> str:
    """Where a fitted profile's value comes from: its rows, its prior (the rows do not determine it),
    its rows shrunk towards the typical group (partially pooled), or the median of the groups."""
    from perfmodel.profile import split_key

    if key in provenance.get("not_determined", ()):
        return "prior (rows do not determine it)"
    if key in provenance.get("pooled", ()):
        return "rows + typical group (partially pooled)"
    if key not in provenance.get("identifiability", {}) and split_key(key)[1] is None:
        return "median of its groups"
    return "rows"


def _nothing_fitted(measurements, catalog, files) -> str:
    """Why no parameter was fitted: the most common reasons the rows could not be predicted."""
    from perfmodel.calibration.validate import validate

    reasons = validate(measurements, catalog)["reason"].fillna("predicted, but no parameter applies")
    counts = reasons.value_counts().head(3)
    where = ", ".join(files) if files else "shipped measurements"
    return (f"{where}: nothing to fit; no parameter could be fitted to the {len(measurements)} rows ("
            + "; ".join(f"{count} x {reason[:120]}" for reason, count in counts.items()) + ")")
