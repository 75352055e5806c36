"""Time ``search`` on large plan spaces, compare it with ``estimate()`` called once per plan, and time
``rank`` with one and with every core.

Scenarios: GPT-3 175B on 1,024 A100-SXM4-80GB (8 per node on NVSwitch, 8 x HDR InfiniBand per
node, global batch 1536) and Llama-3-70B on 64, 128, 256 and 512 H100-SXM5-80GB (8 x NDR per
node, global batch 1024), every plan field open.  For each, ``search(top=10, jobs=1)`` runs
``--repeat`` times on one core (best time kept): ``candidates`` is the size of the grid, ``evaluated``
the valid plans passed to the chain, ``fit`` those that fit; ``plans/s`` is evaluated plans per
second of search and ``cand/s`` candidates per second, both end to end (scenario parsing,
enumeration, rules, chain, top-k, DataFrame).  ``all cores s`` is one search with ``jobs`` = every
core.  Then ``--sample`` feasible plans are estimated one by one with ``estimate()`` (every plan
field fixed) to time the per-plan loop.  The catalog is loaded once and passed to every call, as a
design-space sweep does.  ``fixed cost`` is the median time of a search whose plan is fully fixed
(one candidate), and the part of it spent in the chain evaluating that one plan.

BLAS/OpenMP threads are pinned to 1 and the process to one core for the one-core numbers; the
all-core numbers (search with ``jobs``, ``rank --jobs``) release the pin.

Run:  python benchmarks/search_benchmark.py [--repeat 3] [--sample 100]
The last line is exactly ``plans/s: N; vs per-plan loop: R; candidates: C; search s: S`` (N and R
over all scenarios on one core; C and S the GPT-3 175B x 1,024 A100 search on one core).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import perfmodel.plan_search as search_module  # noqa: E402
from perfmodel import estimate  # noqa: E402
from perfmodel.hardware.catalog import load_catalog  # noqa: E402
from perfmodel.ranking import rank  # noqa: E402

RANK_SCENARIO = "examples/gpt3-175b-whatif.yaml"
PLAN_KEYS = ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute_every", "zero")


def cluster(gpu, num_gpus, intra, inter):
    return {"gpu": gpu, "num_gpus": num_gpus, "gpus_per_node": 8, "intra": intra, "inter": inter}


SCENARIOS = {
    "gpt3-175b x 1024 A100": {"workload": {"model": "gpt3-175b"},
                              "hardware": cluster("A100-SXM4-80GB", 1024, "nvlink3", "8 x ib-hdr"),
                              "plan": {"global_batch": 1536}},
    **{f"llama3-70b x {n} H100": {"workload": {"model": "llama3-70b"},
                                  "hardware": cluster("H100-SXM5-80GB", n, "nvlink4", "8 x ib-ndr"),
                                  "plan": {"global_batch": 1024}} for n in (64, 128, 256, 512)},
}


def best_of(repeat: int, call):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = call()
        best = min(best, time.perf_counter() - start)
    return best, value


def time_loop(scenario, catalog, frame, sample: int, rng) -> tuple[float, int]:
    """Seconds and plans for ``estimate()`` once per plan on a random sample of the feasible plans."""
    picked = rng.choice(len(frame), size=min(sample, len(frame)), replace=False)
    cases = []
    for i in picked:
        row = frame.iloc[int(i)]
        plan = {k: int(row[k]) for k in PLAN_KEYS}
        plan.update(recompute=row["recompute"], offload=row["offload"],
                    sequence_parallel=bool(row["sequence_parallel"]))
        cases.append({**scenario, "plan": {**scenario["plan"], **plan}})
    estimate(cases[0], catalog)  # warm the op-table caches, as search's repeats are warm
    start = time.perf_counter()
    for case in cases:
        estimate(case, catalog)
    return time.perf_counter() - start, len(cases)


def fixed_cost(scenario, catalog, frame, repeat: int = 200) -> tuple[float, float]:
    """Median seconds of a one-candidate search (the best plan fixed) and of its chain call."""
    row = frame.iloc[0]
    plan = {k: int(row[k]) for k in PLAN_KEYS}
    plan.update(recompute=row["recompute"], offload=row["offload"], sequence_parallel=bool(row["sequence_parallel"]))
    case = {**scenario, "plan": {**scenario["plan"], **plan}}
    chain_seconds = []
    evaluate = search_module.evaluate

    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = evaluate(*args, **kwargs)
        chain_seconds.append(time.perf_counter() - start)
        return result

    totals = []
    search_module.evaluate = timed
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            search_module.search(case, catalog)
            totals.append(time.perf_counter() - start)
    finally:
        search_module.evaluate = evaluate
    return float(np.median(totals)), float(np.median(chain_seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="one-core search runs per scenario (best kept)")
    parser.add_argument("--sample", type=int, default=100, help="plans estimated one by one per scenario")
    args = parser.parse_args()
    every_core = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores = search_module.default_jobs()
    rng = np.random.default_rng(0)
    catalog = load_catalog()
    rows = []
    for name, scenario in SCENARIOS.items():
        if every_core:
            os.sched_setaffinity(0, {min(every_core)})
        seconds, frame = best_of(args.repeat, lambda: search_module.search(scenario, catalog, top=10, jobs=1))
        feasible = search_module.search(scenario, catalog, jobs=1)
        loop_seconds, looped = time_loop(scenario, catalog, feasible, args.sample, rng)
        fixed = fixed_cost(scenario, catalog, frame) if not rows else None
        if every_core:
            os.sched_setaffinity(0, every_core)
        pooled, _ = best_of(1, lambda: search_module.search(scenario, catalog, top=10, jobs=cores))
        rows.append((name, frame.attrs, seconds, pooled, loop_seconds, looped, fixed))
    print(f"{'scenario':<24} {'candidates':>11} {'evaluated':>9} {'fit':>7} {'search s':>9} {'plans/s':>9} "
          f"{'cand/s':>10} {'loop plans/s':>12} {f'{cores} cores s':>10}")
    for name, attrs, seconds, pooled, loop_seconds, looped, _ in rows:
        print(f"{name:<24} {attrs['candidates']:>11,} {attrs['evaluated']:>9,} {attrs['feasible']:>7,} "
              f"{seconds:>9.3f} {attrs['evaluated'] / seconds:>9,.0f} {attrs['candidates'] / seconds:>10,.0f} "
              f"{looped / loop_seconds:>12.1f} {pooled:>10.3f}")
    total, chain = rows[0][-1]
    print(f"fixed cost per search call (one candidate, median): {total * 1e3:.2f} ms, of which the chain "
          f"evaluating the plan {chain * 1e3:.2f} ms and the search itself {(total - chain) * 1e3:.2f} ms")
    best = search_module.search(SCENARIOS["gpt3-175b x 1024 A100"], catalog, top=1, jobs=cores).iloc[0]
    print("best gpt3-175b x 1024 A100 plan: " + ", ".join(
        f"{k}={best[k]}" for k in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "recompute_every",
                                   "zero", "sequence_parallel", "offload"))
          + f"; step {best['step_time_s']:.2f} s, MFU {best['mfu']:.3f}")
    pricing = ["on_demand", "spot"]
    rank(RANK_SCENARIO, catalog, pricing=pricing, jobs=1)  # warm the op-table caches
    one, _ = best_of(1, lambda: rank(RANK_SCENARIO, catalog, pricing=pricing, jobs=1))
    many, _ = best_of(1, lambda: rank(RANK_SCENARIO, catalog, pricing=pricing, jobs=cores))
    print(f"rank {RANK_SCENARIO} --pricing on_demand,spot: {one:.2f} s on 1 core, {many:.2f} s on {cores} cores")
    evaluated = sum(row[1]["evaluated"] for row in rows)
    rate = evaluated / sum(row[2] for row in rows)
    loop_rate = sum(row[5] for row in rows) / sum(row[4] for row in rows)
    gpt3 = rows[0]
    print(f"plans/s: {rate:.0f}; vs per-plan loop: {rate / loop_rate:.0f}; candidates: {gpt3[1]['candidates']}; "
          f"search s: {gpt3[2]:.3f}")


if __name__ == "__main__":
    main()
