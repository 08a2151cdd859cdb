"""Speed of kernelnix's ELF symbol checks against kernel-abi-check, on the same files.

Builds (once; cached under $KERNELNIX_BENCH_CACHE or <tmp>/kernelnix-bench-checks):

- one big CUDA library (> 200 MB): a templated kernel instantiated many times and a
  16 MiB `__device__` table, compiled for every GPU architecture nvcc knows, with
  fatbin compression off, as the fatbins of large kernels are;
- a batch of 50 CUDA kernel libraries as a CUDA variant ships them: device code
  compiled for the variant's default architectures (kernelnix's matrix data for
  the installed nvcc, the same -gencode flags kernelnix emits), linked with host
  code that imports 60 to 270 libtorch-style C++ symbols (~1.1 MB each;
  the 50 share their device code, which the checks do not look at);
- a batch of 50 CPU extension libraries as g++ builds them (~110 KB, the same
  host code alone, like real CPU kernel variants);
- a batch of 50 tiny CUDA libraries (a few kernels for two architectures and no
  Torch imports, ~45 KB each): smaller than any real kernel, they show the fixed
  per-file cost of parsing in Python against the reference's compiled parser,
  and have no target.

Then times, in the same process and on the same files, the symbol checks both tools
share: one warm-up pass each, then the best of several passes, the tools taking
turns pass by pass, each pass reading and checking every file afresh. Prints the
times and kernelnix/reference ratios (target <= 1.0). The ratio compares the same
work: kernel-abi-check's check_manylinux (manylinux_2_28 symbol versions) and
check_python_abi (Python ABI 3.9) against kernelnix's symbol_versions and
python_abi_symbols rules. The last column times kernelnix's whole ELF rule set (also
DT_NEEDED, forbidden symbols, search paths, platform), which decodes .dynamic as
well: checks the reference does not make, so they are shown beside the ratio rather
than charged to it. Each tool gets its input as its API takes it (a path; a
directory and a file name), converted before timing.

kernelnix reads only the headers and the dynamic-linking sections, so its cost does
not grow with the file; the reference reads whole files. On tiny libraries the
fixed per-file cost of Python parsing dominates instead.

    python benchmarks/bench_checks.py [--repeat 7] [--rebuild]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from figures import Figure, ratio_text

from kernelnix.checks.binaries import (
    BinaryRule,
    BinarySettings,
    check_binary,
    load_binaries,
    python_abi_symbols,
    symbol_versions,
)
from kernelnix.checks.policy import load_policy
from kernelnix.core.version import Version
from kernelnix.plan.flags import cuda_gencode
from kernelnix.variants.matrix import load_matrix

BIG_MIN_BYTES = 200 * 1000 * 1000
SMALL_COUNT = 50
TABLE_BYTES = 16 << 20
NVCC_FALLBACK = "/usr/local/cuda/bin/nvcc"
# What kernel-abi-check's check_manylinux and check_python_abi do.
SHARED_RULES: tuple[BinaryRule, ...] = (symbol_versions, python_abi_symbols)


BIG_KERNEL = r"""
#include <cuda_runtime.h>

// A table that lands, uncompressed, in every architecture's cubin.
__device__ const unsigned char kn_table[KN_TABLE_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8};

template <int Unroll, typename T>
__global__ void kn_mix(T* out, const T* in, const int* index, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T acc = in[i];
#pragma unroll
    for (int k = 0; k < Unroll; ++k) {
        acc = acc * T(1.0001) + T(kn_table[(index[i] + k * 977) % KN_TABLE_BYTES]);
    }
    out[i] = acc;
}

#define KN_INSTANTIATE(U)                                                          \
    template __global__ void kn_mix<U, float>(float*, const float*, const int*, int); \
    template __global__ void kn_mix<U, double>(double*, const double*, const int*, int);
KN_INSTANTIATE(1) KN_INSTANTIATE(2) KN_INSTANTIATE(4) KN_INSTANTIATE(8)
KN_INSTANTIATE(16) KN_INSTANTIATE(32) KN_INSTANTIATE(64) KN_INSTANTIATE(128)

extern "C" int kn_launch(float* out, const float* in, const int* index, int n) {
    kn_mix<64, float><<<(n + 255) / 256, 256>>>(out, in, index, n);
    return static_cast<int>(cudaGetLastError());
}
"""


SMALL_KERNEL = r"""
#include <cuda_runtime.h>

