"""Training rows of one GPU architecture, predicted by a training-stage fit that never saw them.

For each architecture with training rows, the training stage of ``calibrate`` is refitted on the
other architectures' training rows (the kernel and collective stages' values kept from the shipped
profile: they are fitted on GEMM, copy and collective rows), and the held-out rows are scored twice:

- ``inherited``: as the profile resolves an architecture without values of its own
  (:meth:`perfmodel.profile.CalibrationProfile.applying_key`: the newest generation of a line takes
  its nearest fitted predecessor's clock, attention and convolution rates, an interior one the median);
- ``median``: those three from the median (log space) of the architectures whose rows determined
  them, one or more (the shipped profile's pooled value needs two: with one, a generation without
  rows fell back to the bare prior before the inheriting rule).

Prints one JSON line per architecture: rows, MAPE, median APE and median log(predicted/measured) of
each variant, and which keys the inherited variant used.  About 16 CPU-minutes per architecture.

Usage: ``PYTHONPATH=src python scripts/architecture_holdout.py [--jobs 3] [Hopper Ampere Volta]``
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor


def holdout(architecture: str) -> dict:
    import numpy as np

    from perfmodel.calibration.fit import STAGES, calibrate
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.calibration.validate import validate
    from perfmodel.hardware.catalog import load_catalog
    from perfmodel.parameters import PARAMETERS
    from perfmodel.profile import CalibrationProfile, default_profile, split_key

    catalog = load_catalog()
    train_stage = next(stage for stage in STAGES if stage[0] == "train")
    shipped = default_profile()
    keep = {key for key in shipped.values if split_key(key)[0] not in train_stage[2]}
    start = CalibrationProfile(values={k: shipped.values[k] for k in keep},
                               uncertainty={k: v for k, v in shipped.uncertainty.items() if k in keep})
    rows = shipped_measurements()
    rows = rows[rows["kind"] == "train"]
    held = np.array([catalog.gpu(gpu).architecture == architecture for gpu in rows["gpu"]])
    fitted = calibrate(rows[~held], profile=start, stages=(train_stage,), catalog=catalog)
    fitted = fitted.model_copy(update={"interval": {}})
    inheriting = [name for name, parameter in PARAMETERS.items() if parameter.inherits]
    undetermined = set(fitted.provenance.get("not_determined", ()))
    medians = {}
    for name in inheriting:  # the median (log space) of the groups the rows determined, one or more
        determined = [value for key, value in fitted.values.items()
                      if split_key(key)[0] == name and split_key(key)[1] and key not in undetermined]
        if determined:
            medians[f"{name}[{architecture}]"] = float(np.exp(np.median(np.log(determined))))
    median = fitted.with_values(**medians)
    out = {"architecture": architecture, "rows": int(held.sum()),
           "inherited_keys": {name: fitted.applying_key(name, architecture) for name in inheriting}}
    for label, profile in (("inherited", fitted), ("median", median)):
        scored = validate(rows[held], catalog, profile)
        out[label] = {"mape": float(scored["ape"].mean()), "median_ape": float(scored["ape"].median()),
                      "median_log_ratio": float(np.log(scored["predicted"] / scored["measured"]).median())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("architectures", nargs="*", default=["Hopper", "Ampere", "Volta"])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(holdout, args.architectures):
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
