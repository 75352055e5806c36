"""``perfmodel workload show NAME|CONFIG.json [--json]`` and ``perfmodel workload list``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from perfmodel.cli.common import print_json, print_table
from perfmodel.vocabulary import FRAMEWORKS
from perfmodel.workloads import ZOO_NAMES, get_workload, load_hf_config, load_workloads_yaml


def register(subparsers) -> None:
    parser = subparsers.add_parser("workload", help="show a model's parameters, FLOPs and op classes")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="parameters, FLOPs per sample and the per-op-class table")
    show.add_argument("name", help="zoo model name (see 'perfmodel workload list'), a registered one, "
                                   "or the path of a HuggingFace config.json (or of the model folder holding it)")
    show.add_argument("--models", metavar="FILE", action="append", default=[],
                      help="YAML file of user models to register first (repeatable)")
    show.add_argument("--gpu", help="also time each forward op on this catalog GPU: predicted efficiency "
                                    "and whether it is compute-, memory- or launch-bound")
    show.add_argument("--precision", help="with --gpu: fp32, tf32, fp16, bf16 or fp8 (default bf16)")
    show.add_argument("--framework", choices=FRAMEWORKS, metavar="NAME",
                      help="with --gpu: software stack, which sets the host dispatch time per kernel (the launch "
                           "floor), the attention kernel and the ops it runs "
                           f"({', '.join(FRAMEWORKS)}; default: not stated, the pooled values)")
    show.add_argument("--attention", choices=("fused", "unfused"),
                      help="with --gpu: attention kernel (default: the framework's, else fused on Ampere and newer)")
    show.add_argument("--calibration", metavar="PROFILE", help="with --gpu: efficiency profile YAML")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=handle_show)
    listing = actions.add_parser("list", help="the zoo's model names")
    listing.set_defaults(func=handle_list)


def handle_show(args) -> int:
    for path in args.models:
        load_workloads_yaml(path)
    if args.name.endswith(".json") or Path(args.name).exists():
        workload = load_hf_config(args.name)
    else:
        workload = get_workload(args.name)
    given = [flag for flag, value in (("--precision", args.precision), ("--framework", args.framework),
                                      ("--attention", args.attention), ("--calibration", args.calibration)) if value]
    if given and not args.gpu:
        raise ValueError(f"{', '.join(given)}: only used to time the ops on a GPU; give --gpu as well "
                         "(e.g. --gpu H100-SXM5-80GB)")
    precision = args.precision or "bf16"
    summary = workload.summary()
    if workload.shape is not None:
        summary["shape"] = asdict(workload.shape)
    points = None
    if args.gpu:
        from perfmodel.cli.common import attention_of, catalog_from, profile_from
        from perfmodel.models.compute import roofline_points

        gpu = catalog_from(args).gpu(args.gpu)
        flash = attention_of(args, gpu)
        points = roofline_points(workload, gpu, precision, profile_from(args), framework=args.framework,
                                 flash_attention=flash)
        summary["ops_on_gpu"] = {"gpu": args.gpu, "precision": precision, "micro_batch": 1,
                                 "framework": args.framework, "flash_attention": flash,
                                 "ops": points[["op", "kind", "time_s", "efficiency", "bound"]].to_dict(orient="records")}
    if args.json:
        print_json(summary)
        return 0
    for key in ("name", "family", "params", "active_params", "tokens_per_sample", "layers", "forward_flops_per_sample",
                "training_flops_per_sample"):
        print(f"{key:27s} {summary[key] if isinstance(summary[key], str) else _number(summary[key])}")
    print()
    rows = [{"kind": kind, **values} for kind, values in summary["by_kind"].items()]
    print_table(rows, ["kind", "ops", "flops", "bytes", "params", "saved_bytes"])
    print("\n(per sample, forward; bf16, no flash attention, tp = cp = 1)")
    host = summary.get("host_ops")
    if host:
        print(f"host-side bookkeeping ({', '.join(host['ops'])}): {host['forward_per_step']:,.0f} + "
              f"{host['forward_per_sample']:,.0f} per sample ops forward, {host['backward_per_step']:,.0f} backward "
              "per step, each a host dispatch in an eager framework (none in a traced graph: TensorFlow, JAX)")
    if points is not None:
        from perfmodel.cli.common import attention_text

        stack = f"framework {args.framework}" if args.framework else "framework not stated (--framework)"
        print(f"\nforward ops on {args.gpu}, {precision}, micro-batch 1, {stack}, {attention_text(args, flash)} "
              "(efficiency = attained / dense peak):")
        print_table([{"op": r.op, "kind": r.kind, "time_us": r.time_s * 1e6, "efficiency": r.efficiency,
                      "bound": r.bound} for r in points.itertuples()])
    return 0


def handle_list(args) -> int:
    print("\n".join(ZOO_NAMES))
    return 0


def _number(value) -> str:
    return "-" if value is None else f"{value:.6g}"
