"""Cold compile time of examples/relu (CPU): kernelnix's CMake project vs
`torch.utils.cpp_extension.load` on the same sources.

Both start from fresh build directories, without ccache, with two parallel
jobs and the same optimisation (-O3 -DNDEBUG, what our Release build uses).
Ours is timed from `cmake` configure to the linked library (the checks and
the install are timed apart); cpp_extension's `load` from the call to the
loaded library. Differences that remain are each tool's own: cpp_extension
defines TORCH_API_INCLUDE_EXTENSION_H (torch/torch.h then pulls in pybind11
and the Python bindings) and links libtorch_python; we build a limited-API
module with hidden visibility and link only c10/torch_cpu/torch.

Target: ours no slower than cpp_extension (ratio <= 1).

Run: python benchmarks/bench_compile.py [--repeat N] [--with-build-step]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch.utils.cpp_extension as cpp_extension
from figures import Figure, environment_set, report

from kernelnix.compile import build_variant
from kernelnix.config import load_config
from kernelnix.emit.cmake import cmake_project, write_project
from kernelnix.host.system import current_system
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import Plan

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "examples" / "relu"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
SOURCES = ["torch-ext/torch_binding.cpp", "relu_cpu/relu_cpu.cpp"]
JOBS = 2
OPTIMIZE = ["-O3", "-DNDEBUG"]


def plan() -> Plan:
    options = PlanOptions(systems=(current_system(),), unique_id="bench")
    return build_plan(load_config(KERNEL), options)


def time_ours(work: Path) -> float:
    """configure + compile + link of the generated CMake project."""
    project, build = work / "project", work / "build"
    write_project(
        {**cmake_project(plan(), current_system(), VARIANT), "metadata.json": "{}"}, project
    )
    start = time.perf_counter()
    subprocess.run(
        ["cmake", "-G", "Ninja", "-S", project, "-B", build, f"-DKERNEL_SOURCE_DIR={KERNEL}",
         f"-DPython_EXECUTABLE={sys.executable}"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", build, "-j", str(JOBS)], check=True, capture_output=True)
    return time.perf_counter() - start


def time_cpp_extension(work: Path) -> float:
    """torch.utils.cpp_extension.load of the same sources (registration.h from our project)."""
    project = work / "project"
    write_project(cmake_project(plan(), current_system(), VARIANT), project)
    start = time.perf_counter()
    with environment_set(MAX_JOBS=str(JOBS)):
        cpp_extension.load(
            name="relu_cpp_extension_bench",
            sources=[str(KERNEL / s) for s in SOURCES],
            extra_cflags=[*OPTIMIZE, "-DCPU_KERNEL"],
            extra_include_paths=[str(project / "include")],
            build_directory=str(work),
            is_python_module=False,
            verbose=False,
        )
    return time.perf_counter() - start


def time_build_step(out: Path) -> float:
    """The whole build step (configure, compile, install, checks), for reference."""
    start = time.perf_counter()
    build_variant(plan(), current_system(), VARIANT, KERNEL, out, jobs=JOBS)
    return time.perf_counter() - start


def fresh(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))


def measure(repeat: int = 1) -> list[Figure]:
    """Best of `repeat` cold builds of each."""
    ours: list[float] = []
    theirs: list[float] = []
    # No compiler cache on either side (cpp_extension uses ccache when installed).
    with environment_set(CCACHE_DISABLE="1"):
        for _ in range(repeat):
            for times, timer, prefix in (
                (ours, time_ours, "ours"),
                (theirs, time_cpp_extension, "cpp"),
            ):
                work = fresh(prefix)
                try:
                    times.append(timer(work))
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    return [
        Figure(
            name=f"cold compile of relu CPU by our CMake project (configure to link, -j{JOBS})",
            seconds=min(ours),
            baseline="torch.utils.cpp_extension.load of the same sources",
            baseline_seconds=min(theirs),
            target=1.0,
            target_text="no slower than cpp_extension",
            detail=f"best of {repeat}; both {' '.join(OPTIMIZE)}, no ccache",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="cold builds of each (default 1)")
    parser.add_argument("--with-build-step", action="store_true", help="also time build_variant")
    args = parser.parse_args()
    report(measure(args.repeat))
    if args.with_build_step:
        out = fresh("step")
        try:
            print(f"kernelnix build step (+ install, checks): {time_build_step(out):.1f} s")
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
