"""`perfmodel search SCENARIO [--top 10] [--jobs N] [--memory-headroom F] [--json]`: the fastest plans.

Besides the plans, fastest first, it says how far apart they are relative to what the model can
resolve (``vs best`` and ``tied``: within the tie band of :func:`perfmodel.choice.tie_band`) and
which tied plan a practitioner would run (:func:`perfmodel.choice.pick`, the plan ``estimate``'s
rule takes among the same ties).  Exit status 0 with at least one plan that fits, 3 when no plan is
valid or none fits (the reasons are printed), 2 on bad input.
"""

from __future__ import annotations

from perfmodel.cli.common import (EXIT_INFEASIBLE, EXIT_OK, catalog_from, float_arg, int_arg, print_json,
                                  print_table, profile_from)
from perfmodel.plan_search import search
from perfmodel.scenario import load_scenario

SHOWN = ["tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "recompute_every", "zero", "sequence_parallel",
         "offload", "step_time_s", "vs_best", "tied", "samples_per_s", "mfu", "memory_total"]
# the largest headroom the flag takes (a plan must be allowed some memory)
MAX_HEADROOM = 0.9


def add_headroom_flag(parser) -> None:
    """``--memory-headroom FRACTION``: overrides the scenario's ``plan.memory_headroom``."""
    parser.add_argument("--memory-headroom", type=float_arg(0.0, MAX_HEADROOM), default=None, metavar="FRACTION",
                        help="share of GPU memory a chosen plan leaves free (default: the scenario's "
                             "plan.memory_headroom, else 0.10)")


def scenario_from(args):
    """The scenario of ``args.scenario`` with ``--memory-headroom`` applied when given."""
    if getattr(args, "memory_headroom", None) is None:
        return args.scenario
    scenario = load_scenario(args.scenario)
    return scenario.model_copy(update={"plan": scenario.plan.model_copy(update={"memory_headroom": args.memory_headroom})})


def register(subparsers) -> None:
    parser = subparsers.add_parser("search", help="enumerate and rank every valid parallel plan")
    parser.add_argument("scenario", help="scenario file (YAML or JSON); plan fields given stay fixed")
    parser.add_argument("--top", type=int_arg(1), default=10, help="plans to show (default 10)")
    parser.add_argument("--jobs", type=int_arg(1, 1024), default=None,
                        help="worker processes for large spaces (default: every core; the plans are the same)")
    add_headroom_flag(parser)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.set_defaults(func=run)


def ties_line(frame) -> str:
    """'the top 10 plans shown are within the model's tie band (±10 %); the conventional choice is ...'."""
    from perfmodel.ranking import plan_label

    tied, band, conventional = int(frame["tied"].sum()), frame.attrs["tie_band"], frame.attrs["conventional"]
    head = (f"the fastest plan alone is within the model's tie band (±{band:.0%})" if tied == 1 else
            f"the top {tied} plans shown are within the model's tie band (±{band:.0%}): it cannot order them")
    return (f"{head}; the conventional choice among all tied plans is {plan_label(conventional)} "
            f"({conventional['vs_best']:+.1%} vs the fastest; rule: perfmodel.plans.conventional_order)")


def run(args) -> int:
    frame = search(scenario_from(args), catalog_from(args), profile_from(args), top=args.top, jobs=args.jobs)
    if args.json:
        print_json({"evaluated": frame.attrs["evaluated"], "candidates": frame.attrs["candidates"],
                    "feasible": frame.attrs["feasible"], "infeasible": frame.attrs["infeasible"],
                    "memory_headroom": frame.attrs["memory_headroom"], "tie_band": frame.attrs["tie_band"],
                    "tied": int(frame["tied"].sum()) if len(frame) else 0,
                    "conventional": frame.attrs["conventional"], "batch_note": frame.attrs.get("batch_note"),
                    "plans": frame.to_dict(orient="records")})
        return EXIT_OK if len(frame) else EXIT_INFEASIBLE
    print(f"{frame.attrs['workload']} on {frame.attrs['hardware']['num_gpus']} x {frame.attrs['hardware']['gpu']}: "
          f"{frame.attrs['candidates']} candidate plans, {frame.attrs['evaluated']} valid, {frame.attrs['feasible']} fit "
          f"with {frame.attrs['memory_headroom']:.0%} of GPU memory left free")
    if frame.attrs.get("batch_note"):
        print(f"  {frame.attrs['batch_note']}")
    for reason, count in frame.attrs["infeasible"].items():
        print(f"  dropped {count:>7}: {reason}")
    if not len(frame):
        print("no plan is valid and fits; see the reasons above")
        return EXIT_INFEASIBLE
    rows = frame[SHOWN].to_dict(orient="records")
    for row in rows:
        row["vs_best"] = f"{row['vs_best']:+.1%}"
    print_table(rows, SHOWN)
    print(ties_line(frame))
    return EXIT_OK
