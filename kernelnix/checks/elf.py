"""A small, fast ELF reader: just what the symbol and dependency rules need.

The file is memory-mapped and only the ELF header, the section header table and
the sections the rules look at (.dynsym/.dynstr, .gnu.version, .gnu.version_r,
.dynamic, .symtab/.strtab) are touched, so a 500 MB library whose bulk is the
CUDA fatbin costs about as much as a small one. Sections are found by type, not
by name, so the section-name string table is never read.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

ELF_MAGIC = b"\x7fELF"

# Section types (elf.h).
SHT_SYMTAB = 2
SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF

# Dynamic tags.
DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29

SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000

# e_machine values we name in messages; others print as a number.
MACHINE_NAMES = {
    3: "i686",
    20: "ppc",
    21: "ppc64",
    22: "s390x",
    40: "arm",
    62: "x86_64",
    183: "aarch64",
    243: "riscv64",
}


class ElfError(ValueError):
    """The file is not a readable ELF object."""


@dataclass(frozen=True)
class UndefinedSymbol:
    """A symbol the object imports, with the version it asks for (if any).

    `version` is the full version string (`GLIBC_2.34`); `library` is the file
    the version requirement names (`libc.so.6`) when it came from
    `.gnu.version_r`.
    """

    name: str
    version: str | None = None
    library: str | None = None


@dataclass
class ElfInfo:
    """What the rules need to know about one ELF object."""

    bits: int
    little_endian: bool
    machine: int
    needed: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    soname: str | None = None
    # Union of .dynsym and .symtab; keyed by name, first version seen wins.
    undefined: dict[str, UndefinedSymbol] = field(default_factory=dict)
    # Version requirements from .gnu.version_r: (library, version string).
    version_needs: list[tuple[str, str]] = field(default_factory=list)
    has_dynsym: bool = False
    has_symtab: bool = False
    has_sections: bool = True

    @property
    def machine_name(self) -> str:
        return MACHINE_NAMES.get(self.machine, f"e_machine {self.machine}")


@dataclass(frozen=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: Path) -> ElfInfo:
    """Parse `path`; raises ElfError for truncated or malformed files."""
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size < 64:
            raise ElfError("file too small to be an ELF object")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                return _parse(data)
            except (struct.error, IndexError) as exc:
                raise ElfError(f"truncated or malformed ELF file ({exc})") from exc


def _parse(data: mmap.mmap) -> ElfInfo:
    if data[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ElfError(f"unknown ELF class/encoding {ei_class}/{ei_data}")
    bits = 64 if ei_class == 2 else 32
    endian = "<" if ei_data == 1 else ">"
    machine = struct.unpack_from(endian + "H", data, 18)[0]
    info = ElfInfo(bits=bits, little_endian=endian == "<", machine=machine)
    sections = _section_headers(data, endian, bits)
    if not sections:
        info.has_sections = False
        return info
    by_type: dict[int, _Section] = {}
    for section in sections:
        by_type.setdefault(section.type, section)
    dynamic = by_type.get(SHT_DYNAMIC)
    if dynamic is not None:
        _read_dynamic(data, endian, bits, dynamic, sections, info)
    versions = _version_needs(data, endian, by_type.get(SHT_GNU_VERNEED), sections, info)
    dynsym = by_type.get(SHT_DYNSYM)
    if dynsym is not None:
        info.has_dynsym = True
        _read_dynsym(
            data, endian, bits, dynsym, sections, by_type.get(SHT_GNU_VERSYM), versions, info
        )
    symtab = by_type.get(SHT_SYMTAB)
    if symtab is not None:
        info.has_symtab = True
        _read_symtab(data, endian, bits, symtab, sections, info)
    return info


def _section_headers(data: mmap.mmap, endian: str, bits: int) -> list[_Section]:
    if bits == 64:
        shoff = struct.unpack_from(endian + "Q", data, 40)[0]
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 58)
        fmt = endian + "IIQQQQIIQQ"
    else:
        shoff = struct.unpack_from(endian + "I", data, 32)[0]
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 46)
        fmt = endian + "IIIIIIIIII"
    if shoff == 0:
        return []
    if shnum == 0:
        # More than 0xff00 sections: the real count lives in section 0's sh_size.
        shnum = struct.unpack_from(fmt, data, shoff)[5]
    if shentsize != struct.calcsize(fmt):
        raise ElfError(f"unexpected section header size {shentsize}")
    table = data[shoff : shoff + shnum * shentsize]
    if len(table) != shnum * shentsize:
        raise ElfError("section header table runs past the end of the file")
    return [
        _Section(type=t, offset=off, size=sz, link=link, info=inf, entsize=ent)
        for (_name, t, _flags, _addr, off, sz, link, inf, _align, ent) in struct.iter_unpack(
            fmt, table
        )
    ]


def _blob(data: mmap.mmap, section: _Section) -> bytes:
    blob = data[section.offset : section.offset + section.size]
    if len(blob) != section.size:
        raise ElfError("section runs past the end of the file")
    return blob


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if end < 0:
        end = len(table)
    return table[offset:end].decode("utf-8", "replace")


def _read_dynamic(
    data: mmap.mmap,
    endian: str,
    bits: int,
    dynamic: _Section,
    sections: list[_Section],
    info: ElfInfo,
) -> None:
    strtab = _blob(data, sections[dynamic.link])
    fmt = endian + ("qQ" if bits == 64 else "iI")
    raw = _blob(data, dynamic)
    raw = raw[: len(raw) - len(raw) % struct.calcsize(fmt)]
    for tag, value in struct.iter_unpack(fmt, raw):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            info.needed.append(_cstr(strtab, value))
        elif tag == DT_RUNPATH:
            info.runpath.extend(p for p in _cstr(strtab, value).split(":") if p)
        elif tag == DT_RPATH:
            info.rpath.extend(p for p in _cstr(strtab, value).split(":") if p)
        elif tag == DT_SONAME:
            info.soname = _cstr(strtab, value)


def _version_needs(
    data: mmap.mmap,
    endian: str,
    verneed: _Section | None,
    sections: list[_Section],
    info: ElfInfo,
) -> dict[int, tuple[str, str]]:
    """Map version index -> (library, version string) from .gnu.version_r."""
    if verneed is None:
        return {}
    strtab = _blob(data, sections[verneed.link])
    raw = _blob(data, verneed)
    result: dict[int, tuple[str, str]] = {}
    offset = 0
    # sh_info is the number of Verneed records; the chain is walked by vn_next.
    for _ in range(verneed.info):
        _vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from(
            endian + "HHIII", raw, offset
        )
        library = _cstr(strtab, vn_file)
        aux = offset + vn_aux
        for _ in range(vn_cnt):
            _hash, _flags, other, vna_name, vna_next = struct.unpack_from(
                endian + "IHHII", raw, aux
            )
            version = _cstr(strtab, vna_name)
            result[other & ~VERSYM_HIDDEN] = (library, version)
            info.version_needs.append((library, version))
            if vna_next == 0:
                break
            aux += vna_next
        if vn_next == 0:
            break
        offset += vn_next
    return result


def _symbol_format(endian: str, bits: int) -> tuple[str, int, int]:
    """struct format plus the field positions of st_name and st_shndx."""
    if bits == 64:
        return endian + "IBBHQQ", 0, 3
    return endian + "IIIBBH", 0, 5


def _read_dynsym(
    data: mmap.mmap,
    endian: str,
    bits: int,
    dynsym: _Section,
    sections: list[_Section],
    versym: _Section | None,
    versions: dict[int, tuple[str, str]],
    info: ElfInfo,
) -> None:
    strtab = _blob(data, sections[dynsym.link])
    fmt, name_at, shndx_at = _symbol_format(endian, bits)
    raw = _blob(data, dynsym)
    raw = raw[: len(raw) - len(raw) % struct.calcsize(fmt)]
    indices: tuple[int, ...] = ()
    if versym is not None:
        vraw = _blob(data, versym)
        indices = struct.unpack(f"{endian}{len(vraw) // 2}H", vraw[: len(vraw) // 2 * 2])
    undefined = info.undefined
    for index, entry in enumerate(struct.iter_unpack(fmt, raw)):
        if entry[shndx_at] != SHN_UNDEF or entry[name_at] == 0:
            continue
        name = _cstr(strtab, entry[name_at])
        need = versions.get(indices[index] & ~VERSYM_HIDDEN) if index < len(indices) else None
        if need is None:
            undefined.setdefault(name, UndefinedSymbol(name))
        else:
            undefined[name] = UndefinedSymbol(name, need[1], need[0])


def _read_symtab(
    data: mmap.mmap,
    endian: str,
    bits: int,
    symtab: _Section,
    sections: list[_Section],
    info: ElfInfo,
) -> None:
    """Undefined symbols of .symtab; GNU ld writes them as `name@VERSION`."""
    strtab = _blob(data, sections[symtab.link])
    fmt, name_at, shndx_at = _symbol_format(endian, bits)
    size = struct.calcsize(fmt)
    # Local symbols come first (sh_info = index of the first global one) and
    # are never undefined imports, so skip them without unpacking.
    start = min(symtab.info, symtab.size // size) * size
    raw = data[symtab.offset + start : symtab.offset + symtab.size]
    raw = raw[: len(raw) - len(raw) % size]
    undefined = info.undefined
    for entry in struct.iter_unpack(fmt, raw):
        if entry[shndx_at] != SHN_UNDEF or entry[name_at] == 0:
            continue
        text = _cstr(strtab, entry[name_at])
        name, _, version = text.partition("@")
        known = undefined.get(name)
        if known is None or (known.version is None and version):
            undefined[name] = UndefinedSymbol(name, version.lstrip("@") or None)
