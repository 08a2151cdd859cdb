"""kernelnix.compile.gpu_archs on synthetic fat binaries (the real ones: test_build_cuda)."""

from __future__ import annotations

import struct

import pytest

from kernelnix.compile.gpu_archs import FATBIN_MAGIC, ArchsUnknown, cuda_archs, rocm_archs

ELF, PTX = 2, 1
ARCH_SPECIFIC, FAMILY = 0x100000, 0x200000


def entry(kind: int, sm: int, flags: int = 0, payload: bytes = b"code") -> bytes:
    header = struct.pack("<HHIQ", kind, 0x101, 64, len(payload))
    header += struct.pack("<IIHHI", 0, 0, 8, 1, sm) + struct.pack("<IIQ", 0, 0, flags | 0x11)
    return header.ljust(64, b"\0") + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    blob = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body
    return blob.ljust((len(blob) + 7) // 8 * 8, b"\0")


def test_entries_are_spelled_like_build_toml_capabilities() -> None:
    section = fatbin(entry(ELF, 75), entry(ELF, 90, ARCH_SPECIFIC), entry(ELF, 100, FAMILY))
    section += fatbin(entry(ELF, 121), entry(PTX, 121), entry(PTX, 80))
    assert cuda_archs(section) == ["10.0f", "12.1+PTX", "7.5", "8.0+PTX", "9.0a"]


def test_no_fatbin_means_no_archs() -> None:
    assert cuda_archs(b"") == []


def test_hip_offload_bundle_targets() -> None:
    bundle = b"__CLANG_OFFLOAD_BUNDLE__" + b"\0" * 8
    bundle += b"host-x86_64-unknown-linux-gnu-\0hipv4-amdgcn-amd-amdhsa--gfx90a\0"
    bundle += b"hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-\0"
    assert rocm_archs(bundle) == ["gfx90a", "gfx942:sramecc+:xnack-"]
    with pytest.raises(ArchsUnknown):
        rocm_archs(b"CCOB compressed")
