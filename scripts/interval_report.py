"""Cross-validated residuals for the prediction intervals, and the coverage section of docs/accuracy.md.

    python scripts/interval_report.py compute --kind kfold --cache build/intervals   # 5-fold CV (~15 min)
    python scripts/interval_report.py compute --kind architecture --cache build/intervals  # leave-one-architecture-out
    python scripts/interval_report.py report --cache build/intervals [--write docs/accuracy.md]

``compute`` writes ``<cache>/<kind>.csv`` (the held-out validate() frame); ``report`` fits the
interval model on the k-fold frame and prints (or replaces in ``--write``) the markdown section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def compute(kind: str, cache: Path) -> None:
    from perfmodel.calibration.coverage import leave_group_out
    from perfmodel.calibration.fit import cross_validate
    from perfmodel.calibration.intervals import architectures
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.hardware.catalog import load_catalog

    catalog = load_catalog()
    measurements = shipped_measurements()
    start = time.time()
    if kind == "kfold":
        frame = cross_validate(measurements, k=5, seed=0, catalog=catalog)
    elif kind == "architecture":
        frame = leave_group_out(measurements, architectures(measurements["gpu"], catalog), catalog=catalog)
    else:
        frame = leave_group_out(measurements, measurements["source"], catalog=catalog)
    cache.mkdir(parents=True, exist_ok=True)
    frame.to_csv(cache / f"{kind}.csv")
    print(f"{kind}: {len(frame)} rows in {time.time() - start:.0f} s -> {cache / f'{kind}.csv'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["compute", "report"])
    parser.add_argument("--kind", choices=["kfold", "architecture", "source"], default="kfold")
    parser.add_argument("--cache", type=Path, default=Path("build/intervals"))
    parser.add_argument("--write", type=Path, help="replace the interval section of this markdown file")
    args = parser.parse_args(argv)
    if args.action == "compute":
        compute(args.kind, args.cache)
        return 0
    return report(args.cache, args.write)


if __name__ == "__main__":
    sys.exit(main())
