"""Collective communication: alpha-beta cost of NCCL's ring, tree and NVLS algorithms.

Every collective costs ``latency + bytes_on_the_slowest_link / bandwidth`` (Hockney's alpha-beta
model), with the step counts and per-step latencies of NCCL's own tuner (NVIDIA/nccl
``src/graph/tuning.cc``, ``ncclTopoTuneModel``) and the bandwidth ratios of nccl-tests
(``doc/PERFORMANCE.md``).  Notation: ``n`` message bytes (the buffer size nccl-tests prints), ``p``
ranks in the group, ``g`` of them per node, ``N = ceil(p / g)`` nodes, ``B_i`` the per-direction
bandwidth one GPU gets on the intra-node fabric, ``B_n`` the per-direction NIC bandwidth the group
has out of one node, ``e_i``/``e_n`` the plateau efficiencies below wire rate, ``a_i``/``a_n`` the
per-step latencies, ``a_0`` the launch latency.

* **ring** (NCCL Ring): all-reduce takes ``2(p-1)`` steps and moves ``2(p-1)/p * n`` over every
  link of the ring; reduce-scatter / all-gather half of that; broadcast pipelines ``n`` along a
  chain.  Latency ``a_0 + 2(p-N) a_i + 2(N-1) a_n`` (tuning.cc: intra steps times the intra hop
  latency plus inter steps times the network one).  Bandwidth = the slowest link in the ring:
  ``min(e_i B_i, e_n B_n)`` across nodes (each node's NICs carry the full ring traffic), ``e_i B_i``
  inside one.
* **tree** (NCCL's double binary tree, all-reduce only): latency ``a_0 + 2((g-1) a_i + log2(N)
  a_n)`` (tuning.cc); a chain inside each node, and across nodes every node sends ``n`` per
  direction when N = 2 and ``2n`` when N > 2 (internal in one tree, leaf in the other), derated by
  ``tree_efficiency`` (tuning.cc caps tree bandwidth per channel; measured B200 rows say ~0.5).
* **hierarchical** (two-level, as Horovod/DeepSpeed run it): intra-node reduce-scatter, inter-node
  all-reduce of ``n/g`` by ``g`` concurrent rings sharing the node's NICs, intra-node all-gather;
  the phases run one after the other.
* **nvls** (NVLink SHARP: the NVSwitch reduces; Hopper/Blackwell NVSwitch nodes, all-reduce only):
  the intra-node part costs ``n / (nvls_efficiency B_i)`` plus ``nvls_latency``, the inter-node
  part as in hierarchical.  Its busbw exceeds the wire rate: it is not a ring.
* **nvlstree** (NCCL's NVLSTree, all-reduce across nodes of NVLS-capable nodes): NVLS inside each
  node and a double binary tree across nodes, pipelined, so the slower of the two sets the pace:
  ``max(n / (nvls_efficiency B_i), per_node n / (nvls_tree_efficiency e_n B_n))`` with the tree's
  per-node load (``per_node`` as for tree); latency ``a_0 + nvls_latency + 2 log2(N) a_n``.
* **collnet** (NCCL's CollNet with InfiniBand SHARP: the switches reduce; all-reduce across
  nodes): inside a node a reduce-scatter and an all-gather over NVLink, across nodes every node
  sends ``n`` up and receives ``n`` down once, whatever N: ``max(2(g-1)/g n / (e_i B_i),
  n / (collnet_efficiency e_n B_n))``; latency ``a_0 + 2(g-1) a_i + a_n`` (tuning.cc's CollNet
  latency).  NVLSTree and CollNet run Simple only and are not in 'auto': NCCL needs NVLS (or
  the SHARP plugin) set up to use them, so they are timed only when asked for.
* **all_to_all** and **send_recv** have one algorithm (direct sends); they are reported under
  ``ring`` and are ``inf`` under the others.

Latency-bound small messages and bandwidth-bound large ones are joined by a pipeline-fill term:
NCCL cuts a message into chunks that flow through the ring or tree, and a pipeline of latency
``L`` and transfer time ``W`` with optimally sized chunks takes ``(sqrt(L) + sqrt(W))^2 = L + W +
2 sqrt(L W)`` (Johnsson & Ho 1989, pipelined broadcast); ``pipeline_fill`` replaces the 2 with a
fitted coefficient, since NCCL's chunks are not optimal for every size.

**Protocols** (NCCL's LL, LL128 and Simple; NVIDIA/nccl ``src/graph/tuning.cc``,
``ncclTopoTuneModel``, tables ``baseLat`` and ``hwLat`` and the "model refinements" of ``busBw``).
Ring, tree and broadcast run under each enabled protocol and NCCL takes the fastest for the
message size; every algorithm's time here is the elementwise minimum over ``protocols``:

* **Simple** moves data in large chunks with memory fences: full bandwidth, the largest
  latencies (baseLat Ring 8.4 us; hwLat per ring step NVLink 3.4, PCI 5.7, NET 14 us).
* **LL128** sends 128-byte lines of which 120 bytes are data and 8 a flag (bandwidth x 0.92 in
  tuning.cc for ring, 7/9 for a tree inside one node, 120/128 across nodes); per-step hwLat NVLink
  1.9, PCI 2.5, NET 4 us, baseLat 14 us.  NCCL enables it by default only where the intra-node
  path is NVLink, so here only on ``nvlink``/``nvswitch`` nodes.
* **LL** sends 8-byte lines of 4 data bytes and a 4-byte flag, so no fence is needed: half the
  bandwidth (tuning.cc: ring busBw x 0.5, tree x 1/3.8), the smallest latencies (baseLat 6.6 us,
  hwLat per ring step NVLink 0.6, PCI 1.0, NET 2.7 us).

The calibrated ``collective_base_latency`` is Simple's base latency and ``link_latency`` the LL128
per-step latency of its link kind (the columns their priors come from); the other protocols'
latencies are these times tuning.cc's ratios (:data:`BASE_LATENCY_RATIO`,
:data:`STEP_LATENCY_RATIO`), their bandwidths the fitted plateau times :data:`PROTOCOL_BANDWIDTH`.
Not modelled: tuning.cc's per-channel LL/LL128 bandwidth caps (``llMaxBws``,
``perChMaxRingLL128Bws``) and its tree correction factors.  All-to-all and send/recv run Simple
only; so do nvls (as in NCCL) and hierarchical (not an NCCL algorithm).

A collective over one rank costs 0 s: there is nothing to exchange (NCCL returns immediately).
'auto' is the elementwise fastest of ring, tree and nvls (when ``nvls`` is true), as NCCL's tuner
picks among its algorithms by the same kind of model; hierarchical is not an NCCL algorithm and is
only used when asked for.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import checks
from perfmodel.profile import CalibrationProfile, default_profile

__all__ = ["ALGORITHMS", "COLLECTIVES", "PROTOCOLS", "collective_time", "algorithm_times", "protocol_times",
           "link_numbers",
           "cluster_collective_time", "bus_bandwidth_factor", "algbw", "busbw", "p2p_time", "crossover",
           "sweep"]

ALGORITHMS = ("ring", "tree", "hierarchical", "nvls", "nvlstree", "collnet", "auto")
_TIMED = ALGORITHMS[:-1]
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
NVLS_ARCHITECTURES = ("Hopper", "Blackwell")
_AUTO = ("ring", "tree", "nvls")
_TREE_OK = ("all_reduce",)
_HIERARCHICAL_OK = ("all_reduce", "all_gather", "reduce_scatter")
_DIRECT = ("all_to_all", "send_recv")

PROTOCOLS = ("LL", "LL128", "Simple")
# hardware classes of tuning.cc's hwLat table, by link kind (every NIC kind is NET)
HARDWARE_CLASS = {"nvlink": "nvlink", "nvswitch": "nvlink", "pcie": "pci"}
# NVIDIA/nccl src/graph/tuning.cc baseLat (us) over Ring/Simple's 8.4 us: Ring {6.6, 14.0, 8.4},
# Tree {6.8, 14.0, 8.4} for {LL, LL128, Simple}
BASE_LATENCY_RATIO = {"ring": {"LL": 6.6 / 8.4, "LL128": 14.0 / 8.4, "Simple": 1.0},
                      "tree": {"LL": 6.8 / 8.4, "LL128": 14.0 / 8.4, "Simple": 1.0}}
# tuning.cc hwLat (us) per step over the Ring/LL128 entry of the same hardware class
# (NVLink 1.9, PCI 2.5, NET 4.0), which is the prior of link_latency
_HW_LATENCY_US = {
    "nvlink": {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 4.0)},
    "pci": {"ring": (1.0, 2.5, 5.7), "tree": (1.0, 1.9, 4.0)},
    "net": {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 14.0)},
}
STEP_LATENCY_RATIO = {hw: {algorithm: dict(zip(PROTOCOLS, (us / table["ring"][1] for us in row)))
                           for algorithm, row in table.items()}
                      for hw, table in _HW_LATENCY_US.items()}
# tuning.cc busBw refinements: ring LL x 0.5, LL128 x 0.92; tree LL x 1/3.8, LL128 x 7/9 in one
# node and 120/128 across nodes (the (single node, multi node) pair)
PROTOCOL_BANDWIDTH = {"ring": {"LL": (0.5, 0.5), "LL128": (0.92, 0.92), "Simple": (1.0, 1.0)},
                      "tree": {"LL": (1 / 3.8, 1 / 3.8), "LL128": (7 / 9, 120 / 128), "Simple": (1.0, 1.0)}}



def bus_bandwidth_factor(collective: str, n):
    """nccl-tests busbw / algbw factor (doc/PERFORMANCE.md): all-reduce 2(n-1)/n, all-gather,
    reduce-scatter and all-to-all (n-1)/n, broadcast and send/recv 1."""
    _check_collective(collective)
    n = np.asarray(n, dtype=float)
    if np.any(~np.isfinite(n) | (n < 1)):
        raise ValueError(f"n (ranks) must be >= 1; got {n}")
    if collective == "all_reduce":
        return 2.0 * (n - 1.0) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1.0) / n
    return np.ones_like(n)


def algbw(message_bytes, time):
    """nccl-tests algorithm bandwidth, bytes/s: size / time."""
    return np.asarray(message_bytes, dtype=float) / np.asarray(time, dtype=float)


def busbw(collective: str, message_bytes, time, n):
    """nccl-tests bus bandwidth, bytes/s: algbw x :func:`bus_bandwidth_factor`."""
    return algbw(message_bytes, time) * bus_bandwidth_factor(collective, n)


def p2p_time(message_bytes, bandwidth, latency):
    """One point-to-point send (pipeline stage to stage): ``latency + bytes / bandwidth`` (Hockney)."""
    size = checks.positive("message_bytes", message_bytes)
    return np.asarray(latency, dtype=float) + size / checks.positive("bandwidth", bandwidth)


def _check_collective(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r} is unknown; allowed: {', '.join(COLLECTIVES)}")


def _whole(name: str, value):
    array = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(array) | (array < 1) | (array != np.round(array))):
        raise ValueError(f"{name} must be a whole number >= 1; got {value}")
    return array


DGX1_NVLINKS = np.array([
    [0, 1, 1, 2, 2, 0, 0, 0],
    [1, 0, 2, 1, 0, 2, 0, 0],
    [1, 2, 0, 2, 0, 0, 1, 0],
    [2, 1, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 1, 1, 2],
    [0, 2, 0, 0, 1, 0, 2, 1],
    [0, 0, 1, 0, 1, 2, 0, 2],
    [0, 0, 0, 1, 2, 1, 2, 0]])
"""NVLinks between GPU i and GPU j of a DGX-1 with V100 (the hybrid cube-mesh: a cube whose twelve
edges are NVLinks, some doubled, and two faces with their diagonals; six links per GPU).  Rows 0
and 1 as NCCL's topology dump of a DGX-1 V100 lists them (NVIDIA/nccl#671: GPU 0 has one link each
to GPUs 1 and 2 and two each to GPUs 3 and 4; GPU 1 two each to GPUs 2 and 5 and one to GPU 3),
GPU 0's doubled links to 3 and 4 also in Li et al. 2020 (IEEE TPDS 31(1), "Evaluating Modern GPU
Interconnect", DGX-1 peer-to-peer bandwidth); the other rows follow the cube's symmetry (NVIDIA
DGX-1 V100 white paper WP-08437-002: "three interwoven rings of single NVLink connections")."""


def mesh_ring_share(members):
    """Share of a V100's six NVLinks that NCCL's rings over ``members`` GPUs of a hybrid cube-mesh
    can drive per direction: a ring leaves every member once, so the rings together use at most
    the links the worst-connected member has to the other members (:data:`DGX1_NVLINKS`), over 6.
    A group of ``n`` is taken as GPUs 0..n-1 (frameworks number ranks in device order; a strided
    group, e.g. data parallelism across tensor-parallel pairs, has fewer links than this): 2 GPUs
    share one link (1/6), 4 GPUs (one face with its diagonals) 4 links, 8 GPUs all 6.  Broadcasts."""
    n = np.clip(np.asarray(members, dtype=int), 1, len(DGX1_NVLINKS))
    return np.take(_MESH_RING_LINKS, n) / _MESH_RING_LINKS[-1]


# links the worst-connected of GPUs 0..k-1 has to the others, k = 0..8 (k <= 1: no ring, the whole GPU)
_MESH_RING_LINKS = np.array([DGX1_NVLINKS[:k, :k].sum(axis=1).min() if k > 1 else DGX1_NVLINKS.sum(axis=1).max()
                             for k in range(len(DGX1_NVLINKS) + 1)], dtype=float)


def algorithm_times(collective, message_bytes, group_size, members_per_node, *, intra_bandwidth,
                    intra_latency, inter_bandwidth, inter_latency, nvls=False, intra_efficiency=1.0,
                    inter_efficiency=1.0, base_latency=0.0, tree_efficiency=1.0, nvls_efficiency=1.0,
                    nvls_latency=0.0, pipeline_fill=0.0, protocols=PROTOCOLS, intra_hardware="nvlink",
                    inter_hardware="net", collnet=False, nvls_tree_efficiency=1.0,
                    collnet_efficiency=1.0, nvlink_mesh=False) -> dict:
    """Seconds per algorithm (``ring``, ``tree``, ``hierarchical``, ``nvls``, ``nvlstree``,
    ``collnet``) for one collective: the fastest of ``protocols`` for each (:func:`protocol_times`).

    Every numeric argument may be a float or a numpy array; they broadcast.  An algorithm that
    cannot run the collective (tree for all-gather, nvls without ``nvls``, nvlstree without
    ``nvls`` or inside one node, collnet without ``collnet`` -- an InfiniBand network -- or inside
    one node) is ``inf``.  The
    efficiency keywords default to the ideal wire-rate alpha-beta model (1.0, zero latency, no
    pipeline fill) under all three protocols; :func:`link_numbers` supplies the calibrated ones and
    the protocols NCCL enables on the cluster.  Each algorithm's time is ``L + W + pipeline_fill *
    sqrt(L * W)`` for its latency ``L`` and transfer time ``W`` (module docstring).
    """
    per_protocol = protocol_times(
        collective, message_bytes, group_size, members_per_node, intra_bandwidth=intra_bandwidth,
        intra_latency=intra_latency, inter_bandwidth=inter_bandwidth, inter_latency=inter_latency, nvls=nvls,
        intra_efficiency=intra_efficiency, inter_efficiency=inter_efficiency, base_latency=base_latency,
        tree_efficiency=tree_efficiency, nvls_efficiency=nvls_efficiency, nvls_latency=nvls_latency,
        pipeline_fill=pipeline_fill, protocols=protocols, intra_hardware=intra_hardware,
        inter_hardware=inter_hardware, collnet=collnet, nvls_tree_efficiency=nvls_tree_efficiency,
        collnet_efficiency=collnet_efficiency, nvlink_mesh=nvlink_mesh)
    return {name: np.minimum.reduce(list(times.values())) for name, times in per_protocol.items()}


def protocol_times(collective, message_bytes, group_size, members_per_node, *, intra_bandwidth,
                   intra_latency, inter_bandwidth, inter_latency, nvls=False, intra_efficiency=1.0,
                   inter_efficiency=1.0, base_latency=0.0, tree_efficiency=1.0, nvls_efficiency=1.0,
                   nvls_latency=0.0, pipeline_fill=0.0, protocols=PROTOCOLS, intra_hardware="nvlink",
                   inter_hardware="net", collnet=False, nvls_tree_efficiency=1.0,
                   collnet_efficiency=1.0, nvlink_mesh=False) -> dict:
    """Seconds per algorithm and protocol: ``{algorithm: {protocol: time}}``.

    Arguments as :func:`algorithm_times`.  ``protocols``: the enabled subset of :data:`PROTOCOLS`;
    ``intra_hardware``/``inter_hardware``: the hwLat class (``nvlink``, ``pci``, ``net``) of the
    intra-node and inter-node links.  ``intra_latency``/``inter_latency`` are LL128 per-step
    latencies and ``base_latency`` Simple's base latency; each protocol scales them and the
    bandwidths by tuning.cc's ratios (module docstring).  Protocols apply to ring, tree and
    broadcast; hierarchical, nvls, nvlstree and collnet run only when Simple is enabled, all-to-all and send/recv
    always as Simple point-to-point sends (they list only it).  ``nvlink_mesh``: the node is a
    DGX-1-class hybrid cube-mesh, so a group's members reach only :func:`mesh_ring_share` of
    ``intra_bandwidth``.
    """
    _check_collective(collective)
    protocols = tuple(protocols)
    unknown = [name for name in protocols if name not in PROTOCOLS]
    if not protocols or unknown:
        raise ValueError(f"protocols {list(protocols)} must be a non-empty subset of {', '.join(PROTOCOLS)}")
    for name, hardware in (("intra_hardware", intra_hardware), ("inter_hardware", inter_hardware)):
        if hardware not in STEP_LATENCY_RATIO:
            raise ValueError(f"{name} {hardware!r} is unknown; allowed: {', '.join(STEP_LATENCY_RATIO)}")
    n = checks.positive("message_bytes", message_bytes)
    p = _whole("group_size", group_size)
    g = np.minimum(_whole("members_per_node", members_per_node), p)
    nodes = np.ceil(p / g)
    multi = nodes > 1
    intra_raw = checks.positive("intra_bandwidth", intra_bandwidth)
    if nvlink_mesh:
        intra_raw = intra_raw * mesh_ring_share(g)
    intra = intra_raw * _fraction("intra_efficiency", intra_efficiency)
    inter_raw = checks.nonnegative("inter_bandwidth", inter_bandwidth)
    if np.any(multi & (inter_raw <= 0)):
        raise ValueError("inter_bandwidth must be > 0 when the group spans nodes (group_size > members_per_node)")
    inter = np.where(multi, inter_raw, 1.0) * _fraction("inter_efficiency", inter_efficiency)
    a_i = checks.nonnegative("intra_latency", intra_latency)
    a_n = np.where(multi, checks.nonnegative("inter_latency", inter_latency), 0.0)
    a_0 = checks.nonnegative("base_latency", base_latency)
    fill = checks.nonnegative("pipeline_fill", pipeline_fill)
    tree_eta = _fraction("tree_efficiency", tree_efficiency)
    shape = np.broadcast(n, p, g, intra, inter, a_i, a_n, a_0, fill).shape

    def scaled(algorithm, protocol):
        """(a_0, a_i, a_n, intra bandwidth, inter bandwidth) of ``algorithm`` under ``protocol``."""
        single, several = PROTOCOL_BANDWIDTH[algorithm][protocol]
        factor = np.where(multi, several, single)
        return (a_0 * BASE_LATENCY_RATIO[algorithm][protocol],
                a_i * STEP_LATENCY_RATIO[intra_hardware][algorithm][protocol],
                a_n * STEP_LATENCY_RATIO[inter_hardware][algorithm][protocol],
                intra * factor, inter * factor)

    parts: dict[str, dict] = {}  # algorithm -> protocol -> (latency L, transfer time W)
    simple = "Simple" in protocols
    if collective == "send_recv":  # point-to-point: Simple

        parts["ring"] = {"Simple": (a_0 + np.where(multi, a_n, a_i), n / np.where(multi, np.minimum(intra, inter), intra))}
    elif collective == "all_to_all":  # every rank sends n/p to each other rank at once
        parts["ring"] = {"Simple": (a_0 + np.where(g > 1, a_i, 0.0) + a_n,
                                    n * np.maximum((g - 1) / p / intra,
                                                   np.where(multi, g * (p - g) / p / inter, 0.0)))}
    elif collective == "broadcast":  # pipelined chain through every rank
        parts["ring"] = {}
        for protocol in protocols:
            b0, bi, bn, b_intra, b_inter = scaled("ring", protocol)
            parts["ring"][protocol] = (b0 + (p - nodes) * bi + (nodes - 1) * bn,
                                       n / np.where(multi, np.minimum(b_intra, b_inter), b_intra))
    elif collective not in _DIRECT:
        k = 2.0 if collective == "all_reduce" else 1.0  # reduce + gather halves, or one of them
        parts["ring"] = {}
        for protocol in protocols:
            b0, bi, bn, b_intra, b_inter = scaled("ring", protocol)
            slowest = np.where(multi, np.minimum(b_intra, b_inter), b_intra)
            parts["ring"][protocol] = (b0 + k * ((p - nodes) * bi + (nodes - 1) * bn), k * (p - 1) / p * n / slowest)
        if simple:
            parts["hierarchical"] = {"Simple": (a_0 + k * (g - 1) * a_i + k * (nodes - 1) * a_n,
                                                k * (g - 1) / g * n / intra + k * (nodes - 1) / nodes * n / inter)}
    if collective == "all_reduce":
        per_node = np.where(nodes > 2, 2.0, np.where(multi, 1.0, 0.0))  # inter bytes per n per direction
        parts["tree"] = {}
        for protocol in protocols:
            b0, bi, bn, b_intra, b_inter = scaled("tree", protocol)
            parts["tree"][protocol] = (b0 + 2.0 * ((g - 1) * bi + np.ceil(np.log2(nodes)) * bn),
                                       n * np.maximum(1.0 / b_intra, per_node / b_inter) / tree_eta)
        if simple:
            nvls_ok = np.asarray(nvls, dtype=bool) & (g > 1)
            parts["nvls"] = {"Simple": (
                a_0 + checks.nonnegative("nvls_latency", nvls_latency) + 2.0 * (nodes - 1) * a_n,
                np.where(nvls_ok, n / (intra_raw * _fraction("nvls_efficiency", nvls_efficiency))
                         + 2.0 * (nodes - 1) / nodes * n / inter, np.inf))}
            tree_ok = nvls_ok & multi
            parts["nvlstree"] = {"Simple": (
                a_0 + checks.nonnegative("nvls_latency", nvls_latency) + 2.0 * np.ceil(np.log2(nodes)) * a_n,
                np.where(tree_ok, np.maximum(
                    n / (intra_raw * _fraction("nvls_efficiency", nvls_efficiency)),
                    per_node * n / (inter * _fraction("nvls_tree_efficiency", nvls_tree_efficiency))), np.inf))}
            sharp_ok = np.asarray(collnet, dtype=bool) & multi
            parts["collnet"] = {"Simple": (
                a_0 + 2.0 * (g - 1) * a_i + a_n,
                np.where(sharp_ok, np.maximum(2.0 * (g - 1) / g * n / intra,
                                              n / (inter * _fraction("collnet_efficiency", collnet_efficiency))),
                         np.inf))}
    times = {}
    for name in _TIMED:
        times[name] = {}
        for protocol, (latency, transfer) in parts.get(name, {"Simple": (0.0, np.inf)}).items():
            with np.errstate(invalid="ignore"):
                time = np.where(np.isinf(transfer), np.inf, latency + transfer + fill * np.sqrt(latency * transfer))
            times[name][protocol] = np.where(p > 1, np.broadcast_to(time, shape), 0.0)
    return times


def _fraction(name: str, value):
    array = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(array) | (array <= 0) | (array > 1)):
        raise ValueError(f"{name} must be in (0, 1]; got {value}")
    return array


def collective_time(collective, message_bytes, group_size, members_per_node, *, intra_bandwidth,
                    intra_latency, inter_bandwidth, inter_latency, algorithm="auto", nvls=False, **efficiency):
    """Seconds for one collective with ``algorithm`` (one of :data:`ALGORITHMS`).

    Vectorized over every numeric argument.  ``intra_bandwidth``: per-direction bytes/s one GPU gets
    on the intra-node fabric; ``inter_bandwidth``: per-direction bytes/s available to this group's
    traffic leaving one node (the caller divides the node's NICs among concurrent groups);
    ``members_per_node``: group members sharing a node (``group_size <= members_per_node`` means
    intra-node only).  ``group_size == 1`` costs 0 s.  ``auto`` is the elementwise fastest of ring,
    tree and nvls (nvls only when ``nvls`` is true), as NCCL's tuner picks.  ``efficiency``:
    ``intra_efficiency``, ``inter_efficiency``, ``base_latency``, ``tree_efficiency``,
    ``nvls_efficiency``, ``nvls_latency``, ``pipeline_fill``, ``collnet``, ``nvls_tree_efficiency``,
    ``collnet_efficiency`` (see :func:`algorithm_times`, :func:`link_numbers`).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r} is unknown; allowed: {', '.join(ALGORITHMS)}")
    times = algorithm_times(collective, message_bytes, group_size, members_per_node,
                            intra_bandwidth=intra_bandwidth, intra_latency=intra_latency,
                            inter_bandwidth=inter_bandwidth, inter_latency=inter_latency, nvls=nvls,
                            **efficiency)
    if algorithm == "auto":
        return np.minimum.reduce([times[name] for name in _AUTO])
    result = times[algorithm]
    if np.all(np.isinf(result)):
        needs = {"nvls": "an NVSwitch node of a Hopper/Blackwell GPU (nvls=True) and more than one GPU per node",
                 "nvlstree": "a group spanning nodes whose nodes run NVLS (NVSwitch nodes of Hopper/Blackwell "
                             "GPUs, more than one GPU per node)",
                 "collnet": "a group spanning nodes on an InfiniBand network with SHARP (collnet=True)"}
        why = (f"needs {needs[algorithm]}" if algorithm in needs and collective == "all_reduce"
               else f"NCCL runs {collective} only as {'direct sends' if collective in _DIRECT else 'ring'}")
        raise ValueError(f"algorithm {algorithm!r} is not available for {collective}: {why}")
    return result


