"""`perfmodel estimate SCENARIO [--json]`: one scenario explained.

A scenario that names a catalog instance is priced (on-demand, and spot with its assumptions
when the catalog has a spot price).  A scenario that does not fit shows no times: it shows the
most memory-frugal plan and the smallest change that fits (:mod:`perfmodel.advice`), and exits 3.
"""

from __future__ import annotations

import textwrap

from perfmodel import estimate
from perfmodel.cli.common import EXIT_INFEASIBLE, EXIT_OK, catalog_from, print_json, profile_from
from perfmodel.cli.search import add_headroom_flag, scenario_from
from perfmodel.units import format_duration, format_memory, format_money, format_quantity

# breakdown components below this share of the step print as 0.0 %: the table leaves them out
# (the JSON keeps every component)
MIN_SHOWN_SHARE = 5e-4


def register(subparsers) -> None:
    parser = subparsers.add_parser("estimate",
                                   help="step time, breakdown, memory, time and cost to train of a scenario")
    parser.add_argument("scenario", help="scenario file (YAML or JSON)")
    parser.add_argument("--json", action="store_true", help="print the Estimate as JSON (SI units)")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.add_argument("-o", "--output", metavar="PNG", help="write the step-time breakdown figure (PNG)")
    add_headroom_flag(parser)
    parser.set_defaults(func=run)


def advise(scenario, catalog, profile) -> dict:
    """The most memory-frugal plan (its Estimate as a dict, or None) and the smallest change that
    fits (a :class:`perfmodel.advice.Change`, or None)."""
    from perfmodel.advice import most_frugal, smallest_change

    frugal = most_frugal(scenario, catalog, profile)
    change = smallest_change(scenario, catalog, profile)
    return {"most_frugal": frugal.model_dump(mode="json") if frugal is not None else None,
            "smallest_change": None if change is None else {
                "text": change["text"], "num_gpus": change["num_gpus"], "nodes": change["nodes"],
                "plan": None if change["plan"] is None else {
                    key: _plain(key, change["plan"][key]) for key in (
                        "tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "recompute_every",
                        "zero", "sequence_parallel", "offload")}}}


def _plain(key: str, value):
    """A search row's value as the scenario writes it (numpy integers as int, flags as bool)."""
    return value if isinstance(value, str) else bool(value) if key == "sequence_parallel" else int(value)


def run(args) -> int:
    catalog, profile = catalog_from(args), profile_from(args)
    scenario = scenario_from(args)
    result = estimate(scenario, catalog, profile)
    advice = None if result.feasible else advise(scenario, catalog, profile)
    if args.output:
        from perfmodel.plots import breakdown

        breakdown(result).savefig(args.output, dpi=120, bbox_inches="tight")
    if args.json:
        print_json({**result.model_dump(mode="json"), **({"advice": advice} if advice else {})})
    else:
        print_estimate(result, advice)
    return EXIT_OK if result.feasible else EXIT_INFEASIBLE


def plan_text(plan: dict) -> str:
    """'bf16, TP8 PP2 DP4, full recompute, ZeRO-1; micro-batch 1 of global batch 512'."""
    from perfmodel.ranking import plan_label

    return (f"{plan['precision']}, {plan_label(plan)}; micro-batch {plan['micro_batch']} of global batch "
            f"{plan['global_batch']}")


def _memory_line(memory: dict) -> str:
    parts = [f"{name} {format_memory(memory[name])}" for name in
             ("weights", "gradients", "optimizer", "activations") if memory.get(name)]
    return (f"{format_memory(memory['total'])} per GPU of "
            f"{format_memory(memory['capacity'])}"
            f" ({', '.join(parts)})")


