"""`perfmodel scaling SCENARIO --gpus 1,2,4,... [--weak] [--json] [-o plot.png]`."""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, print_json, print_table, profile_from
from perfmodel import scaling
from perfmodel.inputs import InputError, check_count, check_output_path, excerpt


def register(subparsers) -> None:
    parser = subparsers.add_parser("scaling", help="strong or weak scaling over GPU counts")
    parser.add_argument("scenario")
    parser.add_argument("--gpus", required=True, help="comma-separated GPU counts, e.g. 8,16,32,64")
    parser.add_argument("--weak", action="store_true", help="weak scaling (fixed per-GPU batch)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-o", "--output", metavar="PNG", help="write a scaling plot")
    parser.add_argument("--calibration", metavar="PROFILE")
    parser.set_defaults(func=run)


def run(args) -> int:
    try:
        counts = [check_count("num_gpus", int(x)) for x in args.gpus.split(",") if x.strip()]
    except InputError as error:
        raise ValueError(f"--gpus: {error}") from None
    except ValueError:
        raise ValueError(f"--gpus {excerpt(args.gpus)}: expected comma-separated whole numbers, "
                         "e.g. 8,16,32") from None
    if not counts:
        raise ValueError("--gpus: give at least one GPU count, e.g. 8,16,32")
    if args.output:
        check_output_path(args.output, "the figure")
    frame = scaling(args.scenario, counts, "weak" if args.weak else "strong", catalog_from(args), profile_from(args))
    if args.output:
        from perfmodel.plots import scaling_plot

        scaling_plot(frame).savefig(args.output, dpi=120, bbox_inches="tight")
    if args.json:
        print_json({"mode": frame.attrs["mode"], "rows": frame.to_dict(orient="records")})
        return 0
    print_table(frame.to_dict(orient="records"))
    return 0