def _latency(profile: CalibrationProfile, link) -> float:
    """Explicitly calibrated alpha, else the catalog's measured link latency, else the default."""
    if f"link_latency[{link.kind}]" in profile.values or link.latency is None:
        return profile.get("link_latency", link.kind)
    return link.latency


def link_numbers(cluster, profile: CalibrationProfile | None = None) -> dict:
    """What :func:`collective_time` needs from a Cluster and a profile, as keyword arguments.

    Keys: intra_bandwidth, intra_latency, inter_bandwidth (the whole node's NICs, per direction;
    0 without a network), inter_latency, intra_efficiency, inter_efficiency, base_latency,
    tree_efficiency, nvls_efficiency, nvls_latency, pipeline_fill, nvls (NVSwitch fabric on
    Hopper/Blackwell), collnet (an InfiniBand network: SHARP-capable switches assumed when CollNet
    is asked for), nvls_tree_efficiency, collnet_efficiency, protocols (LL128 only on NVLink/NVSwitch nodes, as NCCL enables it by
    default), intra_hardware and inter_hardware (tuning.cc's hwLat class of each link), nvlink_mesh.
    On an NVLink mesh (DGX-1, ``nvlink_mesh``) a group reaches :func:`mesh_ring_share` of the
    GPU's NVLinks, times ``nvlink_mesh_ring_fraction``.
    """
    profile = profile or default_profile()
    intra = cluster.intra.bandwidth_per_direction
    mesh = cluster.fabric == "nvlink_mesh"
    if mesh:
        intra *= profile.get("nvlink_mesh_ring_fraction")
    nic = cluster.nic
    architecture = cluster.gpu.architecture
    return {
        "intra_bandwidth": intra,
        "intra_latency": _latency(profile, cluster.intra),
        "inter_bandwidth": cluster.inter_bandwidth_per_node,
        "inter_latency": _latency(profile, nic) if nic is not None else 0.0,
        "intra_efficiency": profile.get("link_bandwidth_efficiency", cluster.intra.kind),
        "inter_efficiency": profile.get("link_bandwidth_efficiency", nic.kind) if nic is not None else 1.0,
        "base_latency": profile.get("collective_base_latency"),
        "tree_efficiency": profile.get("tree_bandwidth_efficiency"),
        "nvls_efficiency": profile.get("nvls_bandwidth_efficiency", architecture),
        "nvls_latency": profile.get("nvls_latency"),
        "pipeline_fill": profile.get("pipeline_fill"),
        "nvls": cluster.fabric == "nvswitch" and architecture in NVLS_ARCHITECTURES,
        "collnet": nic is not None and nic.kind == "infiniband",
        "nvls_tree_efficiency": profile.get("nvls_tree_bandwidth_efficiency"),
        "collnet_efficiency": profile.get("collnet_bandwidth_efficiency"),
        "protocols": PROTOCOLS if HARDWARE_CLASS.get(cluster.intra.kind) == "nvlink" else ("LL", "Simple"),
        "intra_hardware": HARDWARE_CLASS.get(cluster.intra.kind, "net"),
        "inter_hardware": "net",
        "nvlink_mesh": mesh,
    }