def print_estimate(result, advice: dict | None = None) -> None:
    hw = result.hardware
    print(f"{result.workload} on {hw['num_gpus']} x {hw['gpu']} ({hw['nodes']} node(s)"
          + (f", {hw['instance']}" if hw.get("instance") else "") + ")")
    print(f"plan{'' if result.feasible else ' tried'}: {plan_text(result.plan)}")
    if result.assumptions.get("framework"):
        print(f"framework: {result.assumptions['framework']}")
    for line in result.assumptions.get("assumed", []):
        print(f"assumed: {line}")
    chosen = result.assumptions.get("chosen_by_search") or result.assumptions.get("chosen_by_estimator")
    if chosen and result.feasible:
        print("      (not fixed by the scenario, chosen: " + ", ".join(chosen) + ")")
        if result.assumptions.get("plan_choice"):
            print(textwrap.fill(f"      {result.assumptions['plan_choice']}", width=100, subsequent_indent=" " * 6))
    for warning in result.warnings:
        print(textwrap.fill(f"WARNING: {warning}", width=100, subsequent_indent=" " * 9))
    if not result.feasible:
        _print_infeasible(result, advice or {})
        return
    print(f"step time        {format_quantity(result.step_time_s, 'time')}")
    for name, seconds in sorted(result.breakdown_s.items(), key=lambda kv: -kv[1]):
        share = seconds / result.step_time_s
        if share >= MIN_SHOWN_SHARE:
            print(f"  {name:<13} {format_quantity(seconds, 'time'):>12}  {share:6.1%}  {'#' * round(30 * share)}")
    print(f"throughput       {result.samples_per_s:.4g} samples/s"
          + (f", {result.tokens_per_s:,.0f} tokens/s" if result.tokens_per_s else ""))
    print(f"model TFLOP/s/GPU {result.tflops_per_gpu:.4g}   MFU {result.mfu:.1%}   HFU {result.hfu:.1%}"
          f"   GPU busy {result.gpu_utilization:.1%}")
    print(f"bottleneck       {result.bottleneck}")
    if result.memory:
        print(f"memory per GPU   {_memory_line(result.memory)}: fits")
    if result.time_to_train_s:
        print(f"time to train    {format_duration(result.time_to_train_s)}   ({result.gpu_hours:,.0f} GPU-hours)")
    if result.interval_80:
        print(f"80% interval     step time {format_quantity(result.interval_80['step_time_low_s'], 'time')}"
              f" .. {format_quantity(result.interval_80['step_time_high_s'], 'time')}")
    if result.confidence:
        print(textwrap.fill(f"confidence       {result.confidence['text']}", width=100, subsequent_indent=" " * 17))
    for line in cost_lines(result.cost):
        print(line)


def cost_lines(cost: dict | None) -> list[str]:
    """The price of the run, per pricing, for people."""
    if not cost:
        return []
    lines = [f"cost             {cost['nodes']} x {cost['instance']}, catalog prices of {cost['price_as_of']}"]
    for pricing in ("on_demand", "reserved_1y", "reserved_3y", "spot"):
        entry = cost.get(pricing)
        if entry is None:
            continue
        name = pricing.replace("_", "-")
        per_hour = f"{format_money(entry['price_usd_per_hour'])}/h"
        if pricing == "spot" and entry.get("discount") is not None:
            per_hour += f" ({entry['discount']:.0%} below on-demand)"
        if entry.get("cost_usd") is None and entry.get("time_s") is None:
            lines.append(f"  {name:<10} {per_hour}")
            continue
        if pricing != "spot":
            lines.append(f"  {name:<10} {format_money(entry['cost_usd'], cents=False)}  ({per_hour} for "
                         f"{format_duration(entry['time_s'])})")
            continue
        expected = "never finishes" if entry["cost_usd"] is None else format_money(entry["cost_usd"], cents=False)
        lines.append(f"  {name:<10} {expected} expected  ({per_hour} for {format_duration(entry['time_s'])}; ideal "
                     f"{format_duration(entry['ideal_time_s'])})")
        rate = entry["interruptions_per_hour"]
        every = f"1 per {1 / rate:,.0f} h" if rate > 0 else "none"
        lines.append(f"             interruptions {every} per node ({entry['rate_note']}); assumed "
                     f"{entry['hold_probability']:.0%} chance of holding {cost['nodes']} spot node(s) at once")
        at2, at5 = entry.get("cost_usd_at_2x_rate"), entry.get("cost_usd_at_5x_rate")
        lines.append(f"             at 2x / 5x that rate: {format_money(at2, cents=False) if at2 else 'never'} / "
                     f"{format_money(at5, cents=False) if at5 else 'never'}")
        if entry.get("discount_implausible"):
            lines.append("             ! a spot discount this deep is implausible: check the price before "
                         "relying on it")
    return lines


def _print_infeasible(result, advice: dict) -> None:
    print("DOES NOT FIT" if result.memory else "NOT A VALID PLAN")
    for reason in result.reasons[:3]:
        print("\n".join(textwrap.wrap(f"  - {reason}", 120, subsequent_indent="    ")))
    frugal = advice.get("most_frugal")
    if frugal and frugal.get("memory"):
        verdict = "fits" if frugal["memory"]["fits"] else "still does not fit"
        print(f"most memory-frugal plan on this hardware: {plan_text(frugal['plan'])}")
        print(f"  needs {_memory_line(frugal['memory'])}: {verdict}")
    change = advice.get("smallest_change")
    if change:
        print("\n".join(textwrap.wrap(f"smallest change that fits: {change['text']}", 120, subsequent_indent="  ")))
    else:
        print("no change tried fits (recompute, ZeRO, layout, up to 64x the GPUs)")
    if result.cost:
        print(f"price            {result.cost['nodes']} x {result.cost['instance']}: "
              + ", ".join(f"{name.replace('_', '-')} {format_money(entry['price_usd_per_hour'])}/h"
                          for name, entry in result.cost.items() if isinstance(entry, dict)))
