"""`perfmodel rank SCENARIO`: which instance, how many nodes, on-demand or spot, for this job.

The human output is a decision first (cheapest, fastest, best performance per dollar within the
deadline and budget), then a table in days and dollars no wider than 120 columns (``--wide`` for
every column), then what the spot answers assume.  ``--json`` and ``--csv`` stay SI and complete.
Exit status 3 when no candidate is feasible; the closest candidates and how far they miss are shown.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap

from perfmodel.cli.common import EXIT_INFEASIBLE, EXIT_OK, catalog_from, int_arg, print_json, profile_from
from perfmodel.cli.progress import progress
from perfmodel.cli.search import add_headroom_flag, scenario_from
from perfmodel.ranking import OBJECTIVES, answers, available_pricings, closest, rank
from perfmodel.units import format_duration, format_money

WIDTH = 120
MAX_NODES = 65536  # far above any cluster a catalog instance type offers; guards against typos like 1e20
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def register(subparsers) -> None:
    parser = subparsers.add_parser("rank", help="rank cloud instances x node counts by time, cost, perf/$, FLOPS/W")
    parser.add_argument("scenario", help="scenario file (YAML or JSON); its hardware section is ignored")
    parser.add_argument("--objective", default="cost", choices=list(OBJECTIVES), help="sort key (default cost)")
    parser.add_argument("--pricing", default=None,
                        help="on_demand, spot, or a comma list (default: the scenario's run.pricing, else "
                             "on_demand); reserved pricings only where the catalog has reserved prices")
    parser.add_argument("--deadline", help="longest acceptable time to train, with its unit: 14d, 36h, 2w")
    parser.add_argument("--budget", help="largest acceptable cost in US dollars, with the sign: $50k, $1.2M")
    parser.add_argument("--max-nodes", default="128", help="node counts 1, 2, 4, ... up to this (default 128)")
    parser.add_argument("--nodes", help="explicit node counts, comma separated (overrides --max-nodes)")
    parser.add_argument("--instances", help="comma-separated provider/name list (default: every priced instance)")
    parser.add_argument("--interruptions-per-hour", default=None,
                        help="spot interruptions per instance-hour, 0..1 (default: scenario, else the "
                             "provider and GPU default)")
    parser.add_argument("--grid", default=None, metavar="G_PER_KWH",
                        help="grid carbon intensity in gCO2e/kWh, 0..2000 (adds co2_kg)")
    parser.add_argument("--top", default="20", help="rows to show (default 20; 0 = all)")
    parser.add_argument("--all", action="store_true", help="show infeasible rows too")
    parser.add_argument("--wide", action="store_true", help="every column, however wide")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="every column in SI units, as JSON")
    output.add_argument("--csv", action="store_true", help="every column in SI units, as CSV")
    parser.add_argument("-o", "--output", metavar="FIGURE",
                        help="write the time-vs-cost Pareto plot (.png, .svg, .pdf)")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.add_argument("--jobs", type=int_arg(1, 1024), default=None,
                        help="worker processes choosing the plans (default: every core; the table is the same)")
    add_headroom_flag(parser)
    parser.set_defaults(func=run)


# --- argument checks -------------------------------------------------------------------------------

def _number(flag: str, text: str | None, low: float, high: float, whole: bool = False) -> float | int | None:
    """A finite number in [low, high] from a flag's text, or a one-line error naming the flag."""
    if text is None:
        return None
    kind = "a whole number" if whole else "a number"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not {kind}; allowed: {low:g} to {high:g}") from None
    if not math.isfinite(value) or not low <= value <= high or (whole and value != int(value)):
        raise ValueError(f"{flag} {text!r} is out of range; allowed: {kind} from {low:g} to {high:g}")
    return int(value) if whole else value


def _list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def _node_list(text: str | None) -> list[int] | None:
    items = _list(text)
    if items is None:
        return None
    if not items:
        raise ValueError(f"--nodes {text!r}: give node counts, e.g. 1,2,4,8")
    return [_number("--nodes", item, 1, MAX_NODES, whole=True) for item in items]