template <int Steps, typename T>
__global__ void kn_kernel_SEED(T* out, const T* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T acc = in[i];
#pragma unroll
    for (int k = 0; k < Steps; ++k) acc = acc * T(0.5) + T(SEED + k);
    out[i] = acc;
}

template __global__ void kn_kernel_SEED<4, float>(float*, const float*, int);
template __global__ void kn_kernel_SEED<16, float>(float*, const float*, int);
template __global__ void kn_kernel_SEED<64, float>(float*, const float*, int);
template __global__ void kn_kernel_SEED<16, double>(double*, const double*, int);

extern "C" int kn_launch_SEED(float* out, const float* in, int n) {
    kn_kernel_SEED<16, float><<<(n + 255) / 256, 256>>>(out, in, n);
    return static_cast<int>(cudaGetLastError());
}
"""
SMALL_CUDA_CODES = ("sm_80", "sm_90")
# Kernel templates in the device code of the kernel-library batch.
KERNEL_TEMPLATES = 8


def small_source(seed: int) -> str:
    """An extension-like C++ library: imports libtorch-style symbols, exports functions."""
    imports = 40 + (seed * 37) % 260
    exports = 20 + (seed * 53) % 180
    lines = ["#include <string>", "#include <vector>", "#include <cstring>", "#include <cmath>"]
    lines += [
        f"namespace at {{ namespace native {{ int op_{i}(const std::string&); }} }}"
        for i in range(imports)
    ]
    lines += ['extern "C" void* PyUnicode_FromString(const char*);']
    for i in range(exports):
        calls = " + ".join(f"at::native::op_{(i * 7 + k) % imports}(s)" for k in range(1 + i % 4))
        lines.append(
            f"int kn_fn_{seed}_{i}(const char* text) {{ std::string s(text); "
            f"std::vector<int> v(s.size(), {i}); PyUnicode_FromString(text); "
            f"return {calls} + int(std::sqrt(double(v.size()))) + int(std::strlen(text)); }}"
        )
    return "\n".join(lines) + "\n"


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    return NVCC_FALLBACK if os.access(NVCC_FALLBACK, os.X_OK) else None


def gpu_codes(compiler: str) -> list[str]:
    listed = subprocess.run(
        [compiler, "--list-gpu-code"], capture_output=True, text=True, check=True
    ).stdout.split()
    return [code for code in listed if code.startswith("sm_")]


def build_big(cache: Path) -> Path:
    target = cache / "libbig_kernel.so"
    if target.exists() and target.stat().st_size > BIG_MIN_BYTES:
        return target
    compiler = nvcc()
    source = cache / "big_kernel.cu"
    source.write_text(BIG_KERNEL)
    if compiler is None:
        # Without nvcc: same size class from a host-side table (still one big .rodata).
        print("nvcc not found: building the big library with g++ and a host table instead")
        source = cache / "big_host.cpp"
        size = BIG_MIN_BYTES + (8 << 20)
        source.write_text(
            f'extern "C" {{ __attribute__((used)) const unsigned char kn_blob[{size}] = '
            "{1, 2, 3}; int kn_first() { return kn_blob[0]; } }\n"
        )
        run(["g++", "-O1", "-fPIC", "-shared", str(source), "-o", str(target)])
        return target
    codes = gpu_codes(compiler)
    print(
        f"building the big CUDA library for {len(codes)} architectures "
        f"({', '.join(codes)}); this takes a few minutes"
    )
    extra = ["-compress-mode=none", f"-DKN_TABLE_BYTES={TABLE_BYTES}"]
    nvcc_shared_library(compiler, codes, source, target, extra)
    return target


def nvcc_shared_library(
    compiler: str, codes: Sequence[str], source: Path, target: Path, extra: Sequence[str] = ()
) -> None:
    """A shared library as CUDA kernel libraries are built: -O2, shared cudart, `codes`."""
    gencode = [f"-gencode=arch=compute_{c[3:]},code={c}" for c in codes]
    command = [compiler, "-shared", "-Xcompiler", "-fPIC", "-O2", "-cudart", "shared"]
    run([*command, *extra, *gencode, str(source), "-o", str(target)])


def build_small_cuda(cache: Path) -> list[Path]:
    compiler = nvcc()
    if compiler is None:
        print("nvcc not found: skipping the batch of small CUDA libraries")
        return []
    return build_batch(
        cache / "small-cuda",
        "cuda",
        lambda seed: (SMALL_KERNEL.replace("SEED", str(seed)), ".cu"),
        lambda source, target: nvcc_shared_library(compiler, SMALL_CUDA_CODES, source, target),
    )


def build_batch(
    folder: Path,
    stem: str,
    source_of: Callable[[int], tuple[str, str]],
    compile_to: Callable[[Path, Path], None],
) -> list[Path]:
    """SMALL_COUNT libraries `folder/lib<stem>_NN.so`, each compiled by
    `compile_to(source, library)` from its own source, `source_of(NN)` = (text,
    suffix), unless built already."""
    folder.mkdir(exist_ok=True)
    libraries = []
    for seed in range(SMALL_COUNT):
        target = folder / f"lib{stem}_{seed:02d}.so"
        if not target.exists():
            text, suffix = source_of(seed)
            source = folder / f"{stem}_{seed:02d}{suffix}"
            source.write_text(text)
            compile_to(source, target)
        libraries.append(target)
    return libraries


def build_cuda_kernels(cache: Path) -> list[Path]:
    compiler = nvcc()
    if compiler is None:
        print("nvcc not found: skipping the batch of CUDA kernel libraries")
        return []
    folder = cache / "cuda-kernels"
    folder.mkdir(exist_ok=True)
    device = folder / "kernels.o"
    if not device.exists():
        source = folder / "kernels.cu"
        source.write_text(
            "".join(SMALL_KERNEL.replace("SEED", str(k)) for k in range(KERNEL_TEMPLATES))
        )
        archs = variant_archs(compiler)
        print(f"compiling the kernel libraries' device code for {', '.join(archs)}")
        command = [compiler, "-c", "-Xcompiler", "-fPIC", "-O2", *cuda_gencode(archs)]
        run([*command, str(source), "-o", str(device)])
    link = [compiler, "-shared", "-Xcompiler", "-fPIC", "-O1", "-cudart", "shared", str(device)]
    return build_batch(
        folder,
        "kernel",
        lambda seed: (small_source(seed), ".cpp"),
        lambda host, target: run([*link, str(host), "-o", str(target)]),
    )


def variant_archs(compiler: str) -> list[str]:
    """The default CUDA architectures of a variant built with `compiler`, as far as it
    can build them."""
    release = (
        subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
        .stdout.rsplit("release ", 1)[1]
        .split(",")[0]
    )
    known = set(gpu_codes(compiler))
    archs = load_matrix().cuda_default_archs(Version.parse(release))
    return [a for a in archs if f"sm_{a.split('+')[0].replace('.', '')}" in known]


def build_small(cache: Path) -> list[Path]:
    return build_batch(
        cache / "small",
        "small",
        lambda seed: (small_source(seed), ".cpp"),
        lambda source, target: run(
            ["g++", "-O1", "-fPIC", "-shared", str(source), "-o", str(target)]
        ),
    )


def run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr}")


def kernelnix_check(
    settings: BinarySettings, rules: tuple[BinaryRule, ...] | None = None
) -> Callable[[tuple[str, str]], int]:
    """Check one (directory, file name): the shared `rules`, or every ELF rule (None)."""

    def check(file: tuple[str, str]) -> int:
        binaries, problems = load_binaries(*file)
        return len(problems) + sum(len(check_binary(b, settings, rules)) for b in binaries)

    return check


def reference_check(path: str) -> int:
    import kernel_abi_check

    library = kernel_abi_check.ObjectFile(path)
    return len(library.check_manylinux("manylinux_2_28")) + len(library.check_python_abi("3.9"))


def tool_inputs(files: list[Path]) -> tuple[list[tuple[str, str]], list[str]]:
    """Each tool's input as its API takes it, made before timing: kernelnix's
    (directory, file name) pairs and kernel-abi-check's paths."""
    return [(str(p.parent), p.name) for p in files], [str(p) for p in files]


