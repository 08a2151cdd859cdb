"""Each kernel's flags, resolved per variant in the plan (kernelnix.plan.flags)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelnix.compile.gpu_archs import compiled_archs
from kernelnix.config import load_config
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.gencode import cuda_gencode
from kernelnix.plan.model import Plan

SYSTEM = "x86_64-linux"
BUILD_TOML = """\
[general]
name = "flags"
version = 1
edition = 5
license = "MIT"
backends = ["cuda", "xpu", "rocm"]

[torch]
src = ["binding.cpp"]

[kernel.stub]
backend = "cuda"
depends = ["torch"]
src = ["stub.cu"]
cuda-capabilities = ["8.0", "9.0a+PTX"]
cuda-flags = ["--use_fast_math", "-static-global-template-stub=false"]

[kernel.tla]
backend = "xpu"
depends = ["torch", "sycl_tla"]
src = ["tla.cpp"]
sycl-flags = ["-fno-sycl-instrument-device-code"]
cxx-flags = ["-O3"]

[kernel.plain]
backend = "xpu"
depends = ["torch"]
src = ["plain.cpp"]

[kernel.hip]
backend = "rocm"
depends = ["torch"]
src = ["hip.hip"]
rocm-archs = ["gfx942"]
hip-flags = ["-ffast-math"]
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    kernel = tmp_path_factory.mktemp("flags")
    (kernel / "build.toml").write_text(BUILD_TOML)
    for source in ("binding.cpp", "stub.cu", "tla.cpp", "plain.cpp", "hip.hip"):
        (kernel / source).touch()
    return build_plan(load_config(kernel), PlanOptions(systems=(SYSTEM,), unique_id="x"))


def test_gencode_per_capability() -> None:
    assert cuda_gencode(["7.5", "9.0a", "10.0f", "12.1+PTX"]) == [
        "-gencode=arch=compute_75,code=sm_75",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_100f,code=sm_100f",
        "-gencode=arch=compute_121,code=sm_121",
        "-gencode=arch=compute_121,code=compute_121",
    ]


def test_the_template_stub_flag_reaches_only_cuda_12_8_and_newer(plan: Plan) -> None:
    gencode = [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_90a,code=compute_90a",
    ]
    old = plan.variant(SYSTEM, "torch213-cxx11-cu126-x86_64-linux").compile["stub"]
    assert old.gpu_flags == [*gencode, "--use_fast_math"]
    new = plan.variant(SYSTEM, "torch213-cxx11-cu130-x86_64-linux").compile["stub"]
    assert new.gpu_flags == [*gencode, "--use_fast_math", "-static-global-template-stub=false"]
    assert new.cxx_flags == [] and new.dependencies == []


# kernel-builder's SYCL compile flags (its preamble.cmake; kernels#752: IEEE fp32
# division and square root, as PyTorch has them).
SYCL = [
    "-fsycl",
    "-fhonor-nans",
    "-fhonor-infinities",
    "-fno-associative-math",
    "-fno-approx-func",
    "-foffload-fp32-prec-div",
    "-foffload-fp32-prec-sqrt",
    "-fno-sycl-instrument-device-code",
    "--offload-compress",
]


def test_sycl_kernels_are_compiled_ahead_of_time_for_their_devices(plan: Plan) -> None:
    variant = plan.variant(SYSTEM, "torch213-cxx11-xpu20260-x86_64-linux")
    assert variant.compile["tla"].cxx_flags == [
        *SYCL,
        "-fsycl-targets=spir64_gen,spir64",
        "-Xs",
        "-device pvc,bmg-g21,cri",
        "-fno-sycl-instrument-device-code",
        "-O3",
    ]
    assert variant.compile["plain"].cxx_flags == [
        *SYCL,
        "-fsycl-targets=spir64_gen,spir64",
        "-Xs",
        "-device pvc,xe-lpg,ats-m150",
    ]
    assert variant.compile["tla"].gpu_flags == []


def test_xe35_only_code_gets_crescent_island_its_own_image(tmp_path: Path) -> None:
    """kernels#734: a sycl-flag marking Xe35-only code lowers the generic image to
    cri alone; pvc and bmg get alias targets. Kernels without sycl_tla keep theirs."""
    kernel = tmp_path / "cri"
    kernel.mkdir()
    marked = '"-D__SYCL_TARGET_INTEL_GPU_CRI__"'
    toml = BUILD_TOML.replace(
        'sycl-flags = ["-fno-sycl-instrument-device-code"]', f"sycl-flags = [{marked}]"
    )
    (kernel / "build.toml").write_text(toml)
    for source in ("binding.cpp", "stub.cu", "tla.cpp", "plain.cpp", "hip.hip"):
        (kernel / source).touch()
    plan = build_plan(load_config(kernel), PlanOptions(systems=(SYSTEM,), unique_id="x"))
    variant = plan.variant(SYSTEM, "torch213-cxx11-xpu20260-x86_64-linux")
    assert variant.compile["tla"].cxx_flags[len(SYCL) :] == [
        "-fsycl-targets=intel_gpu_pvc,intel_gpu_bmg_g21,spir64_gen,spir64",
        "-Xs",
        "-device cri",
        "-D__SYCL_TARGET_INTEL_GPU_CRI__",
        "-O3",
    ]
    assert variant.compile["plain"].cxx_flags[len(SYCL) :] == [
        "-fsycl-targets=spir64_gen,spir64",
        "-Xs",
        "-device pvc,xe-lpg,ats-m150",
    ]


def test_rocm_kernels_get_one_offload_arch_per_arch(plan: Plan) -> None:
    variant = plan.variant(SYSTEM, "torch213-cxx11-rocm72-x86_64-linux")
    assert variant.compile["hip"].gpu_flags == ["--offload-arch=gfx942", "-ffast-math"]
    assert set(variant.compile) == set(variant.kernels) == {"hip"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH")
def test_nvcc_compiles_the_gencode_flags_of_10_3_and_12_1(tmp_path: Path) -> None:
    """The flags of the capabilities kernels #783 added, compiled by a real nvcc (13.0 here);
    the object's fatbin holds exactly those archs (kernelnix.compile.gpu_archs)."""
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float *x) { x[threadIdx.x] += 1.0f; }\n")
    flags = cuda_gencode(["10.3", "12.1+PTX"])
    subprocess.run(
        ["nvcc", "-c", *flags, str(source), "-o", str(tmp_path / "k.o")],
        check=True,
        capture_output=True,
    )
    assert compiled_archs(tmp_path / "k.o", "cuda") == ["10.3", "12.1+PTX"]
