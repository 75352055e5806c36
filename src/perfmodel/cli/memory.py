"""`perfmodel memory SCENARIO [--json]`: memory per GPU by component, and whether it fits.

Exit status 0 when it fits, 3 when it does not or the plan is invalid (reasons printed), 2 on
bad input.
"""

from __future__ import annotations

from perfmodel import estimate
from perfmodel.cli.common import EXIT_INFEASIBLE, EXIT_OK, catalog_from, print_json, profile_from
from perfmodel.units import format_memory


def register(subparsers) -> None:
    parser = subparsers.add_parser("memory", help="memory per GPU by component; fits or not, and why")
    parser.add_argument("scenario")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calibration", metavar="PROFILE")
    parser.set_defaults(func=run)


def run(args) -> int:
    result = estimate(args.scenario, catalog_from(args), profile_from(args))
    memory = dict(result.memory)
    if not memory:  # the plan itself is invalid: no memory to speak of
        memory = {"fits": False}
    memory["reasons"] = result.reasons
    memory["plan"] = result.plan
    if args.json:
        print_json(memory)
        return EXIT_OK if memory.get("fits") else EXIT_INFEASIBLE
    print(f"{result.workload} on {result.hardware['num_gpus']} x {result.hardware['gpu']}, plan "
          + " ".join(f"{k}={result.plan[k]}" for k in ("tp", "pp", "dp", "micro_batch", "recompute", "zero")))
    for name in ("weights", "gradients", "optimizer", "activations", "logits", "comm_buckets",
                 "framework", "allocator", "total", "capacity", "headroom"):
        if name in memory:
            print(f"  {name:<13} {format_memory(memory[name]):>12}")
    print("fits" if memory.get("fits") else "DOES NOT FIT")
    for reason in memory["reasons"]:
        print(f"  - {reason}")
    return EXIT_OK if memory.get("fits") else EXIT_INFEASIBLE
