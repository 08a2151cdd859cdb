"""kernelnix.plan.units: which sources compile, and the plan's `compile-units`,
which the Nix library builds one derivation each from (nix/lib/sources.nix)."""

from __future__ import annotations

from handmade import plan_here
from paths import EXAMPLES

from kernelnix.plan.units import binding_units, kernel_units


def test_a_kernel_compiles_its_cxx_gpu_and_objective_cxx_sources_and_no_header() -> None:
    sources = ["a.cu", "a.cuh", "b.hip", "c.cpp", "d.cc", "e.cxx", "f.c++", "g.C", "h.mm", "i.h"]
    assert kernel_units(sources) == [
        "a.cu",
        "b.hip",
        "c.cpp",
        "d.cc",
        "e.cxx",
        "f.c++",
        "g.C",
        "h.mm",
    ]


def test_the_binding_compiles_its_cxx_sources_only() -> None:
    assert binding_units(["torch_binding.cpp", "torch_binding.h", "extra.cu"]) == [
        "torch_binding.cpp"
    ]


def test_the_plan_lists_every_compiled_source_of_every_backend_once() -> None:
    plan = plan_here(EXAMPLES / "fused-scale")
    assert plan.compile_units == [
        "fused_scale_cpu/fused_scale.cpp",
        "fused_scale_cuda/dispatch.cu",
        "fused_scale_cuda/kernels.cu",
        "torch-ext/torch_binding.cpp",
    ]
