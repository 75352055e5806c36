"""`perfmodel roofline --gpu NAME --model ZOO_NAME [--precision bf16] [--micro-batch 1] [--framework NAME] [-o PNG] [--json]`."""

from __future__ import annotations

from perfmodel.cli.common import (attention_of, attention_text, catalog_from, count_arg, print_json, print_table,
                                  profile_from)
from perfmodel.vocabulary import FRAMEWORKS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "roofline", help="ridge points of a GPU and where each op of a model sits on its roofline")
    parser.add_argument("--gpu", required=True, help="catalog GPU name or alias")
    parser.add_argument("--model", required=True, help="zoo model name (see 'perfmodel workload')")
    parser.add_argument("--precision", default="bf16", help="fp32, tf32, fp16, bf16 or fp8 (default bf16)")
    parser.add_argument("--micro-batch", type=count_arg("micro_batch"), default=1, help="samples per GPU (default 1)")
    parser.add_argument("--framework", choices=FRAMEWORKS, metavar="NAME",
                        help="software stack whose host dispatch time per kernel sets the launch floor "
                             f"({', '.join(FRAMEWORKS)}; default: not stated, the parameter's prior)")
    parser.add_argument("--attention", choices=("fused", "unfused"),
                        help="attention kernel (default: the framework's, else fused on Ampere and newer)")
    parser.add_argument("-o", "--output", metavar="PNG", help="write the roofline figure")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calibration", metavar="PROFILE", help="efficiency profile YAML")
    parser.set_defaults(func=run)


def run(args) -> int:
    from perfmodel.models.compute import host_dispatch_seconds, ridge_points, roofline_points
    from perfmodel.inputs import check_output_path
    from perfmodel.workloads import get_workload

    if args.output:
        check_output_path(args.output, "the figure")
    gpu = catalog_from(args).gpu(args.gpu)
    profile = profile_from(args)
    flash = attention_of(args, gpu)
    points = roofline_points(get_workload(args.model), gpu, args.precision, profile, args.micro_batch,
                             args.framework, flash)
    host_s = host_dispatch_seconds(profile, args.framework, gpu.architecture)
    host_text = (f"host dispatch {host_s * 1e6:.0f} us per kernel (host of {gpu.architecture} systems), "
                 f"{f'framework {args.framework}' if args.framework else 'framework not stated'}"
                 f"{': the prior, no host-bound rows fitted' if profile.prior_only('host_dispatch_time', args.framework) else ''}")
    ridges = ridge_points(gpu)
    if args.output:
        from perfmodel.plots.roofline import roofline

        roofline(gpu, points, list(ridges), workload=args.model).savefig(args.output, dpi=120)
    memory_bound = points.loc[points["bound"] == "memory", "op"].tolist()
    launch_bound = points.loc[points["bound"] == "launch", "op"].tolist()
    if args.json:
        print_json({"gpu": gpu.name, "model": args.model, "precision": args.precision,
                    "micro_batch": args.micro_batch, "framework": args.framework, "flash_attention": flash,
                    "host_dispatch_time_s": host_s,
                    "memory_bandwidth_Bps": gpu.memory_bandwidth,
                    "ridge_points_flop_per_byte": ridges, "ops": points.to_dict(orient="records"),
                    "memory_bound": memory_bound, "launch_bound": launch_bound})
        return 0
    print(f"{gpu.name}: HBM {gpu.memory_bandwidth / 1e12:.2f} TB/s; ridge points (FLOP/byte): "
          + ", ".join(f"{p} {r:.0f}" for p, r in ridges.items()))
    print(f"{args.model}, {args.precision}, micro-batch {args.micro_batch}, {attention_text(args, flash)}, "
          "forward pass, one instance per op:")
    print_table([{"op": r.op, "kind": r.kind, "GFLOP": r.flops / 1e9, "MB": r.bytes / 1e6,
                  "FLOP/byte": r.intensity, "TFLOP/s": r.attained_flops / 1e12, "efficiency": r.efficiency,
                  "time_us": r.time_s * 1e6, "bound": r.bound} for r in points.itertuples()])
    if (points["efficiency"] > 1).any():
        print(f"efficiency above 1: FP32 3x3 convolutions run by Winograd (conv_winograd_gain "
              f"{profile.get('conv_winograd_gain'):.2f}) do fewer multiplications than the FLOP counted")
    print(f"memory-bound: {', '.join(memory_bound) or 'none'}")
    print(f"launch-bound ({host_text}, longer than the kernel): {', '.join(launch_bound) or 'none'}")
    if args.output:
        print(f"wrote {args.output}")
    return 0
