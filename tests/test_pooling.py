"""Partial pooling of grouped parameters (calibration.fit.pool_groups): the value a group with no
rows of its own gets is the median of the fitted groups in log space, so it lies within their
range and one atypical group cannot drag it."""

import math

from hypothesis import given, strategies as st

from perfmodel.calibration.fit import pool_groups

GROUPS = ("Ampere", "Pascal", "Turing", "Volta", "Hopper")
efficiency = st.floats(min_value=0.31, max_value=1.0)


@given(st.lists(efficiency, min_size=3, max_size=5), st.floats(min_value=1e-3, max_value=0.3))
def test_the_pooled_value_is_within_the_groups_and_ignores_one_outlier(fitted, outlier_factor):
    values = {f"gemm_cuda_core_efficiency[{g}]": v for g, v in zip(GROUPS, fitted)}
    pool_groups(values, uncertainty := {})
    pooled = values["gemm_cuda_core_efficiency"]
    assert min(fitted) * (1 - 1e-12) <= pooled <= max(fitted) * (1 + 1e-12)
    assert uncertainty["gemm_cuda_core_efficiency"] >= 0
    # make the lowest group far lower still: with 3 or more groups the median does not move
    lowest = min(values, key=values.get)
    dragged = dict(values, **{lowest: values[lowest] * outlier_factor})
    dragged.pop("gemm_cuda_core_efficiency")
    pool_groups(dragged, {})
    assert math.isclose(dragged["gemm_cuda_core_efficiency"], pooled, rel_tol=1e-12)


def test_two_groups_pool_to_their_geometric_mean_and_undetermined_ones_are_left_out():
    values = {"gemm_cuda_core_efficiency[Ampere]": 0.9, "gemm_cuda_core_efficiency[Volta]": 0.4,
              "gemm_cuda_core_efficiency[Pascal]": 0.35}
    pool_groups(values, {}, skip={"gemm_cuda_core_efficiency[Pascal]"})
    assert math.isclose(values["gemm_cuda_core_efficiency"], math.sqrt(0.9 * 0.4), rel_tol=1e-12)
