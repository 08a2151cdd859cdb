"""The CUDA variant of examples/relu compiles and links with the real nvcc.

No GPU and a CPU build of Torch: the project compiles against Torch's headers
(a compile-only check; CMake warns that no Torch CUDA library is linked).
The library must export its module init and hold code for exactly the
planned archs, as cuobjdump (PyPI: nvidia-cuda-cuobjdump) and our own fatbin
reader both report. Nothing runs.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import EXAMPLES

from kernelnix.compile.gpu_archs import compiled_archs
from kernelnix.config import load_config
from kernelnix.emit.cmake import cmake_project, write_project
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import PlanVariant

NVCC = Path("/usr/local/cuda/bin/nvcc")
VARIANT = "torch213-cxx11-cu130-x86_64-linux"


def cuobjdump() -> Path | None:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel, if installed."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    found = [p for root in roots for p in sorted(Path(root).glob("*/bin/cuobjdump"))]
    return found[0] if found else None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not NVCC.exists(), reason=f"{NVCC} is not installed"),
]


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[PlanVariant, Path]:
    plan = build_plan(
        load_config(EXAMPLES / "relu"),
        PlanOptions(systems=("x86_64-linux",), unique_id="cuda1"),
    )
    variant = plan.variants["x86_64-linux"][VARIANT]
    root = tmp_path_factory.mktemp("cuda")
    write_project(
        {**cmake_project(plan, "x86_64-linux", VARIANT), "metadata.json": "{}"}, root / "project"
    )
    subprocess.run(
        ["cmake", "-G", "Ninja", "-S", root / "project", "-B", root / "build",
         f"-DKERNEL_SOURCE_DIR={EXAMPLES / 'relu'}", f"-DPython_EXECUTABLE={sys.executable}",
         f"-DCMAKE_CUDA_COMPILER={NVCC}", "-DNVCC_THREADS=2"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", root / "build", "-j", "2"], check=True)
    return variant, root / "build" / f"{variant.ops_id}.abi3.so"


def test_cuda_library_links_and_exports_its_module(cuda_build: tuple[PlanVariant, Path]) -> None:
    variant, library = cuda_build
    assert library.is_file()
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(rf"\bT PyInit_{variant.ops_id}$", symbols, re.MULTILINE)
    needed = subprocess.run(["readelf", "-d", library], capture_output=True, text=True).stdout
    assert "libcudart.so.13" in needed
    assert "libtorch_python" not in needed


def test_cuda_library_holds_exactly_the_planned_archs(cuda_build: tuple[PlanVariant, Path]) -> None:
    variant, library = cuda_build
    assert variant.archs == ["7.5", "8.0", "9.0"]
    assert compiled_archs(library, "cuda") == variant.archs
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")
    listed = subprocess.run(
        [tool, "--list-elf", library], capture_output=True, text=True, check=True
    ).stdout
    sms = sorted(re.findall(r"\.sm_(\d+)\.cubin", listed), key=int)
    assert sms == ["75", "80", "90"]
    ptx = subprocess.run([tool, "--list-ptx", library], capture_output=True, text=True).stdout
    assert ".ptx" not in ptx


def test_compile_commands_carry_the_cuda_flags(cuda_build: tuple[PlanVariant, Path]) -> None:
    _, library = cuda_build
    commands = json.loads((library.parent / "compile_commands.json").read_text())
    (cu,) = [c["command"] for c in commands if c["file"].endswith("relu.cu")]
    for flag in ("-DCUDA_KERNEL", "-DUSE_CUDA=1", "--threads=2", "-std=c++20"):
        assert flag in cu
    assert cu.count("-gencode=") == 3


def test_max_nvcc_jobs_puts_the_cuda_compiles_in_a_ninja_pool(tmp_path: Path) -> None:
    """NVCC_JOBS (from KERNELNIX_MAX_NVCC_JOBS): the CUDA component's compiles share a
    pool of that depth, whatever -j; the C++ component's do not."""
    plan = build_plan(
        load_config(EXAMPLES / "relu"),
        PlanOptions(systems=("x86_64-linux",), unique_id="cuda1"),
    )
    write_project(
        {**cmake_project(plan, "x86_64-linux", VARIANT), "metadata.json": "{}"},
        tmp_path / "project",
    )
    subprocess.run(
        ["cmake", "-G", "Ninja", "-S", tmp_path / "project", "-B", tmp_path / "build",
         f"-DKERNEL_SOURCE_DIR={EXAMPLES / 'relu'}", f"-DPython_EXECUTABLE={sys.executable}",
         f"-DCMAKE_CUDA_COMPILER={NVCC}", "-DNVCC_JOBS=1"],
        check=True, capture_output=True,
    )  # fmt: skip
    rules = (tmp_path / "build" / "CMakeFiles" / "rules.ninja").read_text()
    assert re.search(r"^pool kernelnix_nvcc\n  depth = 1$", rules, re.MULTILINE)
    ninja = (tmp_path / "build" / "build.ninja").read_text()
    edges = ninja.split("\nbuild ")
    cuda = [e for e in edges if e.split(":")[0].endswith(".cu.o")]
    cxx = [e for e in edges if e.split(":")[0].endswith(".cpp.o")]
    assert cuda and all("pool = kernelnix_nvcc" in e for e in cuda)
    assert cxx and not any("pool = kernelnix_nvcc" in e for e in cxx)
