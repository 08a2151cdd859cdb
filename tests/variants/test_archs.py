"""Arch resolution: capabilities against each toolkit, ROCm archs, defaults, empty results."""

from __future__ import annotations

import pytest

from kernelnix.config.model import CudaKernel, RocmKernel
from kernelnix.core.version import Version
from kernelnix.variants.archs import EmptyArchsError, cuda_archs, metadata_archs, rocm_archs
from kernelnix.variants.matrix import load_matrix


def cuda_kernel(capabilities: list[str] | None) -> CudaKernel:
    extra = {} if capabilities is None else {"cuda-capabilities": capabilities}
    return CudaKernel.validate({"backend": "cuda", "src": ["k.cu"], "depends": [], **extra})


def rocm_kernel(archs: list[str] | None) -> RocmKernel:
    extra = {} if archs is None else {"rocm-archs": archs}
    return RocmKernel.validate({"backend": "rocm", "src": ["k.cu"], "depends": [], **extra})


CUDA_CASES = [
    # (capabilities, cuda, expected)
    (["8.0", "9.0a", "10.0f", "12.0+PTX"], "12.6", ["8.0", "9.0a"]),
    (["8.0", "9.0a", "10.0f", "12.0+PTX"], "13.0", ["8.0", "9.0a", "10.0f", "12.0+PTX"]),
    (["8.6"], "12.6", ["8.6"]),  # same major, not newer than 8.9: runs there
    (["8.9", "9.0"], "12.8", ["8.9", "9.0"]),
    (["7.0", "7.5"], "13.0", ["7.5"]),  # CUDA 13 dropped sm_70
    (["7.0", "7.5"], "12.6", ["7.0", "7.5"]),
    (["8.0+PTX"], "12.6", ["8.0+PTX"]),
    (["9.0a"], "13.0", ["9.0a"]),
    (["9.0", "9.0"], "13.0", ["9.0"]),  # duplicates dropped
    (["10.1"], "12.8", ["10.1"]),
    (["12.1"], "13.0", ["12.1"]),
    (["10.3", "12.1"], "13.0", ["10.3", "12.1"]),  # kernels #783: CUDA >= 12.9
    (["10.3", "9.0"], "12.6", ["9.0"]),  # CUDA 12.6 does not build 10.3
]


@pytest.mark.parametrize(("capabilities", "cuda", "expected"), CUDA_CASES)
def test_cuda_capabilities_intersect_with_toolkit(
    capabilities: list[str], cuda: str, expected: list[str]
) -> None:
    assert (
        cuda_archs(cuda_kernel(capabilities), Version.parse(cuda), load_matrix(), "k") == expected
    )


@pytest.mark.parametrize(
    ("cuda", "default"),
    [
        ("12.6", ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX"]),
        (
            "12.8",
            ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX"],
        ),
        (
            "13.2",
            ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1+PTX"],
        ),
    ],
)
def test_cuda_default_archs_per_toolkit(cuda: str, default: list[str]) -> None:
    assert cuda_archs(cuda_kernel(None), Version.parse(cuda), load_matrix(), "k") == default


def test_cuda_empty_intersection_names_kernel_and_toolkit() -> None:
    with pytest.raises(EmptyArchsError) as info:
        cuda_archs(cuda_kernel(["10.0", "12.0"]), Version.parse("12.6"), load_matrix(), "attention")
    message = str(info.value)
    assert "'attention'" in message and "CUDA 12.6" in message
    assert info.value.key == "kernel.attention.cuda-capabilities"
    assert "cuda-minver" in (info.value.fix or "")


def test_rocm_archs_intersect_and_default() -> None:
    matrix = load_matrix()
    kernel = rocm_kernel(["gfx940", "gfx942", "gfx90a"])
    assert rocm_archs(kernel, Version.parse("7.1"), matrix, "k") == ["gfx942", "gfx90a"]
    default = rocm_kernel(None)
    assert rocm_archs(default, Version.parse("7.1"), matrix, "k") == matrix.rocm_archs()
    with pytest.raises(EmptyArchsError, match=r"ROCm 7\.1"):
        rocm_archs(rocm_kernel(["gfx940"]), Version.parse("7.1"), matrix, "k")


def test_metadata_archs_sort_as_strings_like_upstream() -> None:
    assert metadata_archs(["9.0", "10.0", "7.5", "9.0"]) == ["10.0", "7.5", "9.0"]