def _figure_path(path: str | None) -> str | None:
    if path is None:
        return None
    if os.path.isdir(path):
        raise ValueError(f"-o {path!r} is a directory; give a file name ending in {', '.join(FIGURE_SUFFIXES)}")
    if not path.lower().endswith(FIGURE_SUFFIXES):
        raise ValueError(f"-o {path!r}: the figure file name must end in {', '.join(FIGURE_SUFFIXES)}")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"-o {path!r}: the folder {folder!r} does not exist")
    return path


# --- presentation ----------------------------------------------------------------------------------

def _pricing_name(pricing: str) -> str:
    return pricing.replace("_", "-")


def _per_dollar(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.0f}"


def _share(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.0%}"


def _energy(kwh) -> str:
    return "-" if kwh is None or not math.isfinite(kwh) else f"{kwh / 1e3:,.1f}"


def _rate(value) -> str:
    """An interruption rate per node-hour as '1 per 3,650 h' (no scientific notation)."""
    if value is None or not math.isfinite(value):
        return "-"
    return "none" if value <= 0 else f"1 per {1 / value:,.0f} h"


# (header, row -> text, right-aligned); the default set fits 120 columns, --wide adds the rest
COLUMNS = {
    "instance": ("instance", lambda r: r["instance"], False),
    "nodes": ("nodes", lambda r: str(int(r["nodes"])), True),
    "gpus": ("GPUs", lambda r: str(int(r["num_gpus"])), True),
    "pricing": ("pricing", lambda r: _pricing_name(r["pricing"]), False),
    "time": ("time", lambda r: format_duration(r["time_to_train_s"]) + ("?" if r.get("deadline_at_risk") is True else ""),
             True),
    "cost": ("cost", lambda r: format_money(r["cost_usd"], cents=False) + ("!" if r.get("flags") else ""), True),
    "per_hour": ("$/h cluster", lambda r: format_money(r["price_usd_per_hour"]), True),
    "perf": ("TFLOP/s per $/h", lambda r: _per_dollar(r["perf_per_dollar"]), True),
    "ideal": ("ideal time", lambda r: format_duration(r["ideal_time_s"]), True),
    "rate": ("interruptions per node", lambda r: _rate(r["interruptions_per_hour"]), True),
    "hold": ("P(hold nodes)", lambda r: _share(r["hold_probability"]), True),
    "discount": ("spot discount", lambda r: _share(r["spot_discount"]), True),
    "cost2x": ("cost @2x rate", lambda r: format_money(r["cost_usd_at_2x_rate"], cents=False), True),
    "cost5x": ("cost @5x rate", lambda r: format_money(r["cost_usd_at_5x_rate"], cents=False), True),
    "mfu": ("MFU", lambda r: _share(r["mfu"]), True),
    "energy": ("energy MWh", lambda r: _energy(r["energy_kwh"]), True),
    "gflops_w": ("GFLOP/s per W", lambda r: _per_dollar(r["flops_per_watt"] / 1e9), True),
    "pareto": ("front", lambda r: "*" if r.get("pareto") else "", False),
    "plan": ("plan", lambda r: r["plan"] if isinstance(r["plan"], str) else "-", False),
    "plan_or_reason": ("plan, or why not", lambda r: (r["plan"] if isinstance(r["plan"], str) else "")
                       if r["feasible"] else "NOT: " + r["reasons"], False),
}
DEFAULT = ["instance", "nodes", "pricing", "time", "cost", "perf", "pareto", "plan"]
WIDE = ["instance", "nodes", "gpus", "pricing", "time", "ideal", "cost", "per_hour", "perf", "rate", "hold",
        "discount", "cost2x", "cost5x", "mfu", "energy", "gflops_w", "pareto", "plan"]


