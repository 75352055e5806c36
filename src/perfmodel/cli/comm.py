"""``perfmodel comm``: modelled nccl-tests table (time, algbw, busbw) of a collective on a cluster.

The cluster is given like a scenario's hardware: ``--gpu NAME --nodes N [--gpus-per-node G]
[--intra LINK] [--inter "8 x ib-ndr"]`` or ``--instance provider/name --nodes N``.
"""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, count_arg, print_json, print_table, profile_from
from perfmodel.inputs import INTEGER_LIMITS, check_output_path, excerpt
from perfmodel.models import comm
from perfmodel.units import parse_quantity


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "comm", help="collective time, algbw and busbw by message size and algorithm",
        description="Model a collective on a cluster and print the nccl-tests columns "
                    "(time, algbw, busbw) per message size and algorithm.")
    hardware = parser.add_argument_group("cluster (a GPU and a shape, or an instance)")
    hardware.add_argument("--gpu", help="catalog GPU name, e.g. H100-SXM5-80GB")
    hardware.add_argument("--instance", help="catalog instance, e.g. aws/p5.48xlarge")
    hardware.add_argument("--nodes", type=count_arg("nodes"), default=1, help="number of nodes (default 1)")
    hardware.add_argument("--gpus-per-node", type=count_arg("gpus_per_node"), help="GPUs per node (default: the GPU's usual)")
    hardware.add_argument("--intra", help="intra-node link, e.g. nvlink4, pcie5 (default: the GPU's usual)")
    hardware.add_argument("--inter", help="network per node, e.g. '8 x ib-ndr', '4 x roce-400', efa-3200")
    parser.add_argument("--collective", default="all_reduce", choices=comm.COLLECTIVES)
    parser.add_argument("--sizes", default="1KiB..16GiB",
                        help="FROM..TO doubling (nccl-tests -b/-e/-f 2), or one size; default 1KiB..16GiB")
    parser.add_argument("--algorithm", choices=comm.ALGORITHMS,
                        help="only this algorithm (default: every algorithm that can run, and auto)")
    parser.add_argument("--group-size", type=count_arg("group_size"), help="GPUs in the collective (default: all)")
    parser.add_argument("--calibration", metavar="PROFILE", help="efficiency profile YAML")
    parser.add_argument("--json", action="store_true", help="print JSON records")
    parser.add_argument("-o", "--output", metavar="PLOT.png", help="also save a busbw-vs-size figure")
    parser.set_defaults(func=_run)


def parse_sizes(text: str) -> list[float]:
    """'1KiB..16GiB' -> [1024, 2048, ..., 2**34]; '64MB' -> [64e6]."""
    low_text, _, high_text = str(text).partition("..")
    low = parse_quantity(low_text, "bytes")
    high = parse_quantity(high_text, "bytes") if high_text else low
    limit = INTEGER_LIMITS["message_bytes"]
    if not (0 < low <= high <= limit):
        raise ValueError(f"--sizes {excerpt(text)}: need 0 < FROM <= TO <= {limit:,} bytes (1 PiB)")
    sizes = [low]
    while sizes[-1] * 2 <= high:
        sizes.append(sizes[-1] * 2)
    return sizes


def _run(args) -> int:
    if args.output:
        check_output_path(args.output, "the figure")
    catalog = catalog_from(args)
    if args.instance:
        cluster = catalog.cluster(instance=args.instance, nodes=args.nodes, gpu=args.gpu)
    else:
        per_node = args.gpus_per_node or catalog.cluster(gpu=args.gpu, intra=args.intra).gpus_per_node
        cluster = catalog.cluster(gpu=args.gpu, num_gpus=args.nodes * per_node, gpus_per_node=per_node,
                                  intra=args.intra, inter=args.inter)
    algorithms = (args.algorithm,) if args.algorithm else comm.ALGORITHMS
    table = comm.sweep(cluster, profile_from(args), args.collective, parse_sizes(args.sizes), algorithms,
                       group_size=args.group_size)
    if args.output:
        from perfmodel.plots.comm import busbw_figure

        title = (f"{args.collective} on {cluster.nodes} x {cluster.gpus_per_node} {cluster.gpu.name} "
                 f"(model)")
        busbw_figure(table, title).savefig(args.output, dpi=120)
    records = [{"size_bytes": int(row.size), "algorithm": row.algorithm, "time_us": row.time_s * 1e6, "algbw_GBps": row.algbw / 1e9,
                "busbw_GBps": row.busbw / 1e9} for row in table.itertuples()]
    if args.json:
        print_json({"cluster": {"gpu": cluster.gpu.name, "nodes": cluster.nodes,
                                "gpus_per_node": cluster.gpus_per_node, "intra": cluster.intra.name,
                                "inter": f"{cluster.nics_per_node} x {cluster.nic.name}" if cluster.nic else None},
                    "collective": args.collective, "rows": records})
    else:
        print_table(records, ["size_bytes", "algorithm", "time_us", "algbw_GBps", "busbw_GBps"])
    return 0
