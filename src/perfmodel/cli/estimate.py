"""`perfmodel estimate SCENARIO [--json]`: one scenario explained."""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, print_json, profile_from
from perfmodel.estimate import estimate
from perfmodel.units import format_quantity


def register(subparsers) -> None:
    parser = subparsers.add_parser("estimate", help="step time, breakdown, memory and time to train of a scenario")
    parser.add_argument("scenario", help="scenario file (YAML or JSON)")
    parser.add_argument("--json", action="store_true", help="print the Estimate as JSON")
    parser.add_argument("--calibration", metavar="PROFILE", help="calibration profile YAML (default: shipped)")
    parser.add_argument("-o", "--output", metavar="PNG", help="write the step-time breakdown figure (PNG)")
    parser.set_defaults(func=run)


def run(args) -> int:
    result = estimate(args.scenario, catalog_from(args), profile_from(args))
    if args.output:
        from perfmodel.plots import breakdown

        breakdown(result).savefig(args.output, dpi=120, bbox_inches="tight")
    if args.json:
        print_json(result.model_dump(mode="json"))
        return 0
    print_estimate(result)
    return 0


def print_estimate(result) -> None:
    hw = result.hardware
    print(f"{result.workload} on {hw['num_gpus']} x {hw['gpu']} ({hw['nodes']} node(s)"
          + (f", {hw['instance']}" if hw.get("instance") else "") + ")")
    plan = result.plan
    print("plan: " + " ".join(f"{k}={plan[k]}" for k in ("precision", "tp", "pp", "dp", "cp", "vp", "micro_batch",
                                                          "global_batch", "recompute", "zero")))
    for line in result.assumptions.get("assumed", []):  # issue 15: hardware filled from a reference
        print(f"assumed: {line}")
    chosen = result.assumptions.get("chosen_by_search") or result.assumptions.get("chosen_by_estimator")
    if chosen:
        print("      (not fixed by the scenario, chosen as the fastest that fits: " + ", ".join(chosen) + ")")
    if not result.feasible:
        print("INFEASIBLE:")
        for reason in result.reasons:
            print(f"  - {reason}")
        if not result.step_time_s:
            return
    print(f"step time        {format_quantity(result.step_time_s, 'time')}")
    for name, seconds in sorted(result.breakdown_s.items(), key=lambda kv: -kv[1]):
        if seconds > 0:
            share = seconds / result.step_time_s
            print(f"  {name:<13} {format_quantity(seconds, 'time'):>12}  {share:6.1%}  {'#' * round(30 * share)}")
    print(f"throughput       {result.samples_per_s:.4g} samples/s"
          + (f", {result.tokens_per_s:.4g} tokens/s" if result.tokens_per_s else ""))
    print(f"model TFLOP/s/GPU {result.tflops_per_gpu:.4g}   MFU {result.mfu:.1%}   HFU {result.hfu:.1%}"
          f"   GPU busy {result.gpu_utilization:.1%}")
    print(f"bottleneck       {result.bottleneck}")
    mem = result.memory
    if mem:
        print(f"memory per GPU   {format_quantity(mem['total'], 'bytes')} of {format_quantity(mem['capacity'], 'bytes')}"
              f" ({'fits' if mem['fits'] else 'DOES NOT FIT'})")
    if result.time_to_train_s:
        print(f"time to train    {format_quantity(result.time_to_train_s, 'time')}   ({result.gpu_hours:.4g} GPU-hours)")
    if result.interval_80:
        print(f"80% interval     step time {format_quantity(result.interval_80['step_time_low_s'], 'time')}"
              f" .. {format_quantity(result.interval_80['step_time_high_s'], 'time')}")