def _cluster_arguments(cluster, profile, group_size, members_per_node, concurrent_groups_per_node):
    group = np.asarray(cluster.num_gpus if group_size is None else group_size, dtype=float)
    if np.any(group > cluster.num_gpus):
        raise ValueError(f"group_size {group_size} exceeds the cluster's {cluster.num_gpus} GPUs")
    members = (np.minimum(group, cluster.gpus_per_node) if members_per_node is None
               else np.asarray(members_per_node, dtype=float))
    if np.any(members > cluster.gpus_per_node):
        raise ValueError(f"members_per_node {members_per_node} exceeds the {cluster.gpus_per_node} GPUs "
                         f"a node of this cluster has")
    numbers = link_numbers(cluster, profile)
    if np.any(group > members) and numbers["inter_bandwidth"] <= 0:
        raise ValueError("the group spans nodes but the cluster has no inter-node network "
                         "(give inter, e.g. '8 x ib-ndr')")
    numbers["inter_bandwidth"] /= _whole("concurrent_groups_per_node", concurrent_groups_per_node)
    return group, members, numbers


def cluster_collective_time(cluster, profile, collective, message_bytes, group_size=None, members_per_node=None,
                            concurrent_groups_per_node=1, algorithm="auto"):
    """Seconds for a collective on ``cluster`` (default: over all its GPUs, packed by node).

    ``concurrent_groups_per_node`` groups share each node's NICs (e.g. 8 TP-rank DP groups).
    """
    group, members, numbers = _cluster_arguments(cluster, profile or default_profile(), group_size,
                                                 members_per_node, concurrent_groups_per_node)
    return collective_time(collective, message_bytes, group, members, algorithm=algorithm, **numbers)


