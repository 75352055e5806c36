"""Load the hardware catalog (shipped YAML, merged with a user's files) and resolve names.

The shipped catalog lives in ``perfmodel/data/hardware_catalog.yaml`` inside the package, so an
installed wheel finds it.  ``load_catalog(*extra_files)`` merges user files over it, entry by entry
(an entry with the same name replaces the shipped one); so does the ``PERFMODEL_CATALOG``
environment variable (paths separated by ``os.pathsep``).
"""

from __future__ import annotations

import math
import os
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from perfmodel.hardware.specs import GPU, Cluster, Instance, Link, Node, parse_inter
from perfmodel.inputs import INTEGER_LIMITS, InputError, check_count, excerpt, load_structured

SECTIONS: dict[str, type[BaseModel]] = {"gpus": GPU, "links": Link, "nodes": Node, "instances": Instance}


class CatalogError(ValueError):
    """A catalog file or a catalog look-up that is wrong; the message says where and why."""


def shipped_data_path(*parts: str) -> Path:
    """Path of a file shipped in the package's ``data`` folder."""
    return Path(str(resources.files("perfmodel").joinpath("data", *parts)))


def format_validation_error(error: ValidationError, where: str, schema: type[BaseModel] | None = None,
                            root: str = "the top level") -> str:
    """One line per bad field: where, the field, the bad value and what is allowed.  An unknown
    field of ``schema`` (the model validated; ``root`` names its top level) lists the fields
    allowed there, and where the name is a field of another section, which one."""
    lines = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "(entry)"
        value = item.get("input")
        shown = "" if isinstance(value, dict) else f" = {excerpt(value)}"
        message = item["msg"]
        if item["type"] == "extra_forbidden" and schema is not None:
            message = _unknown_field_message(schema, item["loc"], root) or message
        lines.append(f"{where}: field '{field}'{shown}: {message}")
    return "\n".join(lines)


