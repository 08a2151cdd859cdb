"""A small, fast ELF reader: just what the symbol and dependency rules need.

Only the ELF header, the section header table and the sections the rules look
at (.dynsym/.dynstr, .gnu.version, .gnu.version_r, .dynamic) are read, with
positioned reads, so a 500 MB library whose bulk is the CUDA fatbin costs as
much as a small one. Sections are found by type, not by name, so the
section-name table is never read.

Imports come from .dynsym, the table the dynamic loader resolves: it survives
`strip --strip-all`, and each entry's version comes from .gnu.version and
.gnu.version_r. .symtab (GNU ld writes imports there as `name@VERSION`) is only
read when a file has no .dynsym. Symbol names are materialized lazily: the
rules ask for "imports with these versions" or "imports starting with Py",
which costs a scan of the string table in C rather than a Python loop over
every symbol.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path

ELF_MAGIC = b"\x7fELF"

# Section types (elf.h).
SHT_SYMTAB = 2
SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF
_WANTED = frozenset({SHT_SYMTAB, SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERNEED, SHT_GNU_VERSYM})

# Dynamic tags.
DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29

VERSYM_INDEX = 0x7FFF  # the top bit of a .gnu.version entry is the "hidden" flag
_ZERO_TO_ONE = bytes([1] + [0] * 255)  # bytes.translate table: 0 -> 1, anything else -> 0
_PREFETCH_GAP = 64 << 10  # sections closer than this are read together
_BYTEORDER = {"<": "little", ">": "big"}
_DYNAMIC_TAGS = frozenset({DT_NULL, DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH})

# e_machine values, as variant names spell the CPU.
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


class Imports:
    """The undefined symbols of an object: name -> version string or None.

    This base class holds them in a dict (Mach-O files, .symtab fallback);
    DynsymImports materializes names from .dynsym only as far as asked.
    """

    def __init__(self, names: dict[str, str | None] | None = None) -> None:
        self._names = names if names is not None else {}

    def all(self) -> dict[str, str | None]:
        return self._names

    def with_prefix(self, prefixes: tuple[str, ...]) -> Iterator[str]:
        return (name for name in self._names if name.startswith(prefixes))

    def with_versions(self, versions: Iterable[str]) -> Iterator[tuple[str, str]]:
        wanted = set(versions)
        return ((n, v) for n, v in self._names.items() if v is not None and v in wanted)

    def versions(self) -> set[str]:
        return {v for v in self._names.values() if v is not None}

    def __len__(self) -> int:
        return len(self.all())


class DynsymImports(Imports):
    """Imports read from .dynsym, decoded only as far as a rule asks.

    The raw .dynsym, .gnu.version and string table bytes are kept; "which
    imports start with Py" and "which imports carry GLIBC_2.34" are answered
    by searching those bytes (bytes.find, in C) for the few candidates, so a
    clean library costs no per-symbol Python work at all.
    """

    def __init__(
        self,
        symbols: bytes,
        versym: bytes,
        strtab: bytes,
        versions: dict[int, str],
        *,
        endian: str,
        bits: int,
    ) -> None:
        super().__init__()
        self._symbols = symbols
        self._versym = versym
        self._strtab = strtab
        self._versions = versions
        self._endian = endian
        self._entry = 24 if bits == 64 else 16
        self._shndx_at = 6 if bits == 64 else 14
        self._name_column: array[int] | None = None  # st_name of every entry, on demand
        self._materialized = False

    def _name(self, offset: int) -> str:
        end = self._strtab.find(b"\0", offset)
        return self._strtab[offset : end if end >= 0 else None].decode("utf-8", "replace")

    def _is_undefined(self, entry: int) -> bool:
        at = entry * self._entry + self._shndx_at
        return entry > 0 and self._symbols[at : at + 2] == b"\0\0"

    def _version_of(self, entry: int) -> str | None:
        at = 2 * entry
        if at + 2 > len(self._versym):
            return None
        index = int.from_bytes(self._versym[at : at + 2], _BYTEORDER[self._endian])
        return self._versions.get(index & VERSYM_INDEX)

    def _undefined_named(self, offset: int) -> bool:
        """Whether some undefined entry has st_name == offset."""
        if self._name_column is None:
            bits = 64 if self._entry == 24 else 32
            self._name_column = name_offsets(self._symbols, self._endian, bits)
        column = self._name_column
        try:
            entry = column.index(offset)
            while not self._is_undefined(entry):
                entry = column.index(offset, entry + 1)
        except ValueError:
            return False
        return True

    def all(self) -> dict[str, str | None]:
        if not self._materialized:
            for entry in self._undefined_entries():
                offset = int.from_bytes(
                    self._symbols[entry * self._entry : entry * self._entry + 4],
                    _BYTEORDER[self._endian],
                )
                if offset:
                    self._names[self._name(offset)] = self._version_of(entry)
            self._materialized = True
        return self._names

    def _undefined_entries(self) -> list[int]:
        size, at = self._entry, self._shndx_at
        count = len(self._symbols) // size
        if count <= 1:
            return []
        # OR the two bytes of every st_shndx into one byte per symbol, in C.
        low = int.from_bytes(self._symbols[size + at : count * size : size], "little")
        high = int.from_bytes(self._symbols[size + at + 1 : count * size : size], "little")
        flags = (low | high).to_bytes(count - 1, "little").translate(_ZERO_TO_ONE)
        return list(compress(range(1, count), flags))

    def with_prefix(self, prefixes: tuple[str, ...]) -> Iterator[str]:
        if self._materialized:
            yield from super().with_prefix(prefixes)
            return
        # Every place a prefix occurs in the string table, mid-string too (the
        # linker shares string tails), is a candidate name offset. Candidates
        # are found through the prefix's last byte: a one-byte search runs at
        # memchr speed, where a two-byte one crawls through mangled names.
        seen: set[int] = set()
        strtab = self._strtab
        for prefix in prefixes:
            needle = prefix.encode()
            back = len(needle) - 1
            position = strtab.find(needle[-1:], back)
            while position != -1:
                start = position - back
                if start not in seen and strtab.startswith(needle, start):
                    seen.add(start)
                    if self._undefined_named(start):
                        yield self._name(start)
                position = strtab.find(needle[-1:], position + 1)

    def with_versions(self, versions: Iterable[str]) -> Iterator[tuple[str, str]]:
        requested = set(versions)
        indices = [i for i, v in self._versions.items() if v in requested]
        byteorder = _BYTEORDER[self._endian]
        for index in indices:
            for value in (index, index | 0x8000):  # with or without the hidden bit
                needle = value.to_bytes(2, byteorder)
                position = self._versym.find(needle)
                while position != -1:
                    entry = position // 2
                    if position % 2 == 0 and self._is_undefined(entry):
                        start = entry * self._entry
                        offset = int.from_bytes(self._symbols[start : start + 4], byteorder)
                        if offset:
                            yield self._name(offset), self._versions[index]
                    position = self._versym.find(needle, position + 1)

    def versions(self) -> set[str]:
        # Every .gnu.version_r entry exists for the imports; the symbol-version
        # rule reports requirements no symbol carries separately.
        return set(self._versions.values())

    def __len__(self) -> int:
        return len(self.all()) if self._materialized else len(self._undefined_entries())


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
    imports: Imports = field(default_factory=Imports)
    # Version string -> the library that provides it, from .gnu.version_r.
    version_libraries: dict[str, str] = field(default_factory=dict)
    has_dynsym: bool = False
    has_symtab: bool = False
    has_sections: bool = True

    @property
    def machine_name(self) -> str:
        return MACHINE_NAMES.get(self.machine, f"e_machine {self.machine}")

    @property
    def undefined(self) -> dict[str, str | None]:
        """Every import: name -> version string (`GLIBC_2.34`) or None."""
        return self.imports.all()


def is_elf(head: bytes) -> bool:
    return head[:4] == ELF_MAGIC


def read_elf(path: Path | str) -> ElfInfo:
    """Parse `path`; raises ElfError for truncated or malformed files."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_elf_fd(fd)
    finally:
        os.close(fd)