def sweep(cluster, profile=None, collective="all_reduce", sizes=None, algorithms=ALGORITHMS, group_size=None,
          members_per_node=None, concurrent_groups_per_node=1):
    """nccl-tests style table: one row per (size, algorithm) with time_s, algbw and busbw (bytes/s).

    ``sizes`` default: 1 KiB to 16 GiB, doubling.  Algorithms that cannot run here are left out.
    """
    import pandas as pd

    sizes = np.asarray(2.0 ** np.arange(10, 35) if sizes is None else sizes, dtype=float)
    group, members, numbers = _cluster_arguments(cluster, profile or default_profile(), group_size,
                                                 members_per_node, concurrent_groups_per_node)
    times = algorithm_times(collective, sizes, group, members, **numbers)
    times["auto"] = np.minimum.reduce([times[name] for name in _AUTO])
    frames = []
    for name in algorithms:
        if name not in ALGORITHMS:
            raise ValueError(f"algorithm {name!r} is unknown; allowed: {', '.join(ALGORITHMS)}")
        time = np.broadcast_to(times[name], sizes.shape)
        if np.all(np.isinf(time)):
            continue
        frames.append(pd.DataFrame({
            "size": sizes, "algorithm": name, "time_s": time, "algbw": algbw(sizes, time),
            "busbw": busbw(collective, sizes, time, group)}))
    if not frames:
        raise ValueError(f"algorithm {', '.join(algorithms)} cannot run {collective} here "
                         f"(tree, nvls, nvlstree, collnet: all_reduce only; nvls, nvlstree: NVSwitch nodes of "
                         f"Hopper/Blackwell GPUs; nvlstree, collnet: groups spanning nodes; collnet: InfiniBand)")
    return pd.concat(frames, ignore_index=True)


