"""Which of a kernel's sources are compiled, and as what language, by suffix: the
one list that the CMake project (kernelnix.emit.cmake) compiles from and that the
plan records as `compile-units` for Nix, which builds an object-by-object variant
one derivation per unit (docs/distributed.md). Every other source is a header or
a file of the Python package."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".c++", ".C"})
# Compiled by the GPU compiler: nvcc, or hipcc for a ROCm kernel (hipified .cu).
GPU_SUFFIXES = frozenset({".cu", ".hip"})
OBJCXX_SUFFIXES = frozenset({".mm"})
COMPILED_SUFFIXES = CXX_SUFFIXES | GPU_SUFFIXES | OBJCXX_SUFFIXES


def suffix(source: str) -> str:
    return PurePosixPath(source).suffix


def kernel_units(sources: Iterable[str]) -> list[str]:
    """The sources of a kernel that compile into an object, in their order."""
    return [s for s in sources if suffix(s) in COMPILED_SUFFIXES]


def binding_units(sources: Iterable[str]) -> list[str]:
    """The binding's (`[torch]`'s) sources that compile: C++ only."""
    return [s for s in sources if suffix(s) in CXX_SUFFIXES]
