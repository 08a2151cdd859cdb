"""ROCm kernels' CUDA sources hipified with Torch's tool (kernelnix.compile.hipify):
the translated trees of the examples are golden files; the kernel's own tree is
never touched; the plan's sources follow the renames."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from paths import EXAMPLES

from kernelnix.compile.gpu_archs import compiled_archs
from kernelnix.compile.hipify import hipify_tree, needs_hipify, with_hipified_sources
from kernelnix.config import load_config
from kernelnix.emit.cmake import cmake_project
from kernelnix.plan.build import PlanOptions, build_plan

SYSTEM = "x86_64-linux"
CASES = {
    "relu": ("relu_rocm", "torch214-cxx11-rocm72-x86_64-linux"),
    "fused-scale": ("fused_scale_rocm", "torch214-cxx11-rocm72-x86_64-linux"),
}


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("example", sorted(CASES))
def test_hipified_trees_are_golden(example: str, tmp_path: Path, golden: Any) -> None:
    kernel, variant_name = CASES[example]
    plan = build_plan(
        load_config(EXAMPLES / example), PlanOptions(systems=(SYSTEM,), unique_id="hip1")
    )
    variant = plan.variants[SYSTEM][variant_name]
    assert needs_hipify(plan, variant)
    sources = list(plan.kernels[kernel].src)
    before = snapshot(EXAMPLES / example)
    mapping = hipify_tree(EXAMPLES / example, tmp_path / "hip", sources)
    assert snapshot(EXAMPLES / example) == before  # the kernel's tree is left alone
    for source in sources:
        hipified = mapping[source]
        assert "cuda" not in hipified and hipified.endswith((".hip", ".cuh"))
        golden(f"hipify/{example}/{hipified}", (tmp_path / "hip" / hipified).read_text())
    # The CMake project compiles the hipified files as HIP.
    renamed = with_hipified_sources(plan, mapping)
    cmakelists = cmake_project(renamed, SYSTEM, variant_name)["CMakeLists.txt"]
    assert "kernelnix_source_language([[HIP]]" in cmakelists
    for source in sources:
        if source.endswith(".cu"):
            assert f"[[{mapping[source]}]]" in cmakelists and f"[[{source}]]" not in cmakelists


def test_cuda_and_cpu_variants_are_not_hipified() -> None:
    plan = build_plan(
        load_config(EXAMPLES / "fused-scale"), PlanOptions(systems=(SYSTEM,), unique_id="hip2")
    )
    for name in ("torch214-cxx11-cu130-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux"):
        assert not needs_hipify(plan, plan.variants[SYSTEM][name])


def test_hip_guards_and_plain_files_survive(tmp_path: Path, golden: Any) -> None:
    """A file that is HIP-aware already (USE_ROCM guards) and one with nothing to map."""
    source = tmp_path / "k"
    (source / "k_cuda").mkdir(parents=True)
    (source / "k_cuda" / "guarded.cu").write_text(
        "#ifdef USE_ROCM\n#include <hip/hip_runtime.h>\n#else\n#include <cuda_runtime.h>\n#endif\n"
        "__global__ void k(float *x) { x[threadIdx.x] += 1.0f; }\n"
        "void launch(float *x, cudaStream_t s) { k<<<1, 32, 0, s>>>(x); }\n"
    )
    (source / "k_cuda" / "plain.cuh").write_text("#pragma once\nconstexpr int kWidth = 32;\n")
    mapping = hipify_tree(source, tmp_path / "hip", ["k_cuda/guarded.cu", "k_cuda/plain.cuh"])
    assert mapping == {
        "k_cuda/guarded.cu": "k_hip/guarded.hip",
        "k_cuda/plain.cuh": "k_hip/plain.cuh",
    }
    guarded = (tmp_path / "hip" / "k_hip" / "guarded.hip").read_text()
    assert "hipStream_t" in guarded and "hipLaunchKernelGGL" in guarded
    golden("hipify/edge/guarded.hip", guarded)


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="needs Debian's hipcc")
def test_hipified_device_code_compiles_for_the_planned_archs(tmp_path: Path) -> None:
    """Debian's hipcc compiles the hipified kernels of fused-scale (device code and
    c10's headers; no ROCm build of Torch can be had here to link against)."""
    plan = build_plan(
        load_config(EXAMPLES / "fused-scale"), PlanOptions(systems=(SYSTEM,), unique_id="hip3")
    )
    archs = plan.variants[SYSTEM]["torch214-cxx11-rocm72-x86_64-linux"].kernels["fused_scale_rocm"]
    assert archs == ["gfx90a", "gfx942"]
    archs = archs[:1]  # Debian's LLVM 15 predates gfx942
    source = "fused_scale_cuda/kernels.cu"
    mapping = hipify_tree(EXAMPLES / "fused-scale", tmp_path / "hip", [source])
    torch_include = Path(torch.__file__).parent / "include"
    obj = tmp_path / "kernels.o"
    subprocess.run(
        ["hipcc", "-std=c++17", *(f"--offload-arch={a}" for a in archs), f"-I{torch_include}",
         "-c", tmp_path / "hip" / mapping[source], "-o", obj],
        check=True, capture_output=True, env={**os.environ, "HIP_PLATFORM": "amd"},
    )  # fmt: skip
    assert compiled_archs(obj, "rocm") == archs
