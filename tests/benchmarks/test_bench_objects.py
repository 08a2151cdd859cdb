"""benchmarks/bench_objects.py's prediction of the huge kernels without building
anything: a unit's family, the estimate of an unsampled unit, a full build's
times in place of estimates, and the schedule."""

from __future__ import annotations

import sys

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_objects import basis, family, makespan, predicted, unit_times, variant_times


def test_a_unit_s_family_is_its_direction_head_dimension_and_arch() -> None:
    assert family("hopper/instantiations/flash_bwd_hdim256_bf16_sm90.cu") == ("bwd", "256", "sm90")
    assert family("flash_fwd_split_hdim64_fp16_sm80.cu") == ("fwd", "64", "sm80")
    assert family("flash_api_stable.cpp") == ("flash_api_stable.cpp", "", "")


def test_an_unsampled_unit_takes_its_family_s_mean_then_its_direction_and_arch_s() -> None:
    kernel = {
        "units": [
            "a/flash_bwd_hdim256_bf16_sm90.cu",
            "a/flash_bwd_hdim256_fp16_sm90.cu",
            "a/flash_bwd_hdim64_fp16_sm90.cu",
            "a/flash_fwd_hdim64_fp16_sm80.cu",
        ],
        "samples": [
            {"source": "a/flash_bwd_hdim256_bf16_sm90.cu", "cpu-seconds": 300.0},
            {"source": "a/flash_bwd_hdim128_bf16_sm90.cu", "cpu-seconds": 100.0},
            {"source": "a/flash_fwd_hdim64_fp16_sm80.cu", "cpu-seconds": 20.0},
        ],
    }
    times, sampled = unit_times(kernel)
    # Its own; its family's (hdim 256); bwd sm90's mean; its own.
    assert times == [300.0, 300.0, 200.0, 20.0]
    assert sampled == 3


def test_the_schedule_puts_the_longest_first_on_the_free_slot() -> None:
    # 5 | 4, then each 3 where the least is queued: 5+3 | 4+3+3 (the best is 9).
    assert makespan([5, 4, 3, 3, 3], 2) == 10
    assert makespan([10, 1, 1], 4) == 10
    assert makespan([2] * 8, 1) == 16


@pytest.mark.parametrize("builders", [1, 2, 16])
def test_a_prediction_adds_the_configure_step_and_each_derivation_s_cost(builders: int) -> None:
    times = [60.0] * 64
    slots = 2 * builders
    assert predicted(times, builders, 1.0, 30.0) == 30.0 + 61.0 * -(-64 // slots)


FA2_LIKE = {
    "archs": "9.0",
    "arch-factor": 4,
    "units": [
        "a/flash_api.cpp",
        "a/flash_bwd_hdim64_fp16_sm80.cu",
        "a/flash_fwd_hdim64_fp16_sm80.cu",
    ],
    "samples": [
        {"source": "a/flash_api.cpp", "cpu-seconds": 10.0},
        {"source": "a/flash_bwd_hdim64_fp16_sm80.cu", "cpu-seconds": 100.0},
        {"source": "a/flash_fwd_hdim64_fp16_sm80.cu", "cpu-seconds": 50.0},
    ],
}


def test_only_cuda_units_are_counted_once_per_arch_of_the_variant() -> None:
    times = variant_times(FA2_LIKE, {})
    assert times.seconds == [10.0, 400.0, 200.0]
    assert basis(times, FA2_LIKE).endswith(
        "each CUDA unit x 4 for the variant's archs (sampled at 9.0)"
    )


def test_a_full_build_s_times_replace_the_estimates_and_are_set_against_them() -> None:
    built = {"a/flash_bwd_hdim64_fp16_sm80.cu": 300.0}
    times = variant_times(FA2_LIKE, built)
    assert times.seconds == [10.0, 300.0, 200.0]
    assert (times.built, times.built_total, times.estimated_for_built) == (1, 300.0, 400.0)
    assert basis(times, FA2_LIKE).startswith("1 timed in its full build, 3 measured alone")
    every = variant_times(FA2_LIKE, dict.fromkeys(FA2_LIKE["units"], 5.0))
    assert basis(every, FA2_LIKE) == "all 3 timed in its full build"
