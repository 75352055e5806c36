"""``python -m perfmodel.bench --out FILE.csv [--quick]``: measure this machine."""

from __future__ import annotations

import argparse
import os
import sys

from perfmodel.bench import run


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