def crossover(cluster, profile=None, collective="all_reduce", sizes=None, nodes=None):
    """Time of each algorithm by message size and node count, and the fastest (NCCL's auto choice).

    Nodes keep the cluster's shape (GPUs per node, fabric, NICs); the group is every GPU.  Columns:
    size (bytes), nodes, gpus, ring_s, tree_s, hierarchical_s, nvls_s, best (ring, tree or nvls).
    """
    import pandas as pd

    profile = profile or default_profile()
    sizes = np.asarray(2.0 ** np.arange(10, 35) if sizes is None else sizes, dtype=float)
    nodes = np.asarray([1, 2, 4, 8, 16, 32, 64, 128] if nodes is None else nodes, dtype=float)
    if np.any(nodes > 1) and cluster.nic is None:
        raise ValueError("crossover over several nodes needs a cluster with an inter-node network")
    numbers = link_numbers(cluster, profile)
    size_grid, node_grid = np.meshgrid(sizes, _whole("nodes", nodes), indexing="ij")
    gpus = node_grid * cluster.gpus_per_node
    times = algorithm_times(collective, size_grid, gpus, cluster.gpus_per_node, **numbers)
    table = pd.DataFrame({"size": size_grid.ravel(), "nodes": node_grid.ravel().astype(int),
                          "gpus": gpus.ravel().astype(int)})
    for name in ("ring", "tree", "hierarchical", "nvls"):
        table[f"{name}_s"] = np.broadcast_to(times[name], size_grid.shape).ravel()
    auto = np.stack([table[f"{name}_s"].to_numpy() for name in _AUTO])
    table["best"] = np.asarray(_AUTO)[np.argmin(auto, axis=0)]
    return table
