"""``perfmodel validate [FILE.csv ...] [--json] [--calibration PROFILE.yaml] [--by gpu|kind|framework|source]``:
predict measured rows and report the error.

Without files it scores the shipped published measurements.  ``--json`` prints
``{"summary": {"all": {...}, kind: {...}}, "by": {...}, "rows": [...]}``; otherwise tables: the
summary per kind, the error per GPU (or per ``--by`` group), the worst rows, and why rows could
not be predicted.
"""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, int_arg, print_json, print_table

GROUPS = ("gpu", "kind", "framework", "source")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate", help="predict measured rows and report the error (MAPE)",
        description="Predict every row of measurement CSV files (default: the shipped published "
                    "measurements) and report ape = |predicted - measured| / measured.")
    parser.add_argument("files", nargs="*", metavar="FILE.csv",
                        help="measurement files (default: the shipped ones)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--calibration", metavar="PROFILE.yaml",
                        help="efficiency profile (default: the shipped one)")
    parser.add_argument("--by", choices=GROUPS, default="gpu",
                        help="second summary grouped by gpu (default), kind, framework or source")
    parser.add_argument("--top", type=int_arg(0), default=15, metavar="N",
                        help="worst rows shown in the table (default 15)")
    parser.set_defaults(func=_run)


def _run(args) -> int:
    from perfmodel.calibration.measurements import (load_measurements, shipped_measurements,
                                                    source_group)
    from perfmodel.calibration.validate import summarize, validate
    from perfmodel.cli.progress import working
    from perfmodel.profile import load_profile

    measurements = load_measurements(*args.files) if args.files else shipped_measurements()
    profile = load_profile(args.calibration) if args.calibration else None
    with working("validating", enabled=not getattr(args, "json", False)):
        result = validate(measurements, catalog_from(args), profile)
    if args.by == "source":
        result["source"] = measurements["source"].map(source_group)
    if args.by == "framework":
        result["framework"] = result["framework"].fillna("(not stated)")
    summary, groups = summarize(result), summarize(result, by=args.by)
    if args.json:
        rows = result.drop(columns=["source"] if args.by == "source" else [])
        print_json({"summary": summary, "by": {"key": args.by, "groups": groups},
                    "rows": rows.to_dict(orient="records")})
        return 0
    _print_report(result, summary, groups, args)
    return 0


def _percent(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _summary_rows(summary: dict, label: str) -> list[dict]:
    return [{label: name, "n": s["n"], "predicted": s["predicted"], "MAPE": _percent(s["mape"]),
             "median APE": _percent(s["median_ape"]),
             **({"coverage": _percent(s["coverage"])} if "coverage" in s else {})}
            for name, s in summary.items()]


def _print_report(result, summary: dict, groups: dict, args) -> None:
    where = ", ".join(args.files) if args.files else "shipped measurements"
    profile = args.calibration or "default profile"
    print(f"perfmodel validate: {len(result)} rows from {where} ({profile})\n")
    print_table(_summary_rows(summary, "kind"))
    print(f"\nError by {args.by}:")
    print_table(_summary_rows({k: v for k, v in groups.items() if k != "all"}, args.by))

    predicted = result[result["predicted"].notna()]
    if args.top and len(predicted):
        worst = predicted.sort_values("ape", ascending=False).head(args.top)
        print(f"\nWorst {len(worst)} of {len(predicted)} predicted rows:")
        print_table([{**row, "ape": _percent(row["ape"]), "reason": row["reason"] or ""}
                     for row in worst[["id", "kind", "gpu", "metric", "measured", "predicted",
                                       "ape", "reason"]].to_dict(orient="records")])
    missing = result[result["predicted"].isna()]
    if len(missing):
        reasons = missing["reason"].fillna("no reason given").value_counts()
        print(f"\n{len(missing)} rows not predicted, by reason:")
        print_table([{"rows": int(count), "reason": reason}
                     for reason, count in reasons.head(args.top or len(reasons)).items()])