def read_elf_fd(fd: int, head: bytes = b"") -> ElfInfo:
    """Parse the ELF file open on `fd` (positioned reads only; the offset is untouched).

    `head`: the file's first bytes if the caller already read them (64 suffice).
    """
    try:
        return _Reader(fd).parse(head)
    except (struct.error, IndexError, OverflowError) as exc:
        raise ElfError(f"truncated or malformed ELF file ({exc})") from exc


class _Layout:
    """Struct formats for one ELF class and byte order, compiled once."""

    def __init__(self, endian: str, bits: int) -> None:
        wide = bits == 64
        self.endian = endian
        self.bits = bits
        self.byteorder = _BYTEORDER[endian]
        self.section = struct.Struct(endian + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
        # Only sh_type, to pick the wanted sections without unpacking every header.
        self.section_type = struct.Struct(endian + ("4xI56x" if wide else "4xI32x"))
        self.dynamic = struct.Struct(endian + ("qQ" if wide else "iI"))
        self.verneed = struct.Struct(endian + "HHIII")
        self.vernaux = struct.Struct(endian + "IHHII")
        self.half = struct.Struct(endian + "H")
        self.word = struct.Struct(endian + "I")
        self.long = struct.Struct(endian + ("Q" if wide else "I"))


_LAYOUTS = {(e, b): _Layout(e, b) for e in "<>" for b in (32, 64)}


class _Reader:
    """Positioned reads of one file. Section headers are raw tuples:
    (name, type, flags, addr, offset, size, link, info, align, entsize)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.headers: dict[int, tuple[int, ...]] = {}  # by section index
        self.table = b""
        self.types: list[int] = []
        self.layout = _LAYOUTS["<", 64]
        self.blocks: list[tuple[int, bytes]] = []  # prefetched (file offset, data)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0:
            raise ElfError("negative section offset or size")
        data = os.pread(self.fd, size, offset)
        if len(data) != size:
            raise ElfError("a section runs past the end of the file")
        return data

    def locate(self, header: tuple[int, ...]) -> tuple[bytes, int]:
        """(buffer, start): the section's bytes are buffer[start:start + size].

        Served from the prefetched blocks without copying when possible.
        """
        offset, size = header[4], header[5]
        for start, block in self.blocks:
            if start <= offset and offset + size <= start + len(block):
                return block, offset - start
        return self.read(offset, size), 0

    def section(self, header: tuple[int, ...]) -> bytes:
        data, start = self.locate(header)
        return data if start == 0 and len(data) == header[5] else data[start : start + header[5]]

    def header(self, index: int) -> tuple[int, ...]:
        cached = self.headers.get(index)
        if cached is None:
            size = self.layout.section.size
            if not 0 <= index < len(self.table) // size:
                raise ElfError(f"section index {index} out of range")
            cached = self.headers[index] = self.layout.section.unpack_from(self.table, index * size)
        return cached

    def prefetch(self, sections: list[tuple[int, ...]]) -> None:
        """Read the wanted sections (and their string tables) in as few reads as
        possible: linkers put them next to each other at the start of the file,
        far from the bulk (code, fatbins), which is never read."""
        ranges = []
        for header in sections:
            linked = self.header(header[6])
            ranges += [(header[4], header[4] + header[5]), (linked[4], linked[4] + linked[5])]
        low = min(start for start, _ in ranges)
        high = max(end for _, end in ranges)
        if high - low <= sum(end - start for start, end in ranges) + _PREFETCH_GAP:
            self.blocks = [(low, self.read(low, high - low))]  # the usual layout: one read
            return
        ranges.sort()
        merged = [list(ranges[0])]
        for start, end in ranges[1:]:
            if start - merged[-1][1] <= _PREFETCH_GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.blocks = [(start, self.read(start, end - start)) for start, end in merged]

    def parse(self, head: bytes = b"") -> ElfInfo:
        ident = head[:64] if len(head) >= 64 else os.pread(self.fd, 64, 0)
        if len(ident) < 52 or ident[:4] != ELF_MAGIC:
            raise ElfError("not an ELF file")
        ei_class, ei_data = ident[4], ident[5]
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            raise ElfError(f"unknown ELF class/encoding {ei_class}/{ei_data}")
        layout = self.layout = _LAYOUTS["<" if ei_data == 1 else ">", 64 if ei_class == 2 else 32]
        machine = layout.half.unpack_from(ident, 18)[0]
        info = ElfInfo(bits=layout.bits, little_endian=layout.endian == "<", machine=machine)
        wanted = self.wanted_sections(ident)
        if wanted is None:
            info.has_sections = False
            return info
        # .symtab is only read when there is no .dynsym (see the module docstring).
        if SHT_DYNSYM in wanted:
            wanted.pop(SHT_SYMTAB, None)
            info.has_symtab = SHT_SYMTAB in self.types
        self.prefetch(list(wanted.values()))
        if SHT_DYNAMIC in wanted:
            self.dynamic(wanted[SHT_DYNAMIC], info)
        versions: dict[int, str] = {}
        if SHT_GNU_VERNEED in wanted:
            versions = self.version_needs(wanted[SHT_GNU_VERNEED], info)
        if SHT_DYNSYM in wanted:
            info.has_dynsym = True
            info.imports = self.dynsym(wanted[SHT_DYNSYM], wanted.get(SHT_GNU_VERSYM), versions)
        elif SHT_SYMTAB in wanted:
            info.has_symtab = True
            info.imports = self.symtab(wanted[SHT_SYMTAB])
        return info

    def wanted_sections(self, ident: bytes) -> dict[int, tuple[int, ...]] | None:
        """The first section of each wanted type; None when there is no section table."""
        layout = self.layout
        if layout.bits == 64:
            shoff = layout.long.unpack_from(ident, 40)[0]
            shentsize, shnum = struct.unpack_from(layout.endian + "HH", ident, 58)
        else:
            shoff = layout.long.unpack_from(ident, 32)[0]
            shentsize, shnum = struct.unpack_from(layout.endian + "HH", ident, 46)
        if shoff == 0:
            return None
        if shentsize != layout.section.size:
            raise ElfError(f"unexpected section header size {shentsize}")
        if shnum == 0:
            # More than 0xff00 sections: the real count lives in section 0's sh_size.
            shnum = layout.section.unpack(self.read(shoff, shentsize))[5]
        self.table = self.read(shoff, shnum * shentsize)
        self.types = [t for (t,) in layout.section_type.iter_unpack(self.table)]
        wanted: dict[int, tuple[int, ...]] = {}
        for kind in _WANTED:
            if kind in self.types:
                wanted[kind] = self.header(self.types.index(kind))
        return wanted

    def dynamic(self, header: tuple[int, ...], info: ElfInfo) -> None:
        strtab, base = self.locate(self.header(header[6]))
        data, start = self.locate(header)
        entry = self.layout.dynamic
        end = start + header[5] // entry.size * entry.size
        for tag, value in entry.iter_unpack(data[start:end]):
            if tag not in _DYNAMIC_TAGS:
                continue
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                info.needed.append(_cstr(strtab, base + value))
            elif tag == DT_RUNPATH:
                info.runpath.extend(p for p in _cstr(strtab, base + value).split(":") if p)
            elif tag == DT_RPATH:
                info.rpath.extend(p for p in _cstr(strtab, base + value).split(":") if p)
            elif tag == DT_SONAME:
                info.soname = _cstr(strtab, base + value)

    def version_needs(self, header: tuple[int, ...], info: ElfInfo) -> dict[int, str]:
        """Map version index -> version string, from .gnu.version_r."""
        strtab, base = self.locate(self.header(header[6]))
        raw, offset = self.locate(header)
        end = offset + header[5]
        verneed, vernaux = self.layout.verneed, self.layout.vernaux
        result: dict[int, str] = {}
        libraries = info.version_libraries
        # sh_info is the number of Verneed records; the chain is walked by vn_next.
        for _ in range(header[7]):
            if offset + verneed.size > end:
                raise ElfError("truncated .gnu.version_r")
            _vn_version, vn_cnt, vn_file, vn_aux, vn_next = verneed.unpack_from(raw, offset)
            library = _cstr(strtab, base + vn_file)
            aux = offset + vn_aux
            for _ in range(vn_cnt):
                if aux + vernaux.size > end:
                    raise ElfError("truncated .gnu.version_r")
                _hash, _flags, other, vna_name, vna_next = vernaux.unpack_from(raw, aux)
                version = _cstr(strtab, base + vna_name)
                result[other & VERSYM_INDEX] = version
                if version not in libraries:
                    libraries[version] = library
                if vna_next == 0:
                    break
                aux += vna_next
            if vn_next == 0:
                break
            offset += vn_next
        return result

    def undefined_flags(self, raw: bytes, first: int = 1) -> tuple[int, bytes]:
        """(first, flags): flags[k] is 1 when symbol first+k has st_shndx SHN_UNDEF (0).

        Computed with slicing, int arithmetic and bytes.translate, all in C; the
        callers pick values out with itertools.compress, also in C.
        """
        size, at = (24, 6) if self.layout.bits == 64 else (16, 14)
        count = len(raw) // size
        first = max(1, min(first, count))
        if count <= first:
            return first, b""
        begin, end = first * size, count * size
        # OR the two bytes of every st_shndx into one byte per symbol.
        low = int.from_bytes(raw[begin + at : end : size], "little")
        high = int.from_bytes(raw[begin + at + 1 : end : size], "little")
        mask = (low | high).to_bytes(count - first, "little")
        return first, mask.translate(_ZERO_TO_ONE)

    def name_offsets(self, raw: bytes) -> array[int]:
        """st_name of every symbol entry, as one array."""
        return name_offsets(raw, self.layout.endian, self.layout.bits)

    def dynsym(
        self, header: tuple[int, ...], versym: tuple[int, ...] | None, versions: dict[int, str]
    ) -> DynsymImports:
        strtab_header = self.header(header[6])
        return DynsymImports(
            self.section(header),
            self.section(versym) if versym is not None else b"",
            self.section(strtab_header),
            versions,
            endian=self.layout.endian,
            bits=self.layout.bits,
        )

    def symtab(self, header: tuple[int, ...]) -> Imports:
        """Imports from .symtab (no .dynsym); GNU ld writes them as `name@VERSION`."""
        strtab = self.section(self.header(header[6]))
        raw = self.section(header)
        # Local symbols come first (sh_info = index of the first global one)
        # and are never imports, so start after them.
        first, flags = self.undefined_flags(raw, first=header[7])
        imports: dict[str, str | None] = {}
        for offset in compress(self.name_offsets(raw)[first:], flags):
            if offset:
                name, _, version = _cstr(strtab, offset).partition("@")
                imports[name] = version.lstrip("@") or imports.get(name)
        return Imports(imports)


def name_offsets(raw: bytes, endian: str, bits: int) -> array[int]:
    """st_name of every symbol entry of a symbol table, as one array."""
    words = array("I")
    words.frombytes(raw[: len(raw) - len(raw) % 4])
    if (endian == "<") != (sys.byteorder == "little"):
        words.byteswap()
    return words[:: 6 if bits == 64 else 4]


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else None].decode("utf-8", "replace")
