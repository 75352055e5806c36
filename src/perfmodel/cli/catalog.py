"""`perfmodel catalog list|show|schema`: what hardware the catalog knows, one entry in full, its schema."""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, print_json, print_table
from perfmodel.hardware.catalog import SECTIONS, catalog_schema
from perfmodel.units import format_memory, format_quantity

# field name -> units dimension, for printing SI values to people
_DIMENSION = {"memory": "bytes", "memory_usable": "bytes", "l2_cache": "bytes", "host_memory": "bytes", "memory_bandwidth": "bandwidth",
              "nvlink_bandwidth_per_direction": "bandwidth", "bandwidth_per_direction": "bandwidth",
              "network_bandwidth": "bandwidth", "tdp": "power", "idle_power": "power",
              "boost_clock_hz": "frequency", "latency": "time"}


def register(subparsers) -> None:
    parser = subparsers.add_parser("catalog", help="list, show and validate hardware catalog entries")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list GPUs, links, nodes and/or instances")
    listing.add_argument("section", nargs="?", choices=list(SECTIONS), help="one section (default: all)")
    listing.add_argument("--json", action="store_true", help="JSON in SI units")
    show = actions.add_parser("show", help="one entry in full, by name or alias (e.g. H100, aws/p4d.24xlarge)")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="JSON in SI units")
    schema = actions.add_parser("schema", help="print the JSON Schema of a catalog file (for editors)")
    for sub, func in ((listing, run_list), (show, run_show), (schema, run_schema)):
        sub.set_defaults(func=func)


def run_list(args) -> int:
    catalog = catalog_from(args)
    sections = [args.section] if args.section else list(SECTIONS)
    if args.json:
        print_json({s: [e.model_dump(mode="json") for e in getattr(catalog, s).values()] for s in sections})
        return 0
    for section in sections:
        if len(sections) > 1:
            print(f"\n{section} ({len(getattr(catalog, section))})")
        print_table([_row(section, key, entry) for key, entry in getattr(catalog, section).items()])
    return 0


def _row(section: str, key: str, entry) -> dict:
    if section == "gpus":
        bf16 = entry.peak_flops.bf16 or entry.peak_flops.fp16
        return {"name": key, "arch": entry.architecture, "memory": _fmt(entry.memory, "bytes"),
                "mem_bw": _fmt(entry.memory_bandwidth, "bandwidth"), "bf16/fp16 dense": _fmt(bf16, "flop_rate"),
                "tdp": _fmt(entry.tdp, "power")}
    if section == "links":
        return {"name": key, "kind": entry.kind,
                "per direction": _fmt(entry.bandwidth_per_direction, "bandwidth")}
    row = {"name": key, "gpus": f"{entry.gpus_per_node} x {entry.gpu}",
           "intra": f"{entry.intra or 'unknown'} ({entry.fabric})",
           "network": f"{entry.nics} x {entry.nic}" if entry.nic else "-"}
    if section == "instances":
        row.update({"on-demand $/h": entry.price_on_demand_usd_per_hour, "region": entry.region,
                    "as of": entry.price_as_of})
    return row


def run_show(args) -> int:
    entry = catalog_from(args).find(args.name)
    data = entry.model_dump(mode="json")
    if args.json:
        print_json(data)
        return 0
    for field, value in data.items():
        if field == "peak_flops":
            for precision, peak in value.items():
                print(f"{'peak ' + precision:<31} {_fmt(peak, 'flop_rate') or 'null (not supported or not found)'}")
        elif field == "price_spot_usd_per_hour" and value:
            print(f"{field:<31} {value['min']} .. {value['max']}")
        elif value not in (None, [], ""):
            shown = _fmt(value, _DIMENSION[field]) if field in _DIMENSION else value
            print(f"{field:<31} {', '.join(shown) if isinstance(shown, list) else shown}")
    return 0


def run_schema(args) -> int:
    print_json(catalog_schema())
    return 0


def _fmt(value, dimension: str) -> str | None:
    """A catalog value for people; memory sizes in binary units, as the catalog and nvidia-smi give them."""
    if value is None:
        return None
    return format_memory(value) if dimension == "bytes" else format_quantity(value, dimension)