def time_passes(
    tools: Sequence[tuple[Callable[[Any], int], Sequence[Any]]], repeat: int
) -> list[list[float]]:
    """The times of `repeat` passes of each (check, its files), the tools taking turns
    pass by pass after a warm-up pass each (tables, policies, page cache): a slow spell
    of a shared machine then falls on every tool alike, not on one tool's passes."""
    for check, files in tools:
        for file in files:
            check(file)
    times: list[list[float]] = [[] for _ in tools]
    for _ in range(repeat):
        for (check, files), passes in zip(tools, times, strict=True):
            start = time.perf_counter()
            for file in files:
                check(file)
            passes.append(time.perf_counter() - start)
    return times


@dataclass(frozen=True)
class Workload:
    label: str
    files: list[Path]
    target: float | None = 1.0  # the largest kernelnix/reference ratio that passes


def prepare(rebuild: bool) -> tuple[BinarySettings, list[Workload]]:
    """The settings both tools check with, and the workloads (libraries built on first use)."""
    try:
        import kernel_abi_check  # noqa: F401
    except ImportError:
        sys.exit("kernel-abi-check is not installed: pip install kernel-abi-check")

    cache = Path(
        os.environ.get(
            "KERNELNIX_BENCH_CACHE", Path(tempfile.gettempdir()) / "kernelnix-bench-checks"
        )
    )
    if rebuild and cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)
    big = build_big(cache)
    kernels = build_cuda_kernels(cache)
    small = build_small(cache)
    tiny = build_small_cuda(cache)
    settings = BinarySettings(
        policy=load_policy("manylinux_2_28", "x86_64"),
        python_abi=Version.parse("3.9"),
        stable_abi=None,
        macos_min=Version.parse("15.0"),
        backend="cuda",
        cpu="x86_64",
        os_name="linux",
        redistributable=True,
    )
    workloads = [Workload("big library (1 file)", [big])]
    if kernels:
        workloads.append(Workload(f"CUDA kernel libs ({len(kernels)})", kernels))
    workloads.append(Workload(f"CPU extension libs ({len(small)})", small))
    if tiny:
        workloads.append(Workload(f"tiny CUDA libs ({len(tiny)})", tiny, target=None))
    return settings, workloads


