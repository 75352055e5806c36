"""Refit the interval model of a calibrated profile from its saved cross-validated rows.

``perfmodel calibrate --cv 5 --save-cv DIR -o PROFILE.yaml`` fits the parameters, the folds and
the leave-one-GPU-out study (about an hour on two cores) and writes the rows they predicted to
``DIR``.  The interval model (``perfmodel.calibration.intervals``) is fitted on those rows only, so
a change to it needs no new fits::

    python scripts/refit_intervals.py PROFILE.yaml DIR [FILE.csv ...] -o PROFILE.yaml

gives the profile ``calibrate`` would have written with the interval model of the current code
(same function: ``perfmodel.cli.calibrate.with_intervals``); ``FILE.csv ...``: the measurement
files the profile was calibrated on (default: the shipped measurements, as for ``calibrate``).
The parameters are not touched; a change that moves a prediction needs the full ``calibrate``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    import pandas as pd

    from perfmodel.calibration.measurements import load_measurements, shipped_measurements
    from perfmodel.cli.calibrate import CV_FILES, with_intervals
    from perfmodel.hardware.catalog import load_catalog
    from perfmodel.profile import load_profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="calibrated profile (its parameters are kept)")
    parser.add_argument("cv_dir", type=Path, help="directory written by calibrate --save-cv")
    parser.add_argument("files", nargs="*", metavar="FILE.csv",
                        help="measurement files the profile was fitted on (default: the shipped measurements)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="profile to write")
    args = parser.parse_args(argv)
    missing = [name for name in CV_FILES if not (args.cv_dir / name).exists()]
    if missing:
        raise SystemExit(f"{args.cv_dir}: no {', '.join(missing)} (run perfmodel calibrate --cv K --save-cv DIR)")
    profile = load_profile(args.profile)
    folds = profile.provenance.get("cross_validation")
    if not folds:
        raise SystemExit(f"{args.profile}: no cross_validation in its provenance (not made with calibrate --cv)")
    held_out, unseen_gpu = (pd.read_csv(args.cv_dir / name, index_col=0, low_memory=False) for name in CV_FILES)
    measurements = load_measurements(*args.files) if args.files else shipped_measurements()
    for name, frame in zip(CV_FILES, (held_out, unseen_gpu)):
        known = frame.index.isin(measurements.index)
        known[known] = (measurements.loc[frame.index[known], "id"].to_numpy() == frame["id"].to_numpy()[known])
        if not known.all():
            given = ", ".join(args.files) if args.files else "the shipped measurements"
            raise SystemExit(f"{args.cv_dir / name}: {int((~known).sum())} of its {len(frame)} rows are not rows of "
                             f"{given} (e.g. {', '.join(map(str, frame['id'][~known].head(3)))}); give the "
                             "measurement files the profile was calibrated on")
    profile = with_intervals(profile, held_out, unseen_gpu, measurements, load_catalog(),
                             {key: folds[key] for key in ("folds", "by", "seed")})
    profile.save(args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
