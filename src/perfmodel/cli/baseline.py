"""``perfmodel baseline add|list|compare``: keep measured runs and flag regressions.

``compare`` exits with status 1 when any row is a regression (so a CI job fails), 0 otherwise;
bad input exits 2 like every other command.
"""

from __future__ import annotations

from perfmodel.cli.common import print_json, print_table

DB_HELP = ("SQLite file or SQLAlchemy URL (e.g. postgresql+psycopg://user@host/db); default "
           "$PERFMODEL_BASELINE_DB or ~/.local/share/perfmodel/baseline.sqlite")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "baseline", help="store measured runs and compare new ones against them",
        description="A database of a team's measured runs. 'compare' exits 1 when a regression "
                    "is found, so CI can use it.")
    commands = parser.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)

    add = commands.add_parser("add", help="store the rows of measurement CSV files")
    add.add_argument("files", nargs="+", metavar="FILE.csv")
    add.add_argument("--label", help="tag stored with every row (a commit, a driver version...)")
    add.add_argument("--db", help=DB_HELP)
    add.set_defaults(func=_add)

    show = commands.add_parser("list", help="one line per stored configuration")
    show.add_argument("--db", help=DB_HELP)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=_list)

    compare = commands.add_parser(
        "compare", help="compare new measurements with the stored baseline (exit 1 on regression)",
        description="Baseline = median of the latest 5 stored values of the same configuration. "
                    "Exit status: 0 no regression, 1 at least one regression, 2 bad input.")
    compare.add_argument("files", nargs="+", metavar="FILE.csv")
    compare.add_argument("--threshold", default="5%",
                         help="allowed change in the bad direction, '5%%' or '0.05' (default 5%%)")
    compare.add_argument("--db", help=DB_HELP)
    compare.add_argument("--json", action="store_true", help="print JSON")
    compare.set_defaults(func=_compare)


def _store(args):
    from perfmodel.baseline import BaselineStore

    return BaselineStore(args.db)


def _add(args) -> int:
    from perfmodel.calibration.measurements import load_measurements

    frame = load_measurements(*args.files)
    store = _store(args)
    count = store.add(frame, label=args.label)
    print(f"added {count} rows to {store.name}")
    return 0


def _list(args) -> int:
    table = _store(args).list()
    rows = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    if args.json:
        print_json(rows)
    else:
        print_table(rows)
    return 0


def _compare(args) -> int:
    from perfmodel.baseline import parse_threshold
    from perfmodel.calibration.measurements import load_measurements

    threshold = parse_threshold(args.threshold)
    frame = load_measurements(*args.files)
    result = _store(args).compare(frame, threshold=threshold)
    regressions = int(result["regression"].sum())
    rows = result.astype(object).where(result.notna(), None).to_dict(orient="records")
    if args.json:
        print_json({"threshold": threshold, "regressions": regressions, "rows": rows})
    else:
        order = {"regression": 0, "improvement": 1, "new": 2, "ok": 3}
        rows.sort(key=lambda row: order[row["status"]])
        print_table(rows, ["id", "kind", "gpu", "metric", "value", "baseline", "change", "status"])
        print(f"{regressions} regression(s) at threshold {threshold:.1%}")
    return 1 if regressions else 0
