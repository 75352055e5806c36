"""Partial pooling of grouped parameters (calibration.fit.pool_groups): the pooled value is the
median of the fitted groups in log space, so it lies within their range and one atypical group
cannot drag it; an architecture with no value of its own takes its nearest fitted predecessor's
(CalibrationProfile.get), else the pooled value."""

import math

from hypothesis import given, strategies as st

from perfmodel import estimate
from perfmodel.calibration.fit import pool_groups
from perfmodel.hardware.specs import ARCHITECTURE_PREDECESSORS, ARCHITECTURES, architecture_lineage
from perfmodel.parameters import PARAMETERS
from perfmodel.profile import CalibrationProfile, default_profile

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


# ---- a generation with no value of its own takes its nearest predecessor's (profile.get)

def test_the_lineage_of_each_architecture_runs_back_through_its_predecessors():
    assert architecture_lineage("Blackwell") == ("Blackwell", "Hopper", "Ampere", "Volta", "Pascal")
    assert architecture_lineage("Ada") == ("Ada", "Ampere", "Volta", "Pascal")
    assert architecture_lineage("Turing") == ("Turing", "Volta", "Pascal")
    assert architecture_lineage("CDNA3") == ("CDNA3",)
    assert set(ARCHITECTURE_PREDECESSORS) | set(ARCHITECTURE_PREDECESSORS.values()) <= set(ARCHITECTURES)


fitted_groups = st.dictionaries(st.sampled_from(ARCHITECTURES), st.floats(min_value=0.41, max_value=1.0), max_size=5)


@given(fitted_groups, st.sampled_from(ARCHITECTURES), st.booleans())
def test_get_takes_the_nearest_fitted_predecessor_on_a_newest_generation_else_the_pooled_value(
        fitted, architecture, with_pooled):
    name = "sustained_clock_fraction"  # grouped by architecture, inherits
    values = {f"{name}[{group}]": value for group, value in fitted.items()}
    if with_pooled:
        values[name] = 0.5
    profile = CalibrationProfile(values=values)
    interior = any(architecture in architecture_lineage(group)[1:] for group in fitted)
    nearest = architecture if architecture in fitted else None if interior else next(
        (group for group in architecture_lineage(architecture)[1:] if group in fitted), None)
    expected = fitted[nearest] if nearest else (0.5 if with_pooled else PARAMETERS[name].default_for(architecture))
    assert profile.get(name, architecture) == expected
    assert profile.applying_key(name, architecture) == (f"{name}[{nearest}]" if nearest else name)


def test_a_newest_generation_inherits_and_one_between_fitted_generations_takes_the_median():
    name = "sustained_clock_fraction"
    profile = CalibrationProfile(values={f"{name}[Volta]": 1.0, f"{name}[Hopper]": 0.8, name: 0.9})
    assert profile.get(name, "Blackwell") == 0.8  # Hopper's successor
    assert profile.get(name, "Turing") == 1.0  # the newest of Volta's other line
    assert profile.get(name, "Ampere") == 0.9  # between Volta and Hopper: the median
    assert profile.get(name, "Pascal") == 0.9  # Volta descends from it


def test_a_parameter_that_does_not_inherit_takes_the_pooled_median_or_its_prior():
    """GEMM efficiencies take the median of the fitted generations (held out by GPU, a predecessor's
    was worse: V100 would inherit Pascal's atypical FP32 nn.Linear rate); a parameter that does not
    pool keeps its prior."""
    profile = CalibrationProfile(values={"host_dispatch_scale[Ampere]": 1.7, "gemm_power_activity[Ampere]": 0.3,
                                         "gemm_cuda_core_efficiency[Pascal]": 0.5,
                                         "gemm_cuda_core_efficiency": 0.8})
    assert profile.get("host_dispatch_scale", "Ada") == PARAMETERS["host_dispatch_scale"].default_for("Ada")
    assert profile.get("gemm_power_activity", "Ada") == PARAMETERS["gemm_power_activity"].default_for("Ada")
    assert profile.get("gemm_cuda_core_efficiency", "Volta") == 0.8
    assert {name for name, parameter in PARAMETERS.items() if parameter.inherits} == {
        "sustained_clock_fraction", "attention_efficiency", "conv_efficiency"}


def test_a_blackwell_step_runs_at_hoppers_fitted_clock_and_its_confidence_line_says_so():
    shipped = default_profile()
    assert "sustained_clock_fraction[Blackwell]" not in shipped.values  # no Blackwell training row fitted
    assert shipped.get("sustained_clock_fraction", "Blackwell") == shipped.values["sustained_clock_fraction[Hopper]"]
    assert not shipped.prior_only("sustained_clock_fraction", "Blackwell")
    result = estimate({"workload": {"model": "llama3-8b"}, "hardware": {"gpu": "B200", "num_gpus": 8},
                       "framework": "megatron", "plan": {"precision": "bf16", "global_batch": 128}})
    said = ("no train rows on Blackwell architecture: parameters attention_efficiency[Hopper], "
            "conv_efficiency[Hopper], sustained_clock_fraction[Hopper] inherited from its nearest predecessor "
            "with rows, the others pooled from Ampere, Hopper, Volta")
    assert said in result.confidence["extrapolates"]


def test_a_predecessor_value_no_row_determined_is_skipped():
    values = {"attention_efficiency[Volta]": 0.7, "attention_efficiency[Pascal]": 0.5, "attention_efficiency": 0.45}
    fitted = CalibrationProfile(values=values)
    assert fitted.applying_key("attention_efficiency", "Ampere") == "attention_efficiency[Volta]"
    undetermined = CalibrationProfile(values=values, provenance={"not_determined": ["attention_efficiency[Volta]"]})
    assert undetermined.applying_key("attention_efficiency", "Ampere") == "attention_efficiency[Pascal]"
    assert undetermined.get("attention_efficiency", "Ampere") == 0.5
