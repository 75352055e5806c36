"""How much the step-makeup interval term widens single-node GPT estimates.

    .venv/bin/python scripts/step_share_sweep.py

Estimates 90 single-node GPT configurations on 2-8 A100-SXM4-80GB (hidden 1,024-4,096, TP 1-8,
micro-batch 1 and 4, Megatron-LM, full recompute, fp16, sequence 2,048) with the shipped profile,
and prints the median 80 % interval width (high/low) per TP degree with and without the interval
model's step-makeup term (``perfmodel.calibration.intervals.untested_share``), and the share of
configurations it widens by more than 5 %.  Nothing is fitted here.
"""

from __future__ import annotations

import itertools

import numpy as np

from perfmodel import estimate
from perfmodel.profile import default_profile

SHAPES = ((1024, 24), (1536, 24), (2048, 24), (2560, 32), (4096, 32))  # (hidden, layers)


def scenario(hidden: int, layers: int, gpus: int, tp: int, micro_batch: int) -> dict:
    return {"workload": {"model": "transformer", "layers": layers, "hidden": hidden, "heads": hidden // 64,
                         "vocab": 51200, "seq_len": 2048},
            "framework": "megatron",
            "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": gpus, "gpus_per_node": gpus, "intra": "nvlink3"},
            "plan": {"precision": "fp16", "tp": tp, "pp": 1, "micro_batch": micro_batch, "global_batch": 64,
                     "recompute": "full"}}


def width(result) -> float:
    return result.interval_80["step_time_high_s"] / result.interval_80["step_time_low_s"]


def main() -> None:
    shipped = default_profile()
    model = shipped.provenance["interval_model"]
    train = {key: value for key, value in model["kinds"]["train"].items() if key != "shares"}
    without = shipped.model_copy(update={"provenance": {**shipped.provenance,
                                                         "interval_model": {**model, "kinds": {**model["kinds"],
                                                                                               "train": train}}}})
    rows = []
    for (hidden, layers), gpus, tp, micro_batch in itertools.product(SHAPES, (2, 4, 8), (1, 2, 4, 8), (1, 4)):
        if tp <= gpus:
            case = scenario(hidden, layers, gpus, tp, micro_batch)
            rows.append((tp, width(estimate(case, profile=without)), width(estimate(case, profile=shipped))))
    table = np.array(rows)
    print(f"{len(rows)} configurations; widened by more than 5 %: {np.mean(table[:, 2] > 1.05 * table[:, 1]):.0%}")
    print("tp  n   median high/low without -> with the term (max with)")
    for tp in (1, 2, 4, 8):
        mine = table[table[:, 0] == tp]
        print(f"{tp:<3d} {len(mine):<3d} {np.median(mine[:, 1]):.2f} -> {np.median(mine[:, 2]):.2f} ({mine[:, 2].max():.2f})")


if __name__ == "__main__":
    main()
