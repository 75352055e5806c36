"""`perfmodel rank SCENARIO`: which instance, how many nodes, on-demand or spot, for this job."""

from __future__ import annotations

import sys

from perfmodel.cli.common import catalog_from, print_json, print_table, profile_from
from perfmodel.ranking import OBJECTIVES, rank

SHOWN = ["instance", "nodes", "num_gpus", "pricing", "plan", "time_to_train_s", "cost_usd",
         "price_usd_per_hour", "perf_per_dollar", "flops_per_watt", "energy_kwh", "pareto"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("rank", help="rank cloud instances x node counts by time, cost, perf/$, FLOPS/W")
    parser.add_argument("scenario", help="scenario file (YAML or JSON); its hardware section is ignored")
    parser.add_argument("--objective", default="cost", choices=list(OBJECTIVES), help="sort key (default cost)")
    parser.add_argument("--pricing", default=None,
                        help="on_demand, spot, reserved_1y, reserved_3y, or a comma list "
                             "(default: the scenario's run.pricing, else on_demand)")
    parser.add_argument("--deadline", help="longest acceptable time to train, e.g. 14d, 300h")
    parser.add_argument("--budget", help="largest acceptable cost in USD, e.g. 250000")
    parser.add_argument("--max-nodes", type=int, default=128, help="node counts 1, 2, 4, ... up to this (default 128)")
    parser.add_argument("--nodes", help="explicit node counts, comma separated (overrides --max-nodes)")
    parser.add_argument("--instances", help="comma-separated provider/name list (default: every priced instance)")
    parser.add_argument("--interruptions-per-hour", type=float, default=None,
                        help="spot interruptions per instance-hour (default: scenario, else provider default)")
    parser.add_argument("--grid", type=float, default=None, metavar="G_PER_KWH",
                        help="grid carbon intensity in gCO2e/kWh (adds co2_kg)")
    parser.add_argument("--top", type=int, default=20, help="rows to show (default 20; 0 = all)")
    parser.add_argument("--all", action="store_true", help="show infeasible rows too")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true")
    output.add_argument("--csv", action="store_true")
    parser.add_argument("-o", "--output", metavar="FIGURE", help="write the time-vs-cost Pareto plot (png, svg, pdf)")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.set_defaults(func=run)


def _list(text: str | None, convert=str):
    if text is None:
        return None
    try:
        return [convert(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError:
        raise ValueError(f"{text!r} is not a comma-separated list of {convert.__name__}") from None


def run(args) -> int:
    if args.top < 0:
        raise ValueError(f"--top must be >= 0, got {args.top}")
    pricing = _list(args.pricing)
    frame = rank(args.scenario, catalog_from(args), profile_from(args), instances=_list(args.instances),
                 nodes=_list(args.nodes, int), objective=args.objective,
                 pricing=pricing if pricing is None or len(pricing) > 1 else pricing[0],
                 deadline=args.deadline, budget=args.budget, max_nodes=args.max_nodes,
                 interruptions_per_hour=args.interruptions_per_hour, grid_g_per_kwh=args.grid)
    if args.output:
        from perfmodel.plots.pareto import pareto

        pareto(frame).savefig(args.output, dpi=150)
    feasible = frame[frame["feasible"]]
    shown = frame if args.all or args.json or args.csv else feasible
    shown = shown.head(args.top) if args.top else shown
    if args.csv:
        shown.to_csv(sys.stdout, index=False)
        return 0
    if args.json:
        print_json({"objective": args.objective, "basis": frame.attrs["basis"], "candidates": int(len(frame)),
                    "feasible": int(len(feasible)), "rows": shown.to_dict(orient="records")})
        return 0
    basis = "whole run" if frame.attrs["basis"] == "run" else "per step (no run section)"
    print(f"{frame.attrs['workload']}: {len(frame)} candidates, {len(feasible)} feasible; "
          f"by {args.objective}, times and costs {basis}")
    if not len(feasible):
        for reason, count in frame["reasons"].value_counts().head(8).items():
            print(f"  {count:>4} x {reason}")
    columns = SHOWN + (["reasons"] if args.all else [])
    print_table(shown.to_dict(orient="records"), columns)
    return 0
