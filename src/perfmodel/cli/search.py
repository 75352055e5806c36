"""`perfmodel search SCENARIO [--top 10] [--jobs N] [--json]`: the fastest plans.

Exit status 0 with at least one plan that fits, 3 when no plan is valid or none fits (the
reasons are printed), 2 on bad input.
"""

from __future__ import annotations

from perfmodel.cli.common import (EXIT_INFEASIBLE, EXIT_OK, catalog_from, int_arg, print_json, print_table,
                                  profile_from)
from perfmodel.plan_search import search

SHOWN = ["tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "recompute_every", "zero", "sequence_parallel",
         "offload", "step_time_s", "samples_per_s", "mfu", "memory_total"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("search", help="enumerate and rank every valid parallel plan")
    parser.add_argument("scenario", help="scenario file (YAML or JSON); plan fields given stay fixed")
    parser.add_argument("--top", type=int_arg(1), default=10, help="plans to show (default 10)")
    parser.add_argument("--jobs", type=int_arg(1, 1024), default=None,
                        help="worker processes for large spaces (default: every core; the plans are the same)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.set_defaults(func=run)


def run(args) -> int:
    frame = search(args.scenario, catalog_from(args), profile_from(args), top=args.top, jobs=args.jobs)
    top = frame
    if args.json:
        print_json({"evaluated": frame.attrs["evaluated"], "candidates": frame.attrs["candidates"],
                    "feasible": frame.attrs["feasible"], "infeasible": frame.attrs["infeasible"],
                    "plans": top.to_dict(orient="records")})
        return EXIT_OK if len(frame) else EXIT_INFEASIBLE
    print(f"{frame.attrs['workload']} on {frame.attrs['hardware']['num_gpus']} x {frame.attrs['hardware']['gpu']}: "
          f"{frame.attrs['candidates']} candidate plans, {frame.attrs['evaluated']} valid, {frame.attrs['feasible']} fit")
    for reason, count in frame.attrs["infeasible"].items():
        print(f"  dropped {count:>7}: {reason}")
    if not len(frame):
        print("no plan is valid and fits; see the reasons above")
        return EXIT_INFEASIBLE
    print_table(top[SHOWN].to_dict(orient="records"), SHOWN)
    return EXIT_OK
