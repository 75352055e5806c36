"""What a collective's links are: the DGX-1 hybrid cube-mesh for part of its GPUs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware.catalog import load_catalog
from perfmodel.models import comm


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(include_env=False)


def test_the_dgx1_link_matrix_is_a_symmetric_mesh_of_six_links_per_v100():
    """Every NVLink joins two GPUs (symmetric), a V100 has six (DGX-1 V100 white paper), no GPU
    links to itself, and each GPU reaches four others (a cube's three edges plus one diagonal)."""
    links = comm.DGX1_NVLINKS
    np.testing.assert_array_equal(links, links.T)
    assert np.all(np.diag(links) == 0)
    assert np.all(links.sum(axis=1) == 6)
    assert np.all((links > 0).sum(axis=1) == 4)


def test_a_ring_over_part_of_a_dgx1_reaches_only_the_links_among_its_members():
    """Two GPUs share one NVLink (1/6 of a V100's), four (one face with its diagonals) four of six,
    all eight every link; one GPU has no ring traffic."""
    np.testing.assert_allclose(comm.mesh_ring_share([1, 2, 4, 8]), [1.0, 1 / 6, 4 / 6, 1.0])


@settings(max_examples=30, deadline=None)
@given(members=st.integers(2, 8), size=st.floats(1e6, 1e10))
def test_a_mesh_never_beats_the_same_links_fully_connected_and_matches_them_at_eight(members, size):
    """At equal per-GPU NVLink bandwidth a group on the cube-mesh is never faster than on a switch,
    and the whole 8-GPU mesh is as fast (all six links in its rings)."""
    links = dict(intra_bandwidth=150e9, intra_latency=2e-6, inter_bandwidth=0.0, inter_latency=0.0)
    mesh = comm.collective_time("all_reduce", size, members, members, nvlink_mesh=True, **links)
    switch = comm.collective_time("all_reduce", size, members, members, **links)
    assert mesh >= switch * (1 - 1e-12)
    if members == 8:
        assert mesh == pytest.approx(switch, rel=1e-12)


def test_a_job_on_part_of_a_dgx1_runs_on_the_mesh_and_a_dgx2_on_its_switch(catalog):
    """A 2- or 4-GPU job on an 8-GPU V100 SXM2 board is on the hybrid cube-mesh (its collectives
    get one or four of six links); V100 SXM3 (DGX-2) is on NVSwitch whatever the job's size."""
    for gpus in (2, 4, 8):
        assert catalog.cluster(gpu="V100-SXM2-16GB", num_gpus=gpus, gpus_per_node=8).fabric == "nvlink_mesh"
    assert catalog.cluster(gpu="V100-SXM3-32GB", num_gpus=8, gpus_per_node=16).fabric == "nvswitch"
    two = catalog.cluster(gpu="V100-SXM2-16GB", num_gpus=2, gpus_per_node=8)
    eight = catalog.cluster(gpu="V100-SXM2-16GB", num_gpus=8, gpus_per_node=8)
    large = 1 << 34  # 16 GiB: latency and pipeline fill are a small part
    t_two = comm.collective_time("all_reduce", large, 2, 2, **comm.link_numbers(two))
    t_eight = comm.collective_time("all_reduce", large, 8, 8, **comm.link_numbers(eight))
    # busbw = 2(n-1)/n x bytes / t: the pair's single link carries a sixth of the full mesh's
    busbw_two, busbw_eight = large / t_two, 2 * 7 / 8 * large / t_eight
    assert busbw_two / busbw_eight == pytest.approx(1 / 6, rel=0.02)

