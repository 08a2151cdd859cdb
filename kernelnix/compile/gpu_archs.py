"""The GPU architectures a built library really contains.

CUDA: the `.nv_fatbin` section holds one fatbin per object file; each entry
header says its kind (ELF or PTX), its SM number and flags (`a` arch-specific,
`f` family). Entries are reported the way build.toml writes capabilities:
`9.0a`, `10.0f`, `12.1+PTX`. ROCm: the `.hip_fatbin` section holds clang
offload bundles whose entry ids end in the gfx target.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
_KIND_PTX = 1
_KIND_ELF = 2
_FLAG_ARCH_SPECIFIC = 0x100000
_FLAG_FAMILY = 0x200000
_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_GFX = re.compile(rb"amdgcn-amd-amdhsa--(gfx[0-9a-z]+(?::[a-z+-:]+)?)")


class ArchsUnknown(ValueError):
    """The library's device code cannot be listed (e.g. compressed bundles)."""


def elf_section(path: Path, name: str) -> bytes | None:
    """The bytes of section `name` of a 64-bit little-endian ELF file, or None."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]
    for sh_name, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", names_offset + sh_name)
        if data[names_offset + sh_name : end].decode() == name:
            return data[offset : offset + size]
    return None


def _aligned(offset: int) -> int:
    """The next 8-byte boundary: fatbins are 8-byte aligned in the section."""
    return (offset + 7) // 8 * 8


def _fatbin_entries(section: bytes) -> list[tuple[int, int, int]]:
    """(kind, sm, flags) of every entry of every fatbin in a `.nv_fatbin` section."""
    entries = []
    offset = 0
    while offset + 16 <= len(section):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", section, offset)
        if magic != FATBIN_MAGIC:
            offset = _aligned(offset + 1)
            continue
        entry, end = offset + header_size, offset + header_size + size
        while entry < end:
            kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", section, entry)
            (sm,) = struct.unpack_from("<I", section, entry + 28)
            (flags,) = struct.unpack_from("<Q", section, entry + 40)
            entries.append((kind, sm, flags))
            entry += entry_header + entry_size
        offset = _aligned(end)
    return entries


def cuda_archs(section: bytes) -> list[str]:
    """Capabilities of a `.nv_fatbin` section, sorted as metadata.json sorts them."""
    elf: set[str] = set()
    ptx: set[str] = set()
    for kind, sm, flags in _fatbin_entries(section):
        suffix = "a" if flags & _FLAG_ARCH_SPECIFIC else "f" if flags & _FLAG_FAMILY else ""
        name = f"{sm // 10}.{sm % 10}{suffix}"
        if kind == _KIND_ELF:
            elf.add(name)
        elif kind == _KIND_PTX:
            ptx.add(name)
    archs = {name + ("+PTX" if name in ptx else "") for name in elf}
    archs |= {f"{name}+PTX" for name in ptx - elf}
    return sorted(archs)


def rocm_archs(section: bytes) -> list[str]:
    """gfx targets of a `.hip_fatbin` section (uncompressed offload bundles)."""
    if _BUNDLE_MAGIC not in section:
        raise ArchsUnknown("the HIP fat binary is compressed; its targets are not listed")
    return sorted({m.decode() for m in _GFX.findall(section)})


def compiled_archs(library: Path, backend: str) -> list[str] | None:
    """The device archs in `library`, or None for backends without arch lists."""
    if backend == "cuda":
        return cuda_archs(elf_section(library, ".nv_fatbin") or b"")
    if backend == "rocm":
        return rocm_archs(elf_section(library, ".hip_fatbin") or b"")
    return None