def format_table(rows: list[dict], names: list[str], width: int | None = WIDTH) -> list[str]:
    """Lines of a table over ``rows`` with the named :data:`COLUMNS`; with ``width`` the last
    column is cut (ending '…') so no line is longer."""
    headers = [COLUMNS[name][0] for name in names]
    cells = [[COLUMNS[name][1](row) for name in names] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    if width is not None:
        room = width - sum(w + 2 for w in widths[:-1])
        widths[-1] = max(len(headers[-1]), min(widths[-1], room))
    right = [COLUMNS[name][2] for name in names]

    def line(values):
        parts = []
        for value, size, align_right in zip(values, widths, right):
            value = value if len(value) <= size else value[:size - 1] + "…"
            parts.append(value.rjust(size) if align_right else value.ljust(size))
        return "  ".join(parts).rstrip()

    return [line(headers)] + [line(row) for row in cells]


def _describe(row) -> str:
    flagged = " [flagged spot price]" if row.get("flags") else ""
    return (f"{row['instance']} x {int(row['nodes'])} ({int(row['num_gpus'])} {row['gpu']}), "
            f"{_pricing_name(row['pricing'])}{flagged}: {format_duration(row['time_to_train_s'])}, "
            f"{format_money(row['cost_usd'], cents=False)} ({row['plan']})")


def _spot_notes(frame, shown, chosen) -> list[str]:
    """What the spot rows shown assume: ideal vs expected time, rate and its source, hold
    probability, sensitivity to the rate, implausible discounts.  The row explained is the first
    spot answer, else the first spot row shown."""
    spot = shown[(shown["pricing"] == "spot") & shown["time_to_train_s"].notna()]
    answered = [index for _, index in chosen if frame.loc[index, "pricing"] == "spot"]
    if not len(spot) and not answered:
        return []
    row = frame.loc[answered[0]] if answered else spot.iloc[0]
    lines = [
        f"Spot ({row['instance']} x {int(row['nodes'])}): ideal {format_duration(row['ideal_time_s'])}, expected "
        f"{format_duration(row['time_to_train_s'])} with checkpoints every Young-Daly interval "
        f"({format_duration(row['checkpoint_time_s'])} each), interruptions "
        f"{_rate(row['interruptions_per_hour'])} per node "
        f"({row['interruptions_source']}) and an assumed {row['hold_probability']:.0%} chance of holding "
        f"{int(row['nodes'])} spot nodes at once (ASSUMPTION, parameter spot_capacity_nodes).",
        f"If interruptions come 2x / 5x as often: {format_money(row['cost_usd_at_2x_rate'], cents=False)} / "
        f"{format_money(row['cost_usd_at_5x_rate'], cents=False)} instead of "
        f"{format_money(row['cost_usd'], cents=False)}."]
    lines[1:] = ["  " + line for line in lines[1:]]
    flagged = shown[shown["flags"] != ""].drop_duplicates("instance")
    for _, item in flagged.iterrows():
        lines.append(f"! {item['instance']}: {item['flags']} (catalog price of {item['price_as_of']}).")
    return lines


def _wrap(text: str, indent: str = "  ") -> list[str]:
    """``text`` in lines of at most :data:`WIDTH` columns, continuation lines indented."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def _times(ratio: float) -> str:
    return f"{ratio:.2g}x" if ratio < 10 else f"{ratio:,.0f}x"


def _miss(row, frame) -> str:
    """How far an infeasible row misses: time late and dollars over, against the deadline and budget."""
    parts = []
    deadline, budget = frame.attrs.get("deadline_s"), frame.attrs.get("budget_usd")
    ratio = row.get("deadline_ratio")
    if deadline and ratio is not None and math.isfinite(ratio) and ratio > 1:
        parts.append(f"{format_duration(row['time_to_train_s'] - deadline)} late ({_times(ratio)} the deadline)")
    ratio = row.get("budget_ratio")
    if budget and ratio is not None and math.isfinite(ratio) and ratio > 1:
        parts.append(f"{format_money(row['cost_usd'] - budget, cents=False)} over budget ({_times(ratio)})")
    return ", ".join(parts) or row["reasons"]


def _reason_counts(frame):
    """How many infeasible rows give each reason, numbers and instance names taken out."""
    reasons = frame.loc[~frame["feasible"], "reasons"]
    return (reasons.str.replace(r"time to train [^;]* exceeds", "time to train exceeds", regex=True)
            .str.replace(r"cost \$[\d,]+ exceeds", "cost exceeds", regex=True)
            .str.replace(r"^[\w.-]+/[\w.-]+ has", "the instance has", regex=True)
            .str.replace(r" \(\d+ valid plans tried\)", "", regex=True).value_counts())


def _print_infeasible(frame) -> None:
    deadline, budget = frame.attrs.get("deadline_s"), frame.attrs.get("budget_usd")
    limits = " and ".join(t for t in ((f"the deadline {format_duration(deadline)}" if deadline else ""),
                                      (f"the budget {format_money(budget)}" if budget else "")) if t)
    print(f"No candidate is feasible{' within ' + limits if limits else ''}.")
    counts = _reason_counts(frame)
    first = [r for r in counts.index if "deadline" in r or "budget" in r]
    for reason in first + [r for r in counts.index if r not in first][:6]:
        for line in _wrap(f"  {counts[reason]:>4} x {reason}", " " * 10):
            print(line)
    near = closest(frame, 5)
    near = near[near["time_to_train_s"].notna()]
    if len(near):
        print("Closest candidates:")
        for _, row in near.iterrows():
            for line in _wrap(f"  {_describe(row)}; misses: {_miss(row, frame)}", " " * 4):
                print(line)


def run(args) -> int:
    top = _number("--top", args.top, 0, 1e6, whole=True)
    max_nodes = _number("--max-nodes", args.max_nodes, 1, MAX_NODES, whole=True)
    rate = _number("--interruptions-per-hour", args.interruptions_per_hour, 0.0, 1.0)
    grid = _number("--grid", args.grid, 0.0, 2000.0)
    figure = _figure_path(args.output)
    pricing = _list(args.pricing)
    catalog = catalog_from(args)
    quiet = args.json or args.csv
    frame = rank(scenario_from(args), catalog, profile_from(args), instances=_list(args.instances),
                 nodes=_node_list(args.nodes), objective=args.objective,
                 pricing=pricing if pricing is None or len(pricing) > 1 else pricing[0],
                 deadline=args.deadline, budget=args.budget, max_nodes=max_nodes,
                 interruptions_per_hour=rate, grid_g_per_kwh=grid,
                 progress=lambda items: progress(items, "ranking", enabled=not quiet), jobs=args.jobs)
    if figure:
        from perfmodel.plots.pareto import pareto

        pareto(frame).savefig(figure, dpi=150, bbox_inches="tight")
    feasible = frame[frame["feasible"]]
    status = EXIT_OK if len(feasible) else EXIT_INFEASIBLE
    shown = frame if args.all or quiet else feasible
    shown = shown.head(top) if top else shown
    if args.csv:
        shown.to_csv(sys.stdout, index=False)
        return status
    if args.json:
        print_json({"objective": args.objective, "basis": frame.attrs["basis"], "candidates": int(len(frame)),
                    "feasible": int(len(feasible)), "deadline_s": frame.attrs["deadline_s"],
                    "budget_usd": frame.attrs["budget_usd"], "pricings_offered": available_pricings(catalog),
                    "rows": shown.to_dict(orient="records")})
        return status
    basis = "whole run" if frame.attrs["basis"] == "run" else "ONE STEP (the scenario has no run section)"
    print(f"{frame.attrs['workload']}: {len(frame)} candidates, {len(feasible)} feasible; times and costs "
          f"for the {basis}")
    chosen = answers(frame)
    for label, index in chosen:
        for line in _wrap(f"  {label}: {_describe(frame.loc[index])}", " " * 6):
            print(line)
    if not len(feasible):
        _print_infeasible(frame)
    if len(shown):
        print()
        for line in _wrap(f"By {args.objective.replace('_', ' ')}; time = expected wall time; cost = whole cluster "
                          "(! = flagged price, see below; ? = within the deadline, but its 80 % interval reaches "
                          "past it); front * = no option both faster and cheaper:"):
            print(line)
        names = [("plan_or_reason" if name == "plan" and args.all else name)
                 for name in (WIDE if args.wide else DEFAULT)]
        for line in format_table(shown.to_dict(orient="records"), names, None if args.wide else WIDTH):
            print(line)
        if args.all and len(feasible):
            print("Why not (infeasible rows):")
            counts = _reason_counts(frame)
            for reason in counts.index:
                for line in _wrap(f"  {counts[reason]:>4} x {reason}", " " * 10):
                    print(line)
        for line in _spot_notes(frame, shown, chosen):
            for wrapped in _wrap(line):
                print(wrapped)
    return status
