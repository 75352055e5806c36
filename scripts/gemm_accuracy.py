"""Accuracy of the GEMM kernel model (perfmodel.models.gemm) on the shipped NeuSight GEMM rows.

Prints, as JSON:

- ``leave_one_gpu_out``: for each GPU, the MAPE on its rows of a profile fitted (kernel stage of
  ``calibrate``) on the other GPUs' rows only -- the error on "a GPU we never measured";
- ``kfold``: k-fold MAPE (folds of rows, every GPU in every fit);
- ``fit``: the parameters fitted on all rows, with one standard error each;
- ``kernel_csv``: MAPE on the ``kernel.csv`` rows with the registered defaults and with the
  profile fitted on all GEMM rows (NeuSight and kernel.csv).

Fits use every ``--subsample``-th row (deterministic; 1 = all rows); scores use all rows.

Usage: ``PYTHONPATH=src python scripts/gemm_accuracy.py [--subsample 4] [--folds 5]``
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from perfmodel.calibration.fit import STAGES, calibrate
from perfmodel.calibration.measurements import load_measurements
from perfmodel.calibration.validate import validate
from perfmodel.hardware.catalog import load_catalog, shipped_data_path
from perfmodel.profile import CalibrationProfile

KERNEL_STAGE = tuple(stage for stage in STAGES if stage[0] == "kernel")


def mape(scored) -> float:
    return float(scored["ape"].mean())


def fit(rows, catalog):
    return calibrate(rows, catalog=catalog, stages=KERNEL_STAGE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subsample", type=int, default=4, help="fit on every N-th row (default 4)")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()

    folder = shipped_data_path("measurements")
    catalog = load_catalog()
    neusight = load_measurements(folder / "kernel_gemm_neusight.csv.gz")
    kernel_csv = load_measurements(folder / "kernel.csv")
    fitting = neusight.iloc[::args.subsample]

    report = {"rows": len(neusight), "fit_rows": len(fitting), "subsample": args.subsample,
              "leave_one_gpu_out": {}, "kfold": {}}
    for gpu in sorted(neusight["gpu"].unique()):
        profile = fit(fitting[fitting["gpu"] != gpu], catalog)
        report["leave_one_gpu_out"][gpu] = mape(validate(neusight[neusight["gpu"] == gpu], catalog, profile))
    report["leave_one_gpu_out"]["mean"] = float(np.mean(list(report["leave_one_gpu_out"].values())))

    fold_of_row = np.arange(len(neusight)) % args.folds
    scored = []
    for fold in range(args.folds):
        train = neusight[fold_of_row != fold].iloc[::args.subsample]
        held = validate(neusight[fold_of_row == fold], catalog, fit(train, catalog))
        scored.append(held)
    import pandas as pd

    kfold = pd.concat(scored)
    report["kfold"] = {"all": mape(kfold), **{g: float(x["ape"].mean()) for g, x in kfold.groupby("gpu")}}

    profile = fit(pd.concat([fitting, kernel_csv], ignore_index=True), catalog)
    report["fit"] = {key: [value, profile.uncertainty.get(key)] for key, value in sorted(profile.values.items())}
    report["in_sample"] = {g: float(x["ape"].mean())
                           for g, x in validate(neusight, catalog, profile).groupby("gpu")}
    report["kernel_csv"] = {"defaults": mape(validate(kernel_csv, catalog, CalibrationProfile())),
                            "fitted": mape(validate(kernel_csv, catalog, profile))}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
