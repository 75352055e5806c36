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
* **all_to_all** and **send_recv** have one algorithm (direct sends); they are reported under
  ``ring`` and are ``inf`` under the others.

Latency-bound small messages and bandwidth-bound large ones are joined by a pipeline-fill term:
NCCL cuts a message into chunks that flow through the ring or tree, and a pipeline of latency
``L`` and transfer time ``W`` with optimally sized chunks takes ``(sqrt(L) + sqrt(W))^2 = L + W +
2 sqrt(L W)`` (Johnsson & Ho 1989, pipelined broadcast); ``pipeline_fill`` replaces the 2 with a
fitted coefficient, since NCCL's chunks are not optimal for every size.

A collective over one rank costs 0 s: there is nothing to exchange (NCCL returns immediately).
'auto' is the elementwise fastest of ring, tree and nvls (when ``nvls`` is true), as NCCL's tuner
picks among its algorithms by the same kind of model; hierarchical is not an NCCL algorithm and is
only used when asked for.
"""

from __future__ import annotations

import numpy as np

from perfmodel.models import checks
from perfmodel.profile import CalibrationProfile, default_profile

__all__ = ["ALGORITHMS", "COLLECTIVES", "collective_time", "algorithm_times", "link_numbers",
           "cluster_collective_time", "bus_bandwidth_factor", "algbw", "busbw", "p2p_time", "crossover",
           "sweep"]

ALGORITHMS = ("ring", "tree", "hierarchical", "nvls", "auto")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv")
NVLS_ARCHITECTURES = ("Hopper", "Blackwell")
_AUTO = ("ring", "tree", "nvls")
_TREE_OK = ("all_reduce",)
_HIERARCHICAL_OK = ("all_reduce", "all_gather", "reduce_scatter")
_DIRECT = ("all_to_all", "send_recv")



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


def algorithm_times(collective, message_bytes, group_size, members_per_node, *, intra_bandwidth,
                    intra_latency, inter_bandwidth, inter_latency, nvls=False, intra_efficiency=1.0,
                    inter_efficiency=1.0, base_latency=0.0, tree_efficiency=1.0, nvls_efficiency=1.0,
                    nvls_latency=0.0, pipeline_fill=0.0) -> dict:
    """Seconds per algorithm (``ring``, ``tree``, ``hierarchical``, ``nvls``) for one collective.

    Every numeric argument may be a float or a numpy array; they broadcast.  An algorithm that
    cannot run the collective (tree for all-gather, nvls without ``nvls``) is ``inf``.  The
    efficiency keywords default to the ideal wire-rate alpha-beta model (1.0, zero latency, no
    pipeline fill); :func:`link_numbers` supplies the calibrated ones.  Each algorithm's time is
    ``L + W + pipeline_fill * sqrt(L * W)`` for its latency ``L`` and transfer time ``W`` (module
    docstring).
    """
    _check_collective(collective)
    n = checks.positive("message_bytes", message_bytes)
    p = _whole("group_size", group_size)
    g = np.minimum(_whole("members_per_node", members_per_node), p)
    nodes = np.ceil(p / g)
    multi = nodes > 1
    intra_raw = checks.positive("intra_bandwidth", intra_bandwidth)
    intra = intra_raw * _fraction("intra_efficiency", intra_efficiency)
    inter_raw = checks.nonnegative("inter_bandwidth", inter_bandwidth)
    if np.any(multi & (inter_raw <= 0)):
        raise ValueError("inter_bandwidth must be > 0 when the group spans nodes (group_size > members_per_node)")
    inter = np.where(multi, inter_raw, 1.0) * _fraction("inter_efficiency", inter_efficiency)
    a_i = checks.nonnegative("intra_latency", intra_latency)
    a_n = np.where(multi, checks.nonnegative("inter_latency", inter_latency), 0.0)
    a_0 = checks.nonnegative("base_latency", base_latency)
    fill = checks.nonnegative("pipeline_fill", pipeline_fill)
    shape = np.broadcast(n, p, g, intra, inter, a_i, a_n, a_0, fill).shape
    slowest = np.where(multi, np.minimum(intra, inter), intra)
    parts: dict[str, tuple] = {}  # algorithm -> (latency L, transfer time W)

    if collective == "send_recv":
        parts["ring"] = (a_0 + np.where(multi, a_n, a_i), n / slowest)
    elif collective == "all_to_all":  # every rank sends n/p to each other rank at once
        parts["ring"] = (a_0 + np.where(g > 1, a_i, 0.0) + a_n,
                         n * np.maximum((g - 1) / p / intra, np.where(multi, g * (p - g) / p / inter, 0.0)))
    elif collective == "broadcast":  # pipelined chain through every rank
        parts["ring"] = (a_0 + (p - nodes) * a_i + (nodes - 1) * a_n, n / slowest)
    else:
        k = 2.0 if collective == "all_reduce" else 1.0  # reduce + gather halves, or one of them
        parts["ring"] = (a_0 + k * ((p - nodes) * a_i + (nodes - 1) * a_n), k * (p - 1) / p * n / slowest)
        inter_latency_phase = k * (nodes - 1) * a_n
        inter_phase = k * (nodes - 1) / nodes * n / inter
        parts["hierarchical"] = (a_0 + k * (g - 1) * a_i + inter_latency_phase,
                                 k * (g - 1) / g * n / intra + inter_phase)
    if collective == "all_reduce":
        per_node = np.where(nodes > 2, 2.0, np.where(multi, 1.0, 0.0))  # inter bytes per n per direction
        parts["tree"] = (a_0 + 2.0 * ((g - 1) * a_i + np.ceil(np.log2(nodes)) * a_n),
                         n * np.maximum(1.0 / intra, per_node / inter)
                         / _fraction("tree_efficiency", tree_efficiency))
        nvls_ok = np.asarray(nvls, dtype=bool) & (g > 1)
        parts["nvls"] = (a_0 + checks.nonnegative("nvls_latency", nvls_latency) + inter_latency_phase,
                         np.where(nvls_ok, n / (intra_raw * _fraction("nvls_efficiency", nvls_efficiency))
                                  + inter_phase, np.inf))
    times = {}
    for name in ("ring", "tree", "hierarchical", "nvls"):
        if name not in parts:
            times[name] = np.full(shape, np.inf)
            continue
        latency, transfer = parts[name]
        with np.errstate(invalid="ignore"):
            time = np.where(np.isinf(transfer), np.inf, latency + transfer + fill * np.sqrt(latency * transfer))
        times[name] = np.where(p > 1, np.broadcast_to(time, shape), 0.0)
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
    ``nvls_efficiency``, ``nvls_latency``, ``pipeline_fill`` (see :func:`algorithm_times`, :func:`link_numbers`).
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
        why = ("needs an NVSwitch node of a Hopper/Blackwell GPU (nvls=True) and more than one GPU per node"
               if algorithm == "nvls" and collective == "all_reduce"
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
    Hopper/Blackwell).
    On an NVLink mesh (DGX-1) the ring's share of the NVLinks is ``nvlink_mesh_ring_fraction``.
    """
    profile = profile or default_profile()
    intra = cluster.intra.bandwidth_per_direction
    if cluster.fabric == "nvlink_mesh":
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
                         f"(tree and nvls: all_reduce only; nvls: NVSwitch nodes of Hopper/Blackwell GPUs)")
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