def _nested_model(annotation) -> type[BaseModel] | None:
    """The pydantic model a field holds (directly, or inside Optional / a union), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_nested_model, getattr(annotation, "__args__", ()))), None)


def _sections(schema: type[BaseModel], path: tuple = ()):
    """(path, model) of ``schema`` and of every model nested in its fields."""
    yield path, schema
    for name, info in schema.model_fields.items():
        nested = _nested_model(info.annotation)
        if nested is not None:
            yield from _sections(nested, (*path, name))


def _unknown_field_message(schema: type[BaseModel], loc, root: str) -> str | None:
    """'not a field of <section>; allowed: ...' for the unknown field at ``loc``, naming the
    sections where a field of that name does belong."""
    *parent, name = loc
    section = dict(_sections(schema)).get(tuple(parent))
    if section is None:
        return None
    where = ".".join(map(str, parent)) or root
    homes = [".".join(path) or root for path, model in _sections(schema)
             if name in model.model_fields and path != tuple(parent)]
    hint = f"; '{name}' is a field of {' and of '.join(homes)}" if homes else ""
    return f"not a field of {where}{hint}; allowed here: {', '.join(section.model_fields)}"


def _key(section: str, entry: dict) -> str:
    if section == "instances" and isinstance(entry, dict):
        return f"{str(entry.get('provider'))[:60]}/{str(entry.get('name'))[:60]}"
    return str(entry.get("name"))[:60] if isinstance(entry, dict) else "?"


class Catalog:
    """GPUs, links, nodes and instances by canonical name, with alias resolution.

    ``gpus``, ``links``, ``nodes`` and ``instances`` are plain dicts name -> spec; instances are
    keyed ``provider/name`` (``aws/p4d.24xlarge``).
    """

    def __init__(self, entries: dict[str, dict[str, BaseModel]], files: list[str]):
        self.gpus: dict[str, GPU] = _fill_unknowns(entries["gpus"])  # type: ignore[arg-type]
        self.links: dict[str, Link] = entries["links"]  # type: ignore[assignment]
        self.nodes: dict[str, Node] = entries["nodes"]  # type: ignore[assignment]
        self.instances: dict[str, Instance] = entries["instances"]  # type: ignore[assignment]
        self.files = files
        self._aliases = {section: self._alias_table(section) for section in SECTIONS}

    def _alias_table(self, section: str) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for key, spec in getattr(self, section).items():
            names = {key, spec.name, *spec.aliases}
            for name in names:
                table.setdefault(name.lower(), [])
                if key not in table[name.lower()]:
                    table[name.lower()].append(key)
        return table

    def _resolve(self, section: str, name: str, what: str):
        entries = getattr(self, section)
        if name in entries:
            return entries[name]
        candidates = self._aliases[section].get(str(name).lower(), [])
        if len(candidates) == 1:
            return entries[candidates[0]]
        if len(candidates) > 1:
            raise CatalogError(f"{what} {name!r} is ambiguous; candidates: {', '.join(sorted(candidates))}")
        close = [k for k in entries if str(name).lower() in k.lower()]
        hint = f"; did you mean one of: {', '.join(sorted(close)[:8])}" if close else ""
        raise CatalogError(f"{what} {excerpt(name)} is not in the catalog{hint} (see 'perfmodel catalog list {section}')")

    def gpu(self, name: str) -> GPU:
        return self._resolve("gpus", name, "gpu")

    def link(self, name: str) -> Link:
        return self._resolve("links", name, "link")

    def node(self, name: str) -> Node:
        return self._resolve("nodes", name, "node")

    def instance(self, name: str) -> Instance:
        return self._resolve("instances", name, "instance")

    def find(self, name: str) -> BaseModel:
        """Any entry by name or alias, searching GPUs, instances, links and nodes in that order."""
        for section, what in (("gpus", "gpu"), ("instances", "instance"), ("links", "link"), ("nodes", "node")):
            try:
                return self._resolve(section, name, what)
            except CatalogError as error:
                if "ambiguous" in str(error):
                    raise
        raise CatalogError(f"{excerpt(name)} is not a GPU, instance, link or node in the catalog")

    def inter_link(self, text: str) -> tuple[int, Link]:
        """Resolve an inter-node string ('8 x ib-hdr', 'efa-3200') to (ports per node, link)."""
        count, name = parse_inter(text)
        if name.startswith("efa-") and name[4:].isdigit():
            efa = self.link("efa")
            total = float(name[4:]) * 1e9 / 8
            return max(1, round(total / efa.bandwidth_per_direction)) * count, efa
        return count, self.link(name)

    def cluster(self, *, gpu: str | None = None, num_gpus: int | None = None,
                gpus_per_node: int | None = None, intra: str | None = None, inter: str | None = None,
                instance: str | None = None, nodes: int | None = None) -> Cluster:
        """Build a :class:`Cluster` from a GPU and a shape, or from an instance and a node count.

        Missing pieces take the GPU's usual values: its NVLink generation on NVSwitch (SXM parts and
        NVL rack parts such as GB200) or its PCIe generation, 8 GPUs per node for SXM parts, 1 for
        others.  An NVL rack part's "node" is the NVLink domain its reference system has
        (``ReferenceFabric.nvlink_domain``; GB200 NVL72: 72 GPUs): a job is placed in the fewest equal
        shares of domains (:func:`nvlink_domain_share`), which ``Cluster.assumed`` lists; without a
        domain, the reference system's node (a compute tray).  An instance whose
        intra-node link the catalog does not know (null) needs ``intra`` given; ``inter``, when
        given, replaces an instance's network.  A multi-node GPU cluster without ``inter`` takes
        the GPU's reference fabric (``GPU.reference_fabric``, e.g. DGX SuperPOD H100: 8 x ib-ndr)
        when the catalog has one, and lists that in ``Cluster.assumed``; without one it has no
        network (estimates then ask for ``inter``).  Counts are bounded by
        :data:`perfmodel.inputs.INTEGER_LIMITS`, the total GPU count included.
        """
        for field, value in (("num_gpus", num_gpus), ("gpus_per_node", gpus_per_node), ("nodes", nodes)):
            if value is not None:
                try:
                    check_count(field, value)
                except InputError as error:
                    raise CatalogError(f"hardware.{error}") from None
        if instance is not None:
            inst = self.instance(instance)
            if gpu is not None and self.gpu(gpu).name != self.gpu(inst.gpu).name:
                raise CatalogError(f"hardware.gpu {gpu!r} does not match instance {instance} ({inst.gpu})")
            count = nodes if nodes is not None else (
                -(-num_gpus // inst.gpus_per_node) if num_gpus is not None else 1)
            if num_gpus is not None and num_gpus != count * inst.gpus_per_node:
                raise CatalogError(
                    f"hardware.num_gpus {num_gpus} does not match {count} x {instance} "
                    f"({count * inst.gpus_per_node} GPUs)")
            _check_total(count * inst.gpus_per_node)
            if inst.intra is None and intra is None:
                raise CatalogError(f"instance {instance}: its intra-node link is unknown (null in the catalog); "
                                   "give hardware.intra (e.g. pcie4, nvlink3)")
            nics, nic = (inst.nics, self.link(inst.nic) if inst.nic else None)
            if inter:
                nics, nic = self.inter_link(inter)
            return Cluster(gpu=self.gpu(inst.gpu), nodes=count, gpus_per_node=inst.gpus_per_node,
                           intra=self.link(intra or inst.intra), fabric=inst.fabric, nics_per_node=nics,
                           nic=nic, instance=inst)
        if gpu is None:
            raise CatalogError("hardware: give 'gpu' (with num_gpus) or 'instance' (with nodes)")
        spec = self.gpu(gpu)
        form = (spec.form_factor or "").upper()
        sxm = spec.nvlink_generation is not None and "SXM" in form
        rack = spec.nvlink_generation is not None and "NVL" in form  # an NVL72 rack's compute trays
        reference = spec.reference_fabric
        per_node = gpus_per_node or (8 if sxm else reference.gpus_per_node if rack and reference else 1)
        total = num_gpus if num_gpus is not None else per_node * (nodes or 1)
        _check_total(total)
        assumed = []
        if gpus_per_node is None and rack and reference is not None and reference.nvlink_domain:
            # the job's "node" is the share of an NVLink domain it holds: its collectives inside the
            # domain run over NVLink, between domains over the network
            per_node = nvlink_domain_share(total, reference.nvlink_domain, spec.name)
            # hardware.nodes without num_gpus counts the reference system's nodes (compute trays): say so,
            # as the cluster's nodes are now NVLink domains
            trays = (f"hardware.nodes = {nodes} read as {reference.gpus_per_node}-GPU nodes of the reference "
                     "system; " if num_gpus is None and nodes is not None else "")
            if total > reference.gpus_per_node:  # a job of one reference node is on its own NVLink anyway
                assumed.append(f"gpus_per_node = {per_node}: {trays}the job's {total} GPUs in {total // per_node} "
                               f"NVLink domain{'s' if total > per_node else ''} of {per_node} ({reference.system}: "
                               f"up to {reference.nvlink_domain} GPUs on one NVLink fabric; placed in as few equal "
                               f"domains as divide the job; give hardware.gpus_per_node for another placement)")
        board = per_node  # GPUs of the node the job runs on, before a smaller job is cut out of it
        if total < per_node:
            per_node = total
        if total % per_node:
            raise CatalogError(f"hardware.num_gpus {total} is not a multiple of gpus_per_node {per_node}")
        if intra:
            intra_link = self.link(intra)
        elif sxm or rack:
            intra_link = self.link(f"nvlink{spec.nvlink_generation}")
        elif spec.pcie_generation is not None:
            intra_link = self.link(f"pcie{spec.pcie_generation}")
        else:
            raise CatalogError(f"hardware.intra: {spec.name} has no known NVLink or PCIe generation in the "
                               "catalog; give intra (e.g. pcie4)")
        fabric = {"nvlink": "nvswitch", "nvswitch": "nvswitch"}.get(intra_link.kind, "pcie")
        if intra_link.kind == "nvlink" and spec.nvlink_generation == 2 and "SXM2" in form and board == 8:
            # an 8-GPU V100 SXM2 board (DGX-1, HGX-1, p3.16xlarge) is a hybrid cube-mesh, also for a
            # job on some of its GPUs; V100 SXM3 boards (DGX-2) are on NVSwitch
            fabric = "nvlink_mesh"
        nics, nic = 0, None
        if inter:
            nics, nic = self.inter_link(inter)
        elif total // per_node > 1 and reference is not None:
            reference_nics, nic = self.inter_link(reference.inter)
            # as many NICs per GPU as the reference node (at least one per node)
            nics = max(1, math.ceil(reference_nics * per_node / reference.gpus_per_node))
            scaled = ("" if per_node == reference.gpus_per_node else
                      f", {reference_nics} per {reference.gpus_per_node} GPUs scaled to this node's {per_node}")
            assumed.append(f"inter = {nics} x {nic.name} (reference fabric for {spec.name}: "
                           f"{reference.system}{scaled}; {reference.source})")
        return Cluster(gpu=spec, nodes=total // per_node, gpus_per_node=per_node, intra=intra_link,
                       fabric=fabric, nics_per_node=nics, nic=nic, assumed=assumed)


def nvlink_domain_share(num_gpus: int, domain: int, gpu: str = "the GPU") -> int:
    """GPUs of a job in each NVLink domain of ``domain`` GPUs when the job does not say: all of them
    when the job fits in one domain, else the largest divisor of ``num_gpus`` that fits in a domain
    (the cluster model's nodes are equal: 128 GB200 on NVL72 racks -> 2 x 64).  A job that no share
    of at least half a domain divides (146 = 2 x 73 on NVL72) raises :class:`CatalogError`: spread
    over many small shares, its collectives would leave NVLink for a placement nobody would choose."""
    if num_gpus <= domain:
        return num_gpus
    share = max(d for d in range(1, domain + 1) if num_gpus % d == 0)
    if 2 * share < domain:
        raise CatalogError(
            f"hardware.num_gpus {num_gpus} on {gpu}: no equal share of {math.ceil(domain / 2)}-{domain} GPUs "
            f"per NVLink domain of {domain} divides it (the largest is {share}); give hardware.gpus_per_node "
            f"(the job's GPUs per NVLink domain, a divisor of num_gpus) or a num_gpus that such a share divides")
    return share


def _fill_unknowns(gpus: dict[str, GPU]) -> dict[str, GPU]:
    """GPUs with the null fields the cost models need filled by a stated rule, listed in ``assumed``.

    * peaks: with ``peaks_between: [A, B]``, each null peak is the geometric mean of A's and B's
      (the entry's source bounds it by theirs);
    * ``sm_count`` (the GEMM model's waves): the median SM count of the catalog's GPUs of the same
      architecture.
    A GPU the rules cannot fill keeps its nulls (the model then says what is missing).
    """
    filled = {}
    for key, gpu in gpus.items():
        update, assumed = {}, list(gpu.assumed)
        if gpu.peaks_between is not None:
            low, high = (_lookup(gpus, name, f"gpu {gpu.name}: peaks_between") for name in gpu.peaks_between)
            peaks = {}
            for precision, value in gpu.peak_flops.model_dump().items():
                a, b = getattr(low.peak_flops, precision), getattr(high.peak_flops, precision)
                peaks[precision] = value if value is not None or a is None or b is None else (a * b) ** 0.5
            filled_precisions = [p for p, v in gpu.peak_flops.model_dump().items() if v is None and peaks[p]]
            if filled_precisions:
                update["peak_flops"] = gpu.peak_flops.model_copy(update=peaks)
                assumed.append(f"{gpu.name} peak_flops ({', '.join(filled_precisions)}) = geometric mean of "
                               f"{low.name}'s and {high.name}'s (the catalog's source puts them between the two)")
        if gpu.sm_count is None:
            counts = sorted(g.sm_count for g in gpus.values()
                            if g.architecture == gpu.architecture and g.sm_count is not None)
            if counts:
                middle = len(counts) // 2
                count = counts[middle] if len(counts) % 2 else round((counts[middle - 1] + counts[middle]) / 2)
                update["sm_count"] = count
                assumed.append(f"{gpu.name} sm_count = {count} (not in the catalog; the median of its "
                               f"{len(counts)} {gpu.architecture} GPUs)")
        filled[key] = gpu.model_copy(update={**update, "assumed": tuple(assumed)}) if update else gpu
    return filled


def _lookup(gpus: dict[str, GPU], name: str, where: str) -> GPU:
    matches = [g for g in gpus.values() if name == g.name or name.lower() in (a.lower() for a in g.aliases)]
    if len(matches) != 1:
        raise CatalogError(f"{where}: {excerpt(name)} is not one GPU of the catalog")
    return matches[0]


def require_network(cluster: Cluster) -> None:
    """A cluster of more than one node needs an inter-node network (``hardware.inter``)."""
    if cluster.nodes > 1 and cluster.nic is None:
        raise CatalogError(f"hardware.inter: {cluster.nodes} nodes need an inter-node network "
                           "(e.g. '8 x ib-hdr', '4 x roce-400', 'efa-3200')")


def _check_total(num_gpus: int) -> None:
    limit = INTEGER_LIMITS["num_gpus"]
    if num_gpus > limit:
        raise CatalogError(f"hardware: {num_gpus:,} GPUs in all; the limit is {limit:,} (the num_gpus limit)")


def catalog_schema() -> dict[str, Any]:
    """JSON Schema of a catalog file: an object with optional lists ``gpus``, ``links``, ``nodes``, ``instances``."""
    fields = {section: (list[model], Field(default_factory=list)) for section, model in SECTIONS.items()}
    model = create_model("CatalogFile", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema["description"] = ("perfmodel hardware catalog file (YAML or JSON). Quantities are SI numbers or strings "
                             "with a unit ('80 GB', '3.35 TB/s', '200 Gb/s', '989 TFLOP/s', '700 W').")
    return schema


def _read_yaml(path: str | Path) -> dict[str, Any]:
    try:
        data = load_structured(path, "catalog file")
    except InputError as error:
        raise CatalogError(str(error)) from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: a catalog file is a mapping with keys {', '.join(SECTIONS)}")
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise CatalogError(f"{path}: unknown top-level keys {excerpt(sorted(map(str, unknown)))}; "
                           f"allowed: {', '.join(SECTIONS)}")
    return data


def _parse_file(path: str | Path) -> dict[str, dict[str, BaseModel]]:
    data = _read_yaml(path)
    parsed: dict[str, dict[str, BaseModel]] = {section: {} for section in SECTIONS}
    problems: list[str] = []
    for section, model in SECTIONS.items():
        entries = data.get(section) or []
        if not isinstance(entries, list):
            problems.append(f"{path}: '{section}' must be a list of entries")
            continue
        for index, entry in enumerate(entries):
            key = _key(section, entry)
            where = f"{path}: {section}[{index}] ({key})"
            if not isinstance(entry, dict):
                problems.append(f"{where}: an entry is a mapping of fields")
                continue
            try:
                spec = model.model_validate(entry)
            except ValidationError as error:
                problems.append(format_validation_error(error, where, model, root="this entry"))
                continue
            if key in parsed[section]:
                problems.append(f"{where}: field 'name' = {spec.name!r}: duplicate name {key!r} in {section}; "
                                f"names must be unique within a file")
                continue
            parsed[section][key] = spec
    if problems:
        raise CatalogError("\n".join(problems))
    return parsed


def _check_references(catalog: Catalog, origin: dict[tuple[str, str], str]) -> None:
    """Every node/instance names a GPU and links that exist; errors name the file that defined the entry."""
    problems = []
    for section in ("nodes", "instances"):
        for key, node in getattr(catalog, section).items():
            for field, name, lookup in (("gpu", node.gpu, catalog.gpu), ("intra", node.intra, catalog.link),
                                        ("nic", node.nic, catalog.link)):
                if name is None:
                    continue
                try:
                    lookup(name)
                except CatalogError as error:
                    problems.append(f"{origin[section, key]}: {section} ({key}): field '{field}' = {name!r}: {error}")
    for key, gpu in catalog.gpus.items():
        if gpu.reference_fabric is not None:
            try:
                catalog.inter_link(gpu.reference_fabric.inter)
            except CatalogError as error:
                problems.append(f"{origin['gpus', key]}: gpus ({key}): field 'reference_fabric.inter' = "
                                f"{gpu.reference_fabric.inter!r}: {error}")
    if problems:
        raise CatalogError("\n".join(problems))


_LOADED: dict[tuple, Catalog] = {}


def load_catalog(*extra_files: str | Path, include_env: bool = True) -> Catalog:
    """The shipped catalog merged with ``extra_files`` (and ``PERFMODEL_CATALOG``), later wins.

    Parsed catalogs are kept per (file, modification time) list, so repeated calls are cheap and
    an edited file is read again; the returned Catalog is shared: do not modify it in place.
    """
    files: list[str | Path] = [shipped_data_path("hardware_catalog.yaml")]
    if include_env and os.environ.get("PERFMODEL_CATALOG"):
        files += [p for p in os.environ["PERFMODEL_CATALOG"].split(os.pathsep) if p]
    files += list(extra_files)
    key = tuple((str(path), _modified(path)) for path in files)
    if key not in _LOADED:
        _LOADED[key] = _merge(files)
    return _LOADED[key]


def _modified(path) -> float | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None  # reading it reports the error


def _merge(files: list[str | Path]) -> Catalog:
    merged: dict[str, dict[str, BaseModel]] = {section: {} for section in SECTIONS}
    origin: dict[tuple[str, str], str] = {}
    for path in files:
        for section, entries in _parse_file(path).items():
            merged[section].update(entries)
            origin.update({(section, key): str(path) for key in entries})
    catalog = Catalog(merged, [str(f) for f in files])
    _check_references(catalog, origin)
    return catalog
