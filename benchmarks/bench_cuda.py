"""CUDA builds of examples/fused-scale (three sources, archs 8.0 and 9.0a) in the
CUDA Torch environment (`.venv-cu130`, or $KERNELNIX_CUDA_VENV; scripts/setup.sh):

1. cold compile: `kernelnix build --local` of the torch214-cxx11-cu130 variant
   (configure, compile, link, install, post-build checks with the import through
   `kernels`) vs `torch.utils.cpp_extension.load` of the same sources with the same
   archs, flags and jobs (compile, link, load). No compiler cache. Target <= 1.
2. the compiler cache: the same build of a fresh copy of the tree, elsewhere, with
   ccache warm (the first copy's build filled it) vs that first, cold build.
   Target <= 0.2.

Run: python benchmarks/bench_cuda.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

from figures import Figure, Unavailable, report

from kernelnix.config import load_config
from kernelnix.emit.cmake import cmake_project, write_project
from kernelnix.host.environments import locked_environment, materialize
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import Plan

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "examples" / "fused-scale"
VENV = Path(os.environ.get("KERNELNIX_CUDA_VENV", ROOT / ".venv-cu130"))
NVCC = Path("/usr/local/cuda/bin/nvcc")
SYSTEM = "x86_64-linux"
VARIANT = "torch214-cxx11-cu130-x86_64-linux"
JOBS = 2

CPP_EXTENSION = """
import os, sys, time
import torch.utils.cpp_extension as cpp_extension
kernel, include, build, gencode, flags = sys.argv[1:6]
nvidia = os.path.join(os.path.dirname(os.path.dirname(cpp_extension.__file__)), "..", "nvidia")
extra = [os.path.join(nvidia, d, "include") for d in os.listdir(nvidia)]
start = time.perf_counter()
cpp_extension.load(
    name="fused_scale_bench",
    sources=[
        os.path.join(kernel, s)
        for s in ("torch-ext/torch_binding.cpp", "fused_scale_cuda/dispatch.cu",
                  "fused_scale_cuda/kernels.cu")
    ],
    extra_cflags=["-O3", "-DNDEBUG", "-DCUDA_KERNEL", "-DUSE_CUDA=1"],
    extra_cuda_cflags=[
        "-O3", "-DNDEBUG", "-DCUDA_KERNEL", "-DUSE_CUDA=1", *gencode.split(), *flags.split()
    ],
    extra_include_paths=[include, *extra],
    build_directory=build,
    is_python_module=False,
    verbose=False,
)
print(time.perf_counter() - start)
"""


def environment(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{VENV / 'bin'}{os.pathsep}{NVCC.parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "MAX_JOBS": str(JOBS),
        **extra,
    }


def time_build(project: Path, env: dict[str, str]) -> float:
    """`kernelnix build --local` of the variant, from a copy with no build/ yet."""
    start = time.perf_counter()
    subprocess.run(
        [VENV / "bin" / "python", "-m", "kernelnix", "build", "--local", project,
         "--variant", VARIANT, "-j", str(JOBS), "--no-progress"],
        check=True, capture_output=True, env=env,
    )  # fmt: skip
    return time.perf_counter() - start


@cache
def kernel_plan() -> Plan:
    """The kernel's plan for this system, made once for every step that reads it."""
    return build_plan(load_config(KERNEL), PlanOptions(systems=(SYSTEM,), unique_id="bench"))


def prepare_environment() -> None:
    """Unpack the variant's locked wheels now, untimed: a first `build --local` would
    otherwise time the unpacking of Torch and nvcc (about 40 s here) as the build."""
    environment = locked_environment(kernel_plan().variants[SYSTEM][VARIANT])
    if environment is not None:
        materialize(environment, log=lambda line: None)


def time_cpp_extension(work: Path) -> float:
    plan = kernel_plan()
    variant = plan.variants[SYSTEM][VARIANT]
    compiled = variant.compile["fused_scale"]
    write_project(cmake_project(plan, SYSTEM, VARIANT), work / "project")
    gencode = [f for f in compiled.gpu_flags if f.startswith("-gencode")]
    flags = [f for f in compiled.gpu_flags if not f.startswith("-gencode")]
    (work / "build").mkdir()
    done = subprocess.run(
        [VENV / "bin" / "python", "-c", CPP_EXTENSION, KERNEL, work / "project" / "include",
         work / "build", " ".join(gencode), " ".join(flags)],
        check=True, capture_output=True, text=True, env=environment(),
    )  # fmt: skip
    return float(done.stdout.split()[-1])


def copy(work: Path, name: str) -> Path:
    project = work / name / "fused-scale"
    shutil.copytree(KERNEL, project, ignore=shutil.ignore_patterns("build"))
    return project


def measure(repeat: int = 1) -> list[Figure]:
    if not (VENV / "bin" / "python").exists() or not NVCC.exists():
        raise Unavailable(
            f"needs the CUDA Torch environment {VENV} and {NVCC}: run scripts/setup.sh in this "
            "checkout, or set KERNELNIX_CUDA_VENV to one"
        )
    prepare_environment()
    ours, theirs, cold, warm = [], [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-cuda-") as tmp:
            work = Path(tmp)
            ours.append(
                time_build(copy(work, "ours"), environment(KERNELNIX_COMPILER_LAUNCHER="none"))
            )
            (work / "cpp").mkdir()
            theirs.append(time_cpp_extension(work / "cpp"))
            cache = environment(
                KERNELNIX_COMPILER_LAUNCHER="ccache", CCACHE_DIR=str(work / "ccache")
            )
            cold.append(time_build(copy(work, "cold"), cache))
            warm.append(time_build(copy(work, "warm"), cache))
    detail = f"best of {repeat}; archs 8.0 and 9.0a, --use_fast_math, -j{JOBS}"
    return [
        Figure(
            name="cold CUDA build of fused-scale (3 sources): kernelnix build --local",
            seconds=min(ours),
            baseline="torch.utils.cpp_extension.load, same sources, archs, flags and jobs",
            baseline_seconds=min(theirs),
            target=1.0,
            target_text="no slower than cpp_extension (ours also installs and checks)",
            detail=detail,
        ),
        Figure(
            name="rebuild of a fresh copy of fused-scale with a warm ccache",
            seconds=min(warm),
            baseline="the cold build that filled the cache",
            baseline_seconds=min(cold),
            target=0.2,
            target_text="a fifth of the cold build or less",
            detail=detail + "; both times include configure, install and the checks",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="builds of each (default 1)")
    report(measure(parser.parse_args().repeat))


if __name__ == "__main__":
    main()
