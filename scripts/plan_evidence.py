"""Evidence behind two plan-choice defaults of perfmodel.plans, from the shipped training rows.

Prints, as JSON:

- ``memory_share``: for each training row the model predicts, the share of GPU memory its plan
  needs by the model's accounting (open plan fields chosen with no headroom): quantiles, the count
  above 90 % and 95 %, and the largest.  ``DEFAULT_MEMORY_HEADROOM`` (0.10) is what the 95th
  percentile of published runs leaves free.
- ``within_job_spread``: over rows that share source, model, GPU and GPU count but differ in plan,
  the 80th percentile of |log(measured/predicted) - the job's mean|: how far apart the model's
  errors on two plans of one job are.  ``PLAN_TIE_FRACTION`` (0.10) stays below it.

Usage: ``PYTHONPATH=src python scripts/plan_evidence.py``
"""

from __future__ import annotations

import json

import numpy as np

import perfmodel
from perfmodel.calibration.intervals import rate_ratio
from perfmodel.calibration.measurements import source_group
from perfmodel.calibration.predictors.train import scenario_of
from perfmodel.calibration.validate import validate

JOB = ["group", "model", "layers", "hidden", "seq_len", "gpu", "num_gpus"]
PLAN = ["tp", "pp", "dp", "cp", "vp", "micro_batch", "global_batch", "recompute", "zero"]


def memory_share(rows) -> dict:
    shares = []
    for _, row in rows.iterrows():
        try:  # rows the model cannot predict (a model not in the zoo, an unknown GPU) are left out
            result = perfmodel.estimate(scenario_of(row))  # a measured run's plan: no headroom
        except ValueError:
            continue
        if result.feasible:
            shares.append(result.memory["total"] / result.memory["capacity"])
    shares = np.array(shares)
    return {"rows": len(shares), "quantiles": {str(q): round(float(np.quantile(shares, q)), 3)
                                               for q in (0.5, 0.8, 0.9, 0.95, 0.99)},
            "above_0.90": int((shares > 0.90).sum()), "above_0.95": int((shares > 0.95).sum()),
            "largest": round(float(shares.max()), 3)}


def within_job_spread(rows) -> dict:
    result = validate(rows)
    r = np.log(rate_ratio(result["metric"].to_numpy(), result["measured"].to_numpy(), result["predicted"].to_numpy()))
    rows = rows.assign(r=r, group=rows["source"].map(source_group))[np.isfinite(r)]
    rows = rows.assign(**{name: rows[name].map(str) for name in JOB + PLAN})
    deviations, jobs = [], 0
    for _, members in rows.groupby(JOB):
        if len(members[PLAN].drop_duplicates()) > 1:
            deviations.extend(members["r"] - members["r"].mean())
            jobs += 1
    deviations = np.abs(deviations)
    return {"rows": len(deviations), "jobs": jobs, "p80_abs_log": round(float(np.quantile(deviations, 0.8)), 3)}


def main() -> None:
    rows = perfmodel.shipped_measurements()
    rows = rows[rows["kind"] == "train"]
    print(json.dumps({"memory_share": memory_share(rows), "within_job_spread": within_job_spread(rows)}, indent=2))


if __name__ == "__main__":
    main()
