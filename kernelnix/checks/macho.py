"""A minimal Mach-O reader: deployment target, imports, dylibs and rpaths.

Thin 32/64-bit files and universal ("fat") files are understood; each slice of
a universal file is reported separately.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from kernelnix.checks.elf import Imports
from kernelnix.core.version import Version

MH_MAGIC = 0xFEEDFACE
MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC = 0xCAFEBABE
FAT_MAGIC_64 = 0xCAFEBABF

LC_REQ_DYLD = 0x80000000
LC_SYMTAB = 0x2
LC_LOAD_DYLIB = 0xC
LC_LOAD_WEAK_DYLIB = 0x18 | LC_REQ_DYLD
LC_REEXPORT_DYLIB = 0x1F | LC_REQ_DYLD
LC_RPATH = 0x1C | LC_REQ_DYLD
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32

PLATFORM_MACOS = 1
CPU_NAMES = {0x01000007: "x86_64", 0x0100000C: "aarch64", 7: "i686", 12: "arm"}

# nlist n_type bits.
N_STAB = 0xE0
N_TYPE = 0x0E
N_EXT = 0x01
N_UNDF = 0x0


class MachOError(ValueError):
    """The file is not a readable Mach-O object."""


@dataclass
class MachOInfo:
    """One (slice of a) Mach-O file."""

    bits: int
    cputype: int
    minos: Version | None = None
    platform: int | None = None
    version_min_macosx: Version | None = None  # legacy LC_VERSION_MIN_MACOSX, if any
    dylibs: list[str] = field(default_factory=list)
    rpaths: list[str] = field(default_factory=list)
    # Imported symbols, one leading underscore stripped (C names), version always None.
    undefined: dict[str, str | None] = field(default_factory=dict)

    @property
    def imports(self) -> Imports:
        return Imports(self.undefined)

    @property
    def cpu_name(self) -> str:
        return CPU_NAMES.get(self.cputype, f"cputype {self.cputype:#x}")


def is_macho(head: bytes) -> bool:
    if len(head) < 4:
        return False
    magic_le = struct.unpack("<I", head[:4])[0]
    magic_be = struct.unpack(">I", head[:4])[0]
    return magic_le in (MH_MAGIC, MH_MAGIC_64) or magic_be in (
        MH_MAGIC,
        MH_MAGIC_64,
        FAT_MAGIC,
        FAT_MAGIC_64,
    )


def read_macho(path: Path | str) -> list[MachOInfo]:
    """All slices of `path`; raises MachOError for malformed files."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        return parse_macho(data)
    except (struct.error, IndexError) as exc:
        raise MachOError(f"truncated or malformed Mach-O file ({exc})") from exc


def parse_macho(data: bytes) -> list[MachOInfo]:
    magic = struct.unpack_from(">I", data, 0)[0]
    if magic in (FAT_MAGIC, FAT_MAGIC_64):
        return [_parse_thin(data, offset) for offset in _fat_slices(data, magic)]
    return [_parse_thin(data, 0)]


def _fat_slices(data: bytes, magic: int) -> list[int]:
    count = struct.unpack_from(">I", data, 4)[0]
    if count > 64:
        raise MachOError(f"implausible universal binary with {count} slices")
    if magic == FAT_MAGIC:
        return [struct.unpack_from(">iiIII", data, 8 + 20 * i)[2] for i in range(count)]
    return [struct.unpack_from(">iiQQII", data, 8 + 32 * i)[2] for i in range(count)]


def _parse_thin(data: bytes, base: int) -> MachOInfo:
    magic_le = struct.unpack_from("<I", data, base)[0]
    if magic_le in (MH_MAGIC, MH_MAGIC_64):
        endian = "<"
    elif struct.unpack_from(">I", data, base)[0] in (MH_MAGIC, MH_MAGIC_64):
        endian = ">"
    else:
        raise MachOError("not a Mach-O file")
    magic = struct.unpack_from(endian + "I", data, base)[0]
    bits = 64 if magic == MH_MAGIC_64 else 32
    cputype, _sub, _filetype, ncmds, _sizeofcmds, _flags = struct.unpack_from(
        endian + "iiIIII", data, base + 4
    )
    info = MachOInfo(bits=bits, cputype=cputype & 0xFFFFFFFF)
    offset = base + (32 if bits == 64 else 28)
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from(endian + "II", data, offset)
        if cmdsize < 8:
            raise MachOError(f"load command with size {cmdsize}")
        _load_command(data, endian, base, offset, cmd, info)
        offset += cmdsize
    return info


def _load_command(
    data: bytes, endian: str, base: int, offset: int, cmd: int, info: MachOInfo
) -> None:
    if cmd == LC_BUILD_VERSION and info.minos is None:
        platform, minos = struct.unpack_from(endian + "II", data, offset + 8)
        info.platform = platform
        info.minos = decode_version(minos)
    elif cmd == LC_VERSION_MIN_MACOSX:
        info.version_min_macosx = decode_version(
            struct.unpack_from(endian + "I", data, offset + 8)[0]
        )
    elif cmd in (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_RPATH):
        name_offset = struct.unpack_from(endian + "I", data, offset + 8)[0]
        name = _cstr(data, offset + name_offset)
        (info.rpaths if cmd == LC_RPATH else info.dylibs).append(name)
    elif cmd == LC_SYMTAB:
        symoff, nsyms, stroff, _strsize = struct.unpack_from(endian + "IIII", data, offset + 8)
        _undefined_symbols(data, endian, base, info, symoff, nsyms, stroff)


def _undefined_symbols(
    data: bytes, endian: str, base: int, info: MachOInfo, symoff: int, nsyms: int, stroff: int
) -> None:
    fmt = endian + ("IBBHQ" if info.bits == 64 else "IBBHI")
    size = struct.calcsize(fmt)
    for index in range(nsyms):
        strx, n_type, _sect, _desc, _value = struct.unpack_from(
            fmt, data, base + symoff + index * size
        )
        if n_type & N_STAB or n_type & N_TYPE != N_UNDF or not n_type & N_EXT:
            continue
        name = _cstr(data, base + stroff + strx)
        info.undefined[name[1:] if name.startswith("_") else name] = None


def decode_version(packed: int) -> Version:
    """Mach-O xxxx.yy.zz nibbles: major in bits 16-31, minor 8-15, patch 0-7."""
    return Version((packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF))


def encode_version(version: Version) -> int:
    parts = [*version.parts, 0, 0][:3]
    return (parts[0] << 16) | (parts[1] << 8) | parts[2]


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", "replace")