def measure(repeat: int = 7, rebuild: bool = False) -> list[Figure]:
    """Per workload: the shared symbol checks, best of `repeat` passes, against kernel-abi-check."""
    settings, workloads = prepare(rebuild)
    shared = kernelnix_check(settings, SHARED_RULES)
    figures = []
    for workload in workloads:
        files = workload.files
        named, paths = tool_inputs(files)
        mine, theirs = time_passes([(shared, named), (reference_check, paths)], repeat)
        size = sum(p.stat().st_size for p in files) / 1e6
        figures.append(
            Figure(
                name=f"kernelnix check, {workload.label}, {size:.1f} MB",
                seconds=min(mine),
                baseline="kernel-abi-check on the same files",
                baseline_seconds=min(theirs),
                target=workload.target,
                target_text="no slower than kernel-abi-check"
                if workload.target is not None
                else "libraries smaller than real kernels, shown for the fixed per-file cost",
                detail=f"best of {repeat} passes of the symbol checks both tools run",
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed passes per tool")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached libraries")
    args = parser.parse_args()
    settings, workloads = prepare(args.rebuild)
    shared, everything = kernelnix_check(settings, SHARED_RULES), kernelnix_check(settings)
    for workload in workloads:
        size = sum(p.stat().st_size for p in workload.files)
        target = "no target" if workload.target is None else f"target <= {workload.target}"
        print(f"{workload.label}: {size / 1e6:.1f} MB, {target}")
    print(
        f"{'workload':<26}{'kernelnix':>12}{'kernel-abi-check':>19}{'ratio':>8}"
        f"{'kernelnix, all rules':>23}"
    )
    for workload in workloads:
        named, paths = tool_inputs(workload.files)
        mine, theirs, full = time_passes(
            [(shared, named), (reference_check, paths), (everything, named)], args.repeat
        )
        for kind, pick in (("best", min), ("median", statistics.median)):
            name = workload.label if kind == "best" else "  (median)"
            print(
                f"{name:<26}{pick(mine) * 1e3:>9.2f} ms{pick(theirs) * 1e3:>16.2f} ms"
                f"{ratio_text(pick(mine) / pick(theirs)):>9}{pick(full) * 1e3:>14.2f} ms"
                f" ({ratio_text(pick(full) / pick(theirs))})"
            )


if __name__ == "__main__":
    main()
