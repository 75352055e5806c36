"""`perfmodel check SCENARIO [--json]`: validate a scenario file and show the hardware it resolves to.

It resolves the scenario exactly as ``estimate`` does (:func:`perfmodel.job.resolve`: the
file, the workload, the cluster), so a scenario ``check`` calls valid is one ``estimate`` accepts.
"""

from __future__ import annotations

from perfmodel.cli.common import catalog_from, print_json
from perfmodel.job import resolve
from perfmodel.units import format_quantity


def register(subparsers) -> None:
    parser = subparsers.add_parser("check", help="validate a scenario file and print what it resolves to")
    parser.add_argument("scenario", help="scenario file (YAML or JSON)")
    parser.add_argument("--json", action="store_true", help="JSON in SI units")
    parser.set_defaults(func=run)


def resolved(cluster, pricing: str) -> dict:
    """The resolved cluster as flat JSON-ready values (SI units; unit in the key otherwise)."""
    inst = cluster.instance
    return {
        "gpu": cluster.gpu.name,
        "num_gpus": cluster.num_gpus,
        "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node,
        "intra": cluster.intra.name,
        "fabric": cluster.fabric,
        "intra_bandwidth_per_direction": cluster.intra.bandwidth_per_direction,
        "nic": cluster.nic.name if cluster.nic else None,
        "nics_per_node": cluster.nics_per_node,
        "inter_bandwidth_per_node": cluster.inter_bandwidth_per_node,
        "instance": f"{inst.provider}/{inst.name}" if inst else None,
        "pricing": pricing,
        "price_usd_per_hour": inst.price_usd_per_hour(pricing) if inst else None,
        "price_as_of": str(inst.price_as_of) if inst and inst.price_as_of else None,
    }


def run(args) -> int:
    scenario, _, cluster = resolve(args.scenario, catalog_from(args))  # the rules estimate applies
    pricing = scenario.run.pricing if scenario.run else "on_demand"
    hardware = resolved(cluster, pricing)
    if args.json:
        print_json({"scenario": scenario.model_dump(mode="json", exclude_none=True), "cluster": hardware})
        return 0
    print(f"{args.scenario}: valid")
    print(f"workload   {scenario.workload.model_dump(exclude_none=True)}")
    print(f"hardware   {hardware['num_gpus']} x {hardware['gpu']} = {hardware['nodes']} node(s) x "
          f"{hardware['gpus_per_node']}" + (f"  [{hardware['instance']}]" if hardware["instance"] else ""))
    print(f"  intra    {hardware['intra']} ({hardware['fabric']}), "
          f"{format_quantity(hardware['intra_bandwidth_per_direction'], 'bandwidth')} per GPU per direction")
    if hardware["nic"]:
        print(f"  network  {hardware['nics_per_node']} x {hardware['nic']} = "
              f"{format_quantity(hardware['inter_bandwidth_per_node'], 'bandwidth')} per node per direction")
    else:
        print("  network  none (single node, or not given)")
    if hardware["instance"]:
        price = hardware["price_usd_per_hour"]
        print(f"  price    {pricing}: " + (f"{price:.4g} USD per instance-hour (as of {hardware['price_as_of']})"
                                           if price is not None else "not in the catalog"))
    for section in ("plan", "data", "run"):
        value = getattr(scenario, section)
        if value is not None:
            print(f"{section:<10} {value.model_dump(exclude_none=True)}")
    return 0
