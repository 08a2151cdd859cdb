"""Development builds (`--cuda-archs`): the plan of a variant restricted to some of
its CUDA archs, with the flags, metadata and provenance that follow."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.compile.variant import metadata_text, parse_cuda_archs, with_cuda_archs
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import Plan

SYSTEM = "x86_64-linux"
CU130 = "torch214-cxx11-cu130-x86_64-linux"


def plan_of(example: str) -> Plan:
    return build_plan(
        load_config(EXAMPLES / example), PlanOptions(systems=(SYSTEM,), unique_id="dev1")
    )


def test_only_the_chosen_archs_are_compiled_and_recorded() -> None:
    plan = with_cuda_archs(plan_of("fused-scale"), ["9.0"])
    variant = plan.variants[SYSTEM][CU130]
    assert variant.kernels == {"fused_scale": ["9.0a"]}
    assert variant.archs == ["9.0a"]
    assert variant.metadata.backend.to_data() == {"type": "cuda", "archs": ["9.0a"]}
    assert variant.compile["fused_scale"].gpu_flags == [
        "-gencode=arch=compute_90a,code=sm_90a",
        "--use_fast_math",
        "-DFUSED_SCALE_THREADS=256",
    ]
    assert variant.development_archs == ["9.0"]
    own = metadata_text(variant, "host", False)
    assert '"development-archs": [\n        "9.0"\n      ]' in own
    # Variants of other backends are left as planned.
    cpu = plan.variants[SYSTEM]["torch214-cxx11-cpu-x86_64-linux"]
    assert cpu == plan_of("fused-scale").variants[SYSTEM]["torch214-cxx11-cpu-x86_64-linux"]


def test_ptx_archs_keep_their_ptx() -> None:
    plan = with_cuda_archs(plan_of("relu"), ["8.0", "9.0"])
    variant = plan.variants[SYSTEM][CU130]
    assert variant.kernels["relu"] == ["8.0", "9.0"]
    assert variant.compile["relu"].gpu_flags == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
    ]


def test_a_kernel_without_any_chosen_arch_is_an_error() -> None:
    with pytest.raises(UserError) as raised:
        with_cuda_archs(plan_of("relu"), ["12.0"])
    (problem,) = raised.value.diagnostics
    assert (
        problem.message
        == "kernel 'relu' is built for 7.5, 8.0, 9.0; none of them is in --cuda-archs 12.0"
    )
    assert problem.key == "--cuda-archs"


@pytest.mark.parametrize("text", ["", "nine", "9", "9.0,sm_80", "9.0b"])
def test_bad_arch_lists_are_errors(text: str) -> None:
    with pytest.raises(UserError):
        parse_cuda_archs(text)
    assert parse_cuda_archs(" 8.0, 9.0a ,12.1+PTX") == ["8.0", "9.0a", "12.1+PTX"]


def test_native_needs_a_visible_gpu() -> None:
    # This machine has none (and a CPU build of Torch).
    with pytest.raises(UserError) as raised:
        parse_cuda_archs("native")
    assert "no CUDA GPU is visible" in raised.value.diagnostics[0].message


def test_nix_builds_take_no_cuda_archs() -> None:
    result = CliRunner().invoke(main, ["build", str(EXAMPLES / "relu"), "--cuda-archs", "9.0"])
    assert result.exit_code == 2
    assert "--cuda-archs applies to --local builds" in result.output
