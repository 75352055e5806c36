"""`perfmodel calibrate FILE.csv ... -o profile.yaml [--cv 5] [--params a,b]`."""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, print_json, print_table


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="fit the efficiency parameters to measured runs (least squares on log error)")
    parser.add_argument("files", nargs="*", metavar="FILE.csv",
                        help="measurement files (default: the shipped measurements)")
    parser.add_argument("-o", "--output", metavar="PROFILE.yaml", help="write the fitted profile here")
    parser.add_argument("--cv", type=int, default=0, metavar="K",
                        help="also report K-fold cross-validated error and store 80%% prediction intervals")
    parser.add_argument("--params", help="comma-separated parameter names to fit (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the CV folds")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from perfmodel.calibration.fit import calibrate, cross_validate
    from perfmodel.calibration.intervals import fit_interval_model, interval_table, row_context
    from perfmodel.calibration.measurements import load_measurements, shipped_measurements
    from perfmodel.calibration.validate import summarize

    catalog = catalog_from(args)
    measurements = load_measurements(*args.files) if args.files else shipped_measurements()
    params = [p.strip() for p in args.params.split(",")] if args.params else None
    profile = calibrate(measurements, params=params, catalog=catalog)
    cv_summary = None
    if args.cv:
        held_out = cross_validate(measurements, k=args.cv, seed=args.seed, params=params, catalog=catalog)
        cv_summary = {"by_kind": summarize(held_out), "by_kind_gpu": summarize(held_out, by=["kind", "gpu"])}
        model = fit_interval_model(held_out, profile, row_context(measurements, catalog))
        profile = profile.model_copy(update={"interval": interval_table(model, profile)})
        profile.provenance["interval_model"] = model
        profile.provenance["cross_validation"] = {"folds": args.cv, "seed": args.seed,
                                                  "mape": cv_summary["by_kind"]}
    if args.output:
        profile.save(args.output)
    if args.json:
        print_json({"values": profile.values, "uncertainty": profile.uncertainty,
                    "provenance": profile.provenance, "cross_validation": cv_summary})
        return 0
    rows = [{"parameter": key, "value": value, "std_error": profile.uncertainty.get(key)}
            for key, value in sorted(profile.values.items())]
    print_table(rows, ["parameter", "value", "std_error"])
    for stage, info in profile.provenance.get("stages", {}).items():
        print(f"stage {stage}: {info['rows']} rows, {info['parameters']} values, "
              f"MAPE {info['mape_before']:.1%} -> {info['mape_after']:.1%}")
    if cv_summary:
        print(f"\n{args.cv}-fold cross-validated error (held-out rows):")
        print_table([{"group": k, **v} for k, v in cv_summary["by_kind_gpu"].items()],
                    ["group", "n", "predicted", "mape", "median_ape"])
    if args.output:
        print(f"\nwrote {args.output}")
    return 0
