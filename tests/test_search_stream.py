"""The streaming search: any chunk size and any number of worker processes give the same top plans and
the same counts as one pass; the grid covers the documented space; rank over a pool equals rank in
one process."""

import numpy as np
import pandas as pd
import pytest

import perfmodel.plan_search as plan_search
from perfmodel.plans import RECOMPUTE_CODES, search_grid
from perfmodel.ranking import rank
from perfmodel.scenario import Plan
from perfmodel.workloads import get_workload

GPT3 = {"workload": {"model": "gpt3-13b"},
        "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 64, "gpus_per_node": 8, "intra": "nvlink3",
                     "inter": "8 x ib-hdr"},
        "plan": {"global_batch": 96}}
PLAN_COLUMNS = ["tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "recompute_every", "zero",
                "sequence_parallel", "offload"]


def same(a, b):
    # the same plans in the same order; values equal to rounding (numpy's sums and reductions may
    # group a chunk's array differently from the whole grid's)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_exact=False,
                                  rtol=1e-12, atol=0.0)
    for key in ("infeasible", "evaluated", "feasible", "candidates"):
        assert a.attrs[key] == b.attrs[key], key


@pytest.fixture(scope="module")
def full():
    return plan_search.search(GPT3)


@pytest.mark.parametrize("chunk", [1, 97, 5000])
def test_a_chunked_search_returns_the_top_plans_of_one_pass(full, chunk):
    top = plan_search.search(GPT3, top=25, chunk=chunk)
    same(top, full.head(25))
    assert full.attrs["feasible"] == len(full) > 25


def test_top_k_is_the_head_of_the_full_ranking_and_counts_do_not_depend_on_it(full):
    for k in (1, 10, 1000):
        same(plan_search.search(GPT3, top=k), full.head(k))


def test_a_pool_of_workers_returns_what_one_process_returns(full, monkeypatch):
    monkeypatch.setattr(plan_search, "POOL_MIN_CANDIDATES", 0)
    same(plan_search.search(GPT3, top=40, jobs=2, chunk=3000), full.head(40))
    same(plan_search.search(GPT3, jobs=3), full)


def test_the_counts_add_up_to_the_grid(full):
    workload = get_workload("gpt3-13b")
    grid = search_grid(Plan(global_batch=96), workload, 64, 8)
    assert full.attrs["candidates"] == grid.size == int(np.prod(grid.shape))
    # every candidate of the grid once: blocks of any size tile the flat index
    seen = []
    for first in range(0, grid.layouts, 37):
        block = grid.block(first, min(grid.layouts, first + 37))
        rows, columns = np.nonzero(np.ones(np.broadcast(*block.values()).shape, dtype=bool))
        taken = grid.take(block, rows, columns)
        seen.append(np.stack([taken[name] for name in ("tp", "pp", "cp", "vp", "micro_batch", "recompute",
                                                        "recompute_every", "zero", "sequence_parallel", "offload")]))
    seen = np.concatenate(seen, axis=1)
    assert seen.shape[1] == grid.size == len(np.unique(seen, axis=1).T)


def test_the_grid_has_the_documented_knobs():
    workload = get_workload("gpt3-175b")
    grid = search_grid(Plan(global_batch=1536), workload, 1024, 8, flash_attention=True)
    values = {name: set(values.tolist()) for axis in grid.axes for name, values in axis.items()}
    assert values["micro_batch"] == {d for d in range(1, 1537) if 1536 % d == 0}  # 3, 6, 12 ... included
    assert values["vp"] == {d for d in range(1, 97) if 96 % d == 0}
    assert values["sequence_parallel"] == {0, 1}
    assert values["zero"] == {0, 1, 2, 3}
    assert values["offload"] == {0, 1, 2, 3}
    assert values["cp"] == {1, 2, 4, 8} and values["tp"] == {1, 2, 4, 8}
    recompute = set(zip(grid.axes[5]["recompute"].tolist(), grid.axes[5]["recompute_every"].tolist()))
    assert {(RECOMPUTE_CODES["none"], 1), (RECOMPUTE_CODES["full"], 1), (RECOMPUTE_CODES["sqrt"], 1)} <= recompute
    assert {k for code, k in recompute if code == RECOMPUTE_CODES["every_k"]} == {2, 4, 8, 16, 32, 64}
    assert grid.size >= 10_000_000


def test_a_fully_fixed_plan_is_one_candidate():
    case = {**GPT3, "plan": {"global_batch": 96, "tp": 8, "pp": 2, "cp": 1, "vp": 1, "micro_batch": 1,
                             "recompute": "full", "zero": 1, "sequence_parallel": True, "offload": "none"}}
    frame = plan_search.search(case)
    assert frame.attrs["candidates"] == frame.attrs["evaluated"] == 1 == len(frame)


@pytest.mark.parametrize("argument", [{"top": 0}, {"chunk": 0}, {"jobs": 0}])
def test_bad_arguments_are_one_line_errors(argument):
    with pytest.raises(ValueError, match=next(iter(argument))):
        plan_search.search(GPT3, **argument)


def test_rank_over_a_pool_is_rank_in_one_process():
    options = dict(instances="aws/p4d.24xlarge,aws/p5.48xlarge,gcp/a3-highgpu-8g", nodes=[1, 2, 8, 32],
                   pricing=["on_demand", "spot"])
    serial = rank("examples/gpt3-175b-whatif.yaml", **options, jobs=1)
    pooled = rank("examples/gpt3-175b-whatif.yaml", **options, jobs=2)
    pd.testing.assert_frame_equal(serial, pooled, check_exact=True)
    assert serial["feasible"].any()
    with pytest.raises(ValueError, match="jobs"):
        rank("examples/gpt3-175b-whatif.yaml", **options, jobs=0)


def test_memory_is_bounded_by_the_chunk_not_by_the_space():
    import tracemalloc

    big = {"workload": {"model": "gpt3-175b"}, "hardware": {**GPT3["hardware"], "num_gpus": 1024},
           "plan": {"global_batch": 1536}}
    peaks, sizes = [], []
    for case in (GPT3, big):
        plan_search.search(case, top=10, chunk=8192)  # op-table caches warm, as in a sweep
        tracemalloc.start()
        frame = plan_search.search(case, top=10, chunk=8192)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        sizes.append(frame.attrs["candidates"])
    assert sizes[1] > 4 * sizes[0] and sizes[1] >= 10_000_000
    # a 4x larger space in the same memory; far below one int64 per candidate and plan field
    assert peaks[1] < 1.5 * peaks[0] + 2e6
    assert peaks[1] < 0.05 * sizes[1] * 8 * 12


@pytest.mark.parametrize("command", [["search", "examples/bert-large-8xv100.yaml", "--top", "3", "--json"],
                                     ["rank", "examples/gpt3-175b-whatif.yaml", "--instances", "aws/p5.48xlarge",
                                      "--nodes", "16,32", "--json"]])
def test_jobs_flag_gives_the_same_answer(capsys, command):
    import json

    from perfmodel.cli import main

    answers = []
    for jobs in ("1", "2"):
        assert main([*command, "--jobs", jobs]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1]
    assert main([*command, "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
