"""How the checks corpus is compiled: one shared library per case, each planting
one violation (or none), built once per test session into a temporary folder.

Used by tests/test_checks*.py through `build_corpus()`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
NVCC_FALLBACK = "/usr/local/cuda/bin/nvcc"


@dataclass(frozen=True)
class Case:
    name: str
    compiler: str  # "gcc", "g++" or "nvcc"
    source: str
    flags: tuple[str, ...] = ()

    @property
    def library(self) -> str:
        return f"lib{self.name}.so"


RECOMMENDED_STATIC = ("-static-libstdc++", "-Wl,--exclude-libs,ALL", "-l:libgcc.a")
CASES = (
    Case("clean_c", "gcc", "clean.c"),
    # The link redistributable builds use (docs/libstdcxx.md): a private static
    # libstdc++, libgcc's helpers from the archive, the unwinder from libgcc_s.
    Case("clean_static_cxx", "g++", "old_cxx.cpp", RECOMMENDED_STATIC),
    Case("streams_static_cxx", "g++", "streams_cxx.cpp", RECOMMENDED_STATIC),
    Case("streams_exported_cxx", "g++", "streams_cxx.cpp", ("-static-libstdc++", "-static-libgcc")),
    Case("dynamic_cxx", "g++", "old_cxx.cpp"),
    Case("glibc_234", "gcc", "glibc_234.c"),
    Case("glibcxx_329", "g++", "glibcxx_329.cpp"),
    Case("needs_tiny", "gcc", "needs_tiny.c", ("-L{out}", "-lkntiny")),
    Case("runpath_abs", "gcc", "clean.c", ("-Wl,-rpath,/nix/store/abc123-foo/lib",)),
    Case("glibc_private", "gcc", "glibc_private.c", ("{loader}",)),
    Case("py_nonabi3", "gcc", "py_nonabi3.c"),
    Case("py_incompatible", "gcc", "py_incompatible.c"),
    Case("torch_unstable", "g++", "torch_unstable.cpp"),
    Case("torch_shim", "gcc", "torch_shim.c"),
    Case("cuda_kernel", "nvcc", "cuda_kernel.cu", ("-cudart", "shared")),
)


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    return NVCC_FALLBACK if os.access(NVCC_FALLBACK, os.X_OK) else None


def _loader() -> str:
    for candidate in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"):
        if Path(candidate).exists():
            return candidate
    raise RuntimeError("no dynamic loader found to link the GLIBC_PRIVATE case against")


def _command(case: Case, out: Path) -> list[str] | None:
    flags = [f.format(out=out, loader=_loader() if "{loader}" in f else "") for f in case.flags]
    source = str(HERE / case.source)
    target = str(out / case.library)
    if case.compiler == "nvcc":
        compiler = nvcc()
        if compiler is None:
            return None
        return [
            compiler,
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-O2",
            "-gencode",
            "arch=compute_80,code=sm_80",
            *flags,
            source,
            "-o",
            target,
        ]
    return [case.compiler, "-O2", "-fPIC", "-shared", source, *flags, "-o", target]


@dataclass(frozen=True)
class Corpus:
    root: Path
    libraries: dict[str, Path]  # case name -> library path (cases that could be built)

    def path(self, name: str) -> Path:
        return self.libraries[name]


@cache
def build_corpus() -> Corpus:
    """Compile every case (once per process); cases whose compiler is missing are absent."""
    out = Path(tempfile.mkdtemp(prefix="kernelnix-checks-corpus-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    _run(
        [
            "gcc",
            "-O2",
            "-fPIC",
            "-shared",
            str(HERE / "tiny.c"),
            "-Wl,-soname,libkntiny.so",
            "-o",
            str(out / "libkntiny.so"),
        ]
    )
    libraries: dict[str, Path] = {}
    for case in CASES:
        command = _command(case, out)
        if command is None:
            continue
        _run(command)
        libraries[case.name] = out / case.library
    stripped = out / "libglibc_234_stripped.so"
    shutil.copy(libraries["glibc_234"], stripped)
    _run(["strip", "--strip-all", str(stripped)])
    libraries["glibc_234_stripped"] = stripped
    return Corpus(root=out, libraries=libraries)


def build_extension_module(module: str, target: Path) -> Path:
    """The variant's `<id>.abi3.so`: a real abi3 extension module named `module`."""
    include = sysconfig.get_paths()["include"]
    _run(
        [
            "gcc",
            "-O2",
            "-fPIC",
            "-shared",
            f"-I{include}",
            f"-DKN_MODULE={module}",
            str(HERE / "extension_module.c"),
            "-o",
            str(target),
        ]
    )
    return target


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr}")
