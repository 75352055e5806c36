"""``python -m perfmodel.bench --out FILE.csv [--quick]``: measure this machine."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from perfmodel.bench import make_context


def run(out: str | Path, quick: bool = False, device: str | None = None, gpu: str | None = None,
        only: list[str] | None = None):
    """Run the benchmarks (``only`` a subset of gemm, memcpy, allreduce, layer), write the rows to
    ``out`` (CSV, measurement format) and return them as a DataFrame.  Under ``torchrun`` only
    rank 0 writes."""
    import pandas as pd

    from perfmodel.bench import allreduce, gemm, layer, memcpy
    from perfmodel.calibration.measurements import COLUMNS

    benches = {"gemm": gemm.run, "memcpy": memcpy.run, "allreduce": allreduce.run,
               "layer": layer.run}
    chosen = only or list(benches)
    unknown = sorted(set(chosen) - set(benches))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; allowed: {', '.join(benches)}")
    ctx = make_context(device, gpu, quick)
    for name in chosen:
        benches[name](ctx, quick)
    frame = pd.DataFrame(ctx.rows).reindex(columns=list(COLUMNS))
    if ctx.rank == 0:
        frame.convert_dtypes().to_csv(out, index=False)  # whole numbers written as integers
    return frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perfmodel.bench",
        description="Measure GEMM, memory copy, all-reduce and one transformer layer with PyTorch "
                    "and write measurement rows (CSV).")
    parser.add_argument("--out", required=True, metavar="FILE.csv", help="CSV file to write")
    parser.add_argument("--quick", action="store_true", help="few small sizes, few repetitions")
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--gpu", help="value of the gpu column (default: catalog name of the device)")
    parser.add_argument("--only", help="comma-separated subset of gemm,memcpy,allreduce,layer")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",")] if args.only else None
    try:
        frame = run(args.out, quick=args.quick, device=args.device, gpu=args.gpu, only=only)
    except ValueError as error:
        print(f"perfmodel.bench: error: {error}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 wrote the file
        print(f"wrote {len(frame)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
