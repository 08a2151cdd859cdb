"""What the glibc 2.27 target costs (kernelnix.host.glibc_target, docs/build.md).

1. A cold build of examples/relu's CPU variant with the target against the same
   build without it: configure, compile and link of the variant's CMake project,
   both with the private C++ runtime of a publishable build, without ccache, with
   two jobs, taking turns run by run. Target: at most 1.05 x.
2. The first assembly of the target on a machine: unpacking the locked ziglang
   wheel (already downloaded) and assembling the sysroot from it. Target: at most
   60 s, stated against the cold build with the target of the same run.

Run: python benchmarks/bench_glibc.py [--runs N]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import Figure, duration, environment_set, runs_main

from kernelnix.compile.glibc import cmake_definitions, read_glibc_target
from kernelnix.config import load_config
from kernelnix.emit.cmake import cmake_project, write_project
from kernelnix.host import glibc_target
from kernelnix.host.environments import (
    cache_dir,
    fetch_wheel,
    locked_glibc_target,
    materialize_glibc_target,
)
from kernelnix.host.system import current_system
from kernelnix.host.wheel_tree import unpack
from kernelnix.plan.build import PlanOptions, build_plan

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "examples" / "relu"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
JOBS = 2
BUILD_TARGET = 1.05
ASSEMBLY_LIMIT_S = 60.0


def cold_build(definitions: list[str]) -> float:
    """Configure, compile and link relu's CPU variant in a fresh directory."""
    plan = build_plan(load_config(KERNEL), PlanOptions(systems=(current_system(),)))
    work = Path(tempfile.mkdtemp(prefix="bench-glibc-"))
    try:
        project, build = work / "project", work / "build"
        write_project(
            {**cmake_project(plan, current_system(), VARIANT), "metadata.json": "{}"}, project
        )
        start = time.perf_counter()
        subprocess.run(
            ["cmake", "-G", "Ninja", "-S", project, "-B", build, f"-DKERNEL_SOURCE_DIR={KERNEL}",
             f"-DPython_EXECUTABLE={sys.executable}", "-DKERNELNIX_PRIVATE_CXX_RUNTIME=ON",
             *definitions],
            check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(
            ["cmake", "--build", build, "-j", str(JOBS)], check=True, capture_output=True
        )
        return time.perf_counter() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)


def first_assembly() -> tuple[float, float]:
    """(unpacking the ziglang wheel, assembling the sysroot from it), in fresh directories."""
    locked = locked_glibc_target(current_system())
    wheel = fetch_wheel(locked.wheel, cache_dir(), log=lambda line: None)
    work = Path(tempfile.mkdtemp(prefix="bench-glibc-target-"))
    try:
        start = time.perf_counter()
        unpack(wheel, work / "ziglang")
        unpacked = time.perf_counter()
        glibc_target.assemble(work / "ziglang", work / "target", locked.glibc, locked.arch)
        return unpacked - start, time.perf_counter() - unpacked
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(runs: int = 3) -> list[Figure]:
    locked = locked_glibc_target(current_system())
    target = read_glibc_target(materialize_glibc_target(locked, log=lambda line: None))
    with_target: list[float] = []
    without: list[float] = []
    with environment_set(CCACHE_DISABLE="1"):
        for _ in range(runs):
            with_target.append(cold_build(cmake_definitions(target)))
            without.append(cold_build([]))
    unpacking, assembly = first_assembly()
    first = unpacking + assembly
    build = min(with_target)
    return [
        Figure(
            name=f"cold build of relu's CPU variant against the glibc {locked.glibc} target "
            f"(configure to link, -j{JOBS})",
            seconds=build,
            baseline="the same build against this machine's glibc",
            baseline_seconds=min(without),
            target=BUILD_TARGET,
            target_text=f"at most {BUILD_TARGET} x",
            detail=f"best of {runs}, taking turns; both with the private C++ runtime, no ccache",
        ),
        Figure(
            name=f"first assembly of the glibc {locked.glibc} target (unpack the wheel, assemble)",
            seconds=first,
            baseline="the cold build against the target above",
            baseline_seconds=build,
            target=ASSEMBLY_LIMIT_S / build,
            target_text=f"at most {ASSEMBLY_LIMIT_S:.0f} s",
            detail=f"unpack {duration(unpacking)}, assemble {duration(assembly)}; "
            "the download (101 MB) not counted",
        ),
    ]


if __name__ == "__main__":
    runs_main(measure, 3)
