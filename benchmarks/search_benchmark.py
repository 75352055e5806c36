"""Time ``search`` on large plan spaces and compare it with ``estimate()`` called once per plan.

Scenarios (issue 6): GPT-3 175B on 1,024 A100-SXM4-80GB (8 per node on NVSwitch, 8 x HDR
InfiniBand per node, global batch 1536) and Llama-3-70B on 64, 128, 256 and 512 H100-SXM5-80GB
(8 x NDR per node, global batch 1024).  For each, ``search`` runs ``--repeat`` times (best time
kept); the plans passed to ``evaluate()`` are counted by wrapping it, and the candidates
enumerated before the validity rules are reported separately.  The catalog is loaded once and
passed to ``search`` and ``estimate`` alike, as a design-space sweep would do (``cold search s``
is one search that parses the catalog YAML itself, for reference).  Then ``--sample`` of the evaluated
plans are estimated one by one with ``estimate()`` (every plan field fixed) to time the per-plan
loop.  BLAS/OpenMP threads are pinned to 1 and the process to one core where the OS allows.

Run:  python benchmarks/search_benchmark.py [--repeat 5] [--sample 200] [--profile]
The last line is exactly ``plans/s: N; vs per-plan loop: R``.
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
from perfmodel.plans import RECOMPUTE_CODES  # noqa: E402

RECOMPUTE_NAMES = {code: name for name, code in RECOMPUTE_CODES.items()}


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


class CountingEvaluate:
    """Wraps perfmodel.plan_search.evaluate: counts the plans passed in and keeps the last batch."""

    def __init__(self, evaluate):
        self.evaluate, self.plans, self.last = evaluate, 0, None

    def __call__(self, workload, cluster, plans, **kwargs):
        self.plans += len(plans["tp"])
        self.last = plans
        return self.evaluate(workload, cluster, plans, **kwargs)


def time_search(scenario, catalog, repeat: int, counter: CountingEvaluate):
    best, frame = float("inf"), None
    for _ in range(repeat):
        counter.plans = 0
        start = time.perf_counter()
        frame = search_module.search(scenario, catalog)
        best = min(best, time.perf_counter() - start)
    return best, frame, counter.plans, counter.last


def time_loop(scenario, catalog, plans: dict, sample: int, rng) -> tuple[float, int]:
    picked = rng.choice(len(plans["tp"]), size=min(sample, len(plans["tp"])), replace=False)
    cases = []
    for i in picked:
        plan = {k: int(plans[k][i]) for k in ("tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch",
                                               "recompute_every", "zero")}
        plan["recompute"] = RECOMPUTE_NAMES[int(plans["recompute"][i])]
        plan["sequence_parallel"] = bool(plans["sequence_parallel"][i])
        cases.append({**scenario, "plan": {**scenario["plan"], **plan}})
    estimate(cases[0], catalog)  # warm the op-table caches, as search's repeats are warm
    start = time.perf_counter()
    for case in cases:
        estimate(case, catalog)
    return time.perf_counter() - start, len(cases)


def time_batch_evaluate(scenario, catalog, copies: int = 200):
    """Plans and seconds for one evaluate() call on ``copies`` x the scenario's valid plans."""
    from perfmodel.job import resolve
    from perfmodel.chain import evaluate
    from perfmodel.plans import check_plans, enumerate_plans, select
    from perfmodel.profile import default_profile

    scenario, workload, cluster = resolve(scenario, catalog)
    plans = enumerate_plans(scenario.plan, workload, cluster.num_gpus, cluster.gpus_per_node)
    valid = select(plans, check_plans(plans, workload, cluster.num_gpus, cluster.gpus_per_node) == 0)
    batch = {name: np.tile(values, copies) for name, values in valid.items()}
    arguments = dict(precision="bf16", flash_attention=True, optimizer="adam", profile=default_profile())
    evaluate(workload, cluster, batch, **arguments)  # warm the op-table cache
    start = time.perf_counter()
    evaluate(workload, cluster, batch, **arguments)
    return len(batch["tp"]), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="search runs per scenario (best kept)")
    parser.add_argument("--sample", type=int, default=200, help="plans estimated one by one per scenario")
    parser.add_argument("--profile", action="store_true", help="cProfile one search of the first scenario")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    counter = CountingEvaluate(search_module.evaluate)
    search_module.evaluate = counter
    rng = np.random.default_rng(0)
    catalog = load_catalog()
    total_plans = total_search = total_loop = total_looped = 0.0
    print(f"{'scenario':<24} {'candidates':>10} {'evaluated':>9} {'fit':>6} {'search s':>9} "
          f"{'plans/s':>10} {'cand/s':>10} {'loop plans/s':>12} {'cold search s':>13}")
    for name, scenario in SCENARIOS.items():
        seconds, frame, evaluated, plans = time_search(scenario, catalog, args.repeat, counter)
        assert evaluated == frame.attrs["evaluated"]
        loop_seconds, looped = time_loop(scenario, catalog, plans, args.sample, rng)
        start = time.perf_counter()
        search_module.search(scenario)
        cold = time.perf_counter() - start
        total_plans += evaluated
        total_search += seconds
        total_loop += loop_seconds
        total_looped += looped
        print(f"{name:<24} {frame.attrs['candidates']:>10} {evaluated:>9} {len(frame):>6} {seconds:>9.4f} "
              f"{evaluated / seconds:>10.0f} {frame.attrs['candidates'] / seconds:>10.0f} "
              f"{looped / loop_seconds:>12.1f} {cold:>13.4f}")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        search_module.search(next(iter(SCENARIOS.values())), catalog)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    batch, batch_seconds = time_batch_evaluate(next(iter(SCENARIOS.values())), catalog)
    print(f"evaluate() alone on {batch} plans in one call: {batch / batch_seconds:.0f} plans/s "
          "(search's fixed cost per call, ~10 ms, dominates at a few thousand valid plans)")
    rate = total_plans / total_search
    loop_rate = total_looped / total_loop
    print(f"plans/s: {rate:.0f}; vs per-plan loop: {rate / loop_rate:.0f}")


if __name__ == "__main__":
    main()
