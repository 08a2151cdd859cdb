"""A small, fast ELF reader: just what the symbol and dependency rules need.

Only the ELF header, the section header table and the sections the rules look
at (.dynsym/.dynstr, .gnu.version, .gnu.version_r, .dynamic) are read, with
positioned reads, so a 500 MB library whose bulk is the CUDA fatbin costs as
much as a small one. Sections are found by type, not by name, so the
section-name table is never read by the rules; `read_sections` reads it, for
those who compare files section by section (`kernelnix reproduce`).

Imports come from .dynsym, the table the dynamic loader resolves: it survives
`strip --strip-all`, and each entry's version comes from .gnu.version and
.gnu.version_r. .symtab (GNU ld writes imports there as `name@VERSION`) is only
read when a file has no .dynsym. Symbol names are materialized lazily: the
rules ask for "imports with these versions" or "imports starting with Py",
which costs a scan of the string table in C rather than a Python loop over
every symbol.

Checking many small libraries costs what Python's per-file work costs, so
that work is kept small: three or four reads (the first page, the section
table, the sections beyond the first page), every sh_type in one struct call,
and the dynamic-linking data (DT_NEEDED, search paths, the library of each
version) decoded only when a rule asks for it.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from itertools import compress
from pathlib import Path
from typing import Literal

ELF_MAGIC = b"\x7fELF"

# Section types (elf.h).
SHT_SYMTAB = 2
SHT_DYNAMIC = 6
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF

# Dynamic tags.
DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29

SHN_XINDEX = 0xFFFF  # e_shstrndx: the real index is in section 0's sh_link
VERSYM_INDEX = 0x7FFF  # the top bit of a .gnu.version entry is the "hidden" flag
_ZERO_TO_ONE = bytes([1] + [0] * 255)  # bytes.translate table: 0 -> 1, anything else -> 0
_BYTEORDER: dict[str, Literal["little", "big"]] = {"<": "little", ">": "big"}
# The first read: the ELF header, the program headers and, in small libraries,
# the dynamic-linking sections (linkers put them right after the headers).
HEAD_BYTES = 4096
# Sections closer than this are read together: one read costs as much as
# copying ~16 KB more.
_READ_GAP = 16 << 10

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

    __slots__ = ("_names", "_required")

    def __init__(
        self, names: dict[str, str | None] | None = None, required: Iterable[str] = ()
    ) -> None:
        """`required`: versions the object needs besides its symbols' (.gnu.version_r)."""
        self._names = names if names is not None else {}
        self._required = frozenset(required)

    def all(self) -> dict[str, str | None]:
        return self._names

    def with_prefix(self, prefixes: tuple[str, ...]) -> list[str]:
        return [name for name in self._names if name.startswith(prefixes)]

    def with_versions(self, versions: Iterable[str]) -> Iterator[tuple[str, str]]:
        wanted = set(versions)
        return ((n, v) for n, v in self._names.items() if v is not None and v in wanted)

    def versions(self) -> set[str]:
        return {v for v in self._names.values() if v is not None}.union(self._required)

    def exports(self, names: Iterable[str]) -> list[str]:
        """Those of `names` the object defines and exports; this base class knows none."""
        return []

    def __len__(self) -> int:
        return len(self.all())


class DynsymImports(Imports):
    """Imports read from .dynsym, decoded only as far as a rule asks.

    The raw .dynsym, .gnu.version and string table bytes are kept; "which
    imports start with Py" and "which imports carry GLIBC_2.34" are answered
    by searching those bytes (bytes.find, in C) for the few candidates, so a
    clean library costs no per-symbol Python work at all.
    """

    __slots__ = (
        "_bits",
        "_endian",
        "_entry",
        "_materialized",
        "_name_column",
        "_strtab",
        "_symbols",
        "_versions",
        "_versym",
    )

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
        self._names: dict[str, str | None] = {}
        self._symbols = symbols
        self._versym = versym
        self._strtab = strtab
        self._versions = versions
        self._endian = endian
        self._bits = bits
        self._entry = 24 if bits == 64 else 16
        self._name_column: array[int] | None = None  # st_name of every entry, on demand
        self._materialized = False

    def _is_undefined(self, entry: int) -> bool:
        at = entry * self._entry + (6 if self._bits == 64 else 14)  # st_shndx
        return entry > 0 and self._symbols[at : at + 2] == b"\0\0"

    def _version_of(self, entry: int) -> str | None:
        at = 2 * entry
        if at + 2 > len(self._versym):
            return None
        index = int.from_bytes(self._versym[at : at + 2], _BYTEORDER[self._endian])
        return self._versions.get(index & VERSYM_INDEX)

    def _name_at(self, entry: int) -> str | None:
        start = entry * self._entry
        offset = int.from_bytes(self._symbols[start : start + 4], _BYTEORDER[self._endian])
        return _cstr(self._strtab, offset) if offset else None

    def _undefined_named(self, offset: int) -> bool:
        """Whether some undefined entry has st_name == offset."""
        return self._entry_named(offset, undefined=True)

    def _entry_named(self, offset: int, *, undefined: bool) -> bool:
        """Whether some entry with st_name == offset is undefined (or defined)."""
        if self._name_column is None:
            self._name_column = name_offsets(self._symbols, self._endian, self._bits)
        column = self._name_column
        try:
            entry = column.index(offset)
            while self._is_undefined(entry) != undefined:
                entry = column.index(offset, entry + 1)
        except ValueError:
            return False
        return True

    def exports(self, names: Iterable[str]) -> list[str]:
        # .dynsym holds only what the object exports or imports, so a defined
        # entry is an export (hidden symbols never reach it).
        found = []
        for name in names:
            # The linker shares string tails: the name may end a longer one.
            needle = name.encode() + b"\0"
            position = self._strtab.find(needle)
            while position != -1:
                if self._entry_named(position, undefined=False):
                    found.append(name)
                    break
                position = self._strtab.find(needle, position + 1)
        return found

    def all(self) -> dict[str, str | None]:
        if not self._materialized:
            first, flags = undefined_flags(self._symbols, self._bits)
            for entry in compress(range(first, first + len(flags)), flags):
                name = self._name_at(entry)
                if name is not None:
                    self._names[name] = self._version_of(entry)
            self._materialized = True
        return self._names

    def with_prefix(self, prefixes: tuple[str, ...]) -> list[str]:
        if self._materialized:
            return super().with_prefix(prefixes)
        # Every place a prefix occurs in the string table, mid-string too (the
        # linker shares string tails), is a candidate name offset. Candidates
        # are found through the prefixes' last byte: a one-byte search runs at
        # memchr speed, where a two-byte one crawls through mangled names.
        strtab = self._strtab
        found = []
        for last, before, needles in _prefix_groups(prefixes):
            position = strtab.find(last)
            while position != -1:
                if before < 0 or strtab[position - 1] == before:
                    for needle, back in needles:
                        start = position - back
                        if (
                            start >= 0
                            and strtab.startswith(needle, start)
                            and self._undefined_named(start)
                        ):
                            found.append(_cstr(strtab, start))
                position = strtab.find(last, position + 1)
        return found

    def with_versions(self, versions: Iterable[str]) -> Iterator[tuple[str, str]]:
        requested = set(versions)
        byteorder = _BYTEORDER[self._endian]
        for index, version in self._versions.items():
            if version not in requested:
                continue
            for value in (index, index | 0x8000):  # with or without the hidden bit
                needle = value.to_bytes(2, byteorder)
                position = self._versym.find(needle)
                while position != -1:
                    entry = position // 2
                    if position % 2 == 0 and self._is_undefined(entry):
                        name = self._name_at(entry)
                        if name is not None:
                            yield name, version
                    position = self._versym.find(needle, position + 1)

    def versions(self) -> set[str]:
        # Every .gnu.version_r entry exists for the imports; the symbol-version
        # rule reports requirements no symbol carries separately.
        return set(self._versions.values())

    def __len__(self) -> int:
        if self._materialized:
            return len(self._names)
        return sum(undefined_flags(self._symbols, self._bits)[1])


@cache
def _prefix_groups(prefixes: tuple[str, ...]) -> list[tuple[bytes, int, list[tuple[bytes, int]]]]:
    """Prefixes grouped by their last two bytes, for DynsymImports.with_prefix:
    [(last byte, the byte before it or -1, [(encoded prefix, its length - 1)])]."""
    groups: dict[bytes, list[tuple[bytes, int]]] = {}
    for prefix in dict.fromkeys(prefixes):
        needle = prefix.encode()
        groups.setdefault(needle[-2:], []).append((needle, len(needle) - 1))
    return [(tail[-1:], tail[0] if len(tail) == 2 else -1, group) for tail, group in groups.items()]


class ElfInfo:
    """What the rules need to know about one ELF object.

    The dynamic-linking data (DT_NEEDED, the search paths and DT_SONAME from
    .dynamic; the library that provides each version, from .gnu.version_r) is
    decoded on first use: the symbol rules never pay for it.
    """

    __slots__ = (
        "_dynamic",
        "_linking",
        "_types",
        "_version_files",
        "_version_libraries",
        "bits",
        "has_dynsym",
        "has_sections",
        "imports",
        "little_endian",
        "machine",
    )

    def __init__(
        self,
        bits: int,
        little_endian: bool,
        machine: int,
        imports: Imports | None = None,
        *,
        section_types: tuple[int, ...] = (),
        dynamic: tuple[bytes, bytes, struct.Struct] | None = None,
        version_files: tuple[dict[str, int], bytes] | None = None,
        has_sections: bool = True,
    ) -> None:
        """`dynamic`: (.dynamic, its string table, the entry format); `version_files`:
        (version -> string-table offset of its library's name, the string table)."""
        self.bits = bits
        self.little_endian = little_endian
        self.machine = machine
        self.imports = imports if imports is not None else Imports()
        self.has_dynsym = SHT_DYNSYM in section_types
        self.has_sections = has_sections
        self._types = section_types
        self._dynamic = dynamic
        self._version_files = version_files
        self._linking: tuple[list[str], list[str], list[str], str | None] | None = None
        self._version_libraries: dict[str, str] | None = None

    @property
    def has_symtab(self) -> bool:
        return SHT_SYMTAB in self._types

    @property
    def machine_name(self) -> str:
        return MACHINE_NAMES.get(self.machine, f"e_machine {self.machine}")

    @property
    def undefined(self) -> dict[str, str | None]:
        """Every import: name -> version string (`GLIBC_2.34`) or None."""
        return self.imports.all()

    @property
    def needed(self) -> list[str]:
        return (self._linking or self._decode_dynamic())[0]

    @property
    def rpath(self) -> list[str]:
        return (self._linking or self._decode_dynamic())[1]

    @property
    def runpath(self) -> list[str]:
        return (self._linking or self._decode_dynamic())[2]

    @property
    def soname(self) -> str | None:
        return (self._linking or self._decode_dynamic())[3]

    @property
    def version_libraries(self) -> dict[str, str]:
        """Version string -> the library that provides it, from .gnu.version_r."""
        if self._version_libraries is None:
            files, strtab = self._version_files or ({}, b"")
            self._version_libraries = {v: _cstr(strtab, at) for v, at in files.items()}
        return self._version_libraries

    def _decode_dynamic(self) -> tuple[list[str], list[str], list[str], str | None]:
        self._linking = _dynamic(*self._dynamic) if self._dynamic else ([], [], [], None)
        return self._linking


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

    `head`: the file's first bytes if the caller already read them (at least
    64; sections that lie within them are not read again).
    """
    with _malformed_as_elf_error():
        return _parse(fd, head if len(head) >= 64 else os.pread(fd, HEAD_BYTES, 0))


@dataclass(frozen=True)
class Section:
    """One section header: its name and type, and where its bytes lie in the file."""

    name: str
    type: int
    offset: int
    size: int  # bytes in the file: 0 for SHT_NOBITS (.bss), which takes none


def read_sections(path: Path | str) -> list[Section]:
    """Every section of `path`, in header order, named from the section-name
    table; ElfError for a file that is not ELF or is malformed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with _malformed_as_elf_error():
            return _sections(fd, os.pread(fd, HEAD_BYTES, 0))
    finally:
        os.close(fd)


@contextmanager
def _malformed_as_elf_error() -> Iterator[None]:
    try:
        yield
    except (struct.error, IndexError, OverflowError, MemoryError) as exc:
        # MemoryError: a corrupt section size asked for a read of exabytes.
        raise ElfError(
            f"truncated or malformed ELF file ({str(exc) or type(exc).__name__})"
        ) from exc


class _Layout:
    """Struct formats for one ELF class and byte order, compiled once."""

    def __init__(self, endian: str, bits: int) -> None:
        wide = bits == 64
        self.endian = endian
        self.bits = bits
        # e_machine, e_shoff, e_shentsize, e_shnum; then e_shstrndx.
        self.file_header = struct.Struct(endian + ("18xH20xQ10xHH" if wide else "18xH12xI10xHH"))
        self.names_index = struct.Struct(endian + ("62xH" if wide else "50xH"))
        # (name, type, flags, addr, offset, size, link, info, align, entsize)
        self.section = struct.Struct(endian + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
        self.dynamic = struct.Struct(endian + ("qQ" if wide else "iI"))
        self.verneed = struct.Struct(endian + "HHIII")
        self.vernaux = struct.Struct(endian + "IHHII")
        self._sh_type = "4xI56x" if wide else "4xI32x"
        self._type_columns: dict[int, struct.Struct] = {}

    def section_types(self, table: bytes, count: int) -> tuple[int, ...]:
        """sh_type of every section header: one C call, with a format kept per count."""
        if count > 0xFF00:  # only in files with "extended" section counts: no huge formats
            return tuple(t for (t,) in struct.iter_unpack(self.endian + self._sh_type, table))
        column = self._type_columns.get(count)
        if column is None:
            column = self._type_columns[count] = struct.Struct(self.endian + self._sh_type * count)
        return column.unpack(table)


# By e_ident[EI_CLASS:EI_DATA + 1].
_LAYOUTS = {
    bytes([ei_class, ei_data]): _Layout("<" if ei_data == 1 else ">", 32 * ei_class)
    for ei_class in (1, 2)
    for ei_data in (1, 2)
}


def _section_table(fd: int, head: bytes) -> tuple[_Layout, int, bytes | None, int]:
    """(layout, e_machine, the section header table, its entry count); the
    table is None when the file has none."""
    if len(head) < 52 or head[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    layout = _LAYOUTS.get(head[4:6])
    if layout is None:
        raise ElfError(f"unknown ELF class/encoding {head[4]}/{head[5]}")
    machine, shoff, shentsize, shnum = layout.file_header.unpack_from(head)
    if shoff == 0:
        return layout, machine, None, 0
    if shentsize != layout.section.size:
        raise ElfError(f"unexpected section header size {shentsize}")
    if shnum == 0:
        # More than 0xff00 sections: the real count lives in section 0's sh_size.
        shnum = layout.section.unpack(_read(fd, shoff, shentsize))[5]
    return layout, machine, _read(fd, shoff, shnum * shentsize), shnum


def _sections(fd: int, head: bytes) -> list[Section]:
    layout, _machine, table, _count = _section_table(fd, head)
    if table is None:
        return []
    headers = list(layout.section.iter_unpack(table))
    (names_index,) = layout.names_index.unpack_from(head)
    if names_index == SHN_XINDEX:
        names_index = headers[0][6]
    names = _read(fd, headers[names_index][4], headers[names_index][5])
    return [
        Section(_cstr(names, name), kind, offset, 0 if kind == SHT_NOBITS else size)
        for name, kind, _flags, _addr, offset, size, *_rest in headers
    ]


def _parse(fd: int, head: bytes) -> ElfInfo:
    layout, machine, table, shnum = _section_table(fd, head)
    bits, little = layout.bits, layout.endian == "<"
    if table is None:
        return ElfInfo(bits, little, machine, has_sections=False)
    section = layout.section
    shentsize = section.size
    types = layout.section_types(table, shnum)
    # .symtab is only read when there is no .dynsym (see the module docstring).
    symbols_type = SHT_DYNSYM if SHT_DYNSYM in types else SHT_SYMTAB
    # Section index -> header, for the wanted sections and the string tables
    # they link to (sh_link; .gnu.version links to .dynsym instead).
    headers: dict[int, tuple[int, ...]] = {}
    wanted = []  # index of each wanted section, -1 when absent
    for kind in (symbols_type, SHT_GNU_VERNEED, SHT_DYNAMIC, SHT_GNU_VERSYM):
        try:
            index = types.index(kind)
        except ValueError:
            wanted.append(-1)
            continue
        wanted.append(index)
        header = headers[index] = section.unpack_from(table, index * shentsize)
        if kind != SHT_GNU_VERSYM and header[6] not in headers:
            headers[header[6]] = section.unpack_from(table, header[6] * shentsize)
    symbols, verneed, dynamic, versym = wanted
    data = _contents(fd, head, headers)
    versions: dict[int, str] = {}
    version_files = None
    if verneed >= 0:
        header = headers[verneed]
        # sh_info: the number of Verneed records.
        versions, files = _version_needs(data[verneed], header[7], data[header[6]], layout)
        version_files = (files, data[header[6]])
    dynamic_data = None
    if dynamic >= 0:
        dynamic_data = (data[dynamic], data[headers[dynamic][6]], layout.dynamic)
    imports: Imports | None = None
    if symbols >= 0:
        header = headers[symbols]
        if symbols_type == SHT_DYNSYM:
            imports = DynsymImports(
                data[symbols],
                data[versym] if versym >= 0 else b"",
                data[header[6]],
                versions,
                endian=layout.endian,
                bits=bits,
            )
        else:
            imports = _symtab_imports(
                data[symbols], header[7], data[header[6]], layout, versions.values()
            )
    return ElfInfo(
        bits,
        little,
        machine,
        imports,
        section_types=types,
        dynamic=dynamic_data,
        version_files=version_files,
    )


def _read(fd: int, offset: int, size: int) -> bytes:
    if offset < 0 or size < 0:
        raise ElfError("negative section offset or size")
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise ElfError("a section runs past the end of the file")
    return data


def _contents(fd: int, head: bytes, headers: dict[int, tuple[int, ...]]) -> dict[int, bytes]:
    """Section index -> bytes, in as few reads as possible.

    Sections within `head` (the file's first bytes, already read) cost no
    read; the others are read in runs of neighbours. Linkers put .dynsym,
    .dynstr, .gnu.version and .gnu.version_r together near the start and
    .dynamic further on; the bulk in between (code, fatbins) is never read.
    """
    contents: dict[int, bytes] = {}
    rest: list[tuple[int, int, int]] = []  # (offset, size, index) beyond `head`
    limit = len(head)
    for index, header in headers.items():
        offset, size = header[4], header[5]
        if offset + size <= limit:
            contents[index] = head[offset : offset + size]
        else:
            rest.append((offset, size, index))
    rest.sort()
    first = 0
    while first < len(rest):
        low = rest[first][0]
        high = low + rest[first][1]
        last = first + 1
        while last < len(rest) and rest[last][0] - high <= _READ_GAP:
            high = max(high, rest[last][0] + rest[last][1])
            last += 1
        block = _read(fd, low, high - low)
        for offset, size, index in rest[first:last]:
            contents[index] = block[offset - low : offset - low + size]
        first = last
    return contents


def _dynamic(
    raw: bytes, strtab: bytes, entry: struct.Struct
) -> tuple[list[str], list[str], list[str], str | None]:
    """(DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME) from .dynamic."""
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    soname = None
    for tag, value in entry.iter_unpack(raw[: len(raw) - len(raw) % entry.size]):
        if tag == DT_NEEDED:
            needed.append(_cstr(strtab, value))
        elif tag == DT_NULL:
            break
        elif tag == DT_RUNPATH:
            runpath += [p for p in _cstr(strtab, value).split(":") if p]
        elif tag == DT_RPATH:
            rpath += [p for p in _cstr(strtab, value).split(":") if p]
        elif tag == DT_SONAME:
            soname = _cstr(strtab, value)
    return needed, rpath, runpath, soname


def _version_needs(
    raw: bytes, count: int, strtab: bytes, layout: _Layout
) -> tuple[dict[int, str], dict[str, int]]:
    """From .gnu.version_r: (version index -> version string, version string ->
    string-table offset of the name of the library that provides it)."""
    verneed, vernaux = layout.verneed.unpack_from, layout.vernaux.unpack_from
    versions: dict[int, str] = {}
    files: dict[str, int] = {}
    offset = 0
    # The chain of `count` Verneed records is walked by vn_next; a record or an
    # entry past the section's end raises struct.error (a malformed file).
    for _ in range(count):
        _vn_version, vn_cnt, vn_file, vn_aux, vn_next = verneed(raw, offset)
        aux = offset + vn_aux
        for _ in range(vn_cnt):
            _hash, _flags, other, vna_name, vna_next = vernaux(raw, aux)
            # _cstr, inlined: this loop runs for every version of every library.
            end = strtab.find(b"\0", vna_name)
            version = strtab[vna_name : end if end >= 0 else None].decode("utf-8", "replace")
            versions[other & VERSYM_INDEX] = version
            if version not in files:
                files[version] = vn_file
            if vna_next == 0:
                break
            aux += vna_next
        if vn_next == 0:
            break
        offset += vn_next
    return versions, files


def _symtab_imports(
    raw: bytes, first_global: int, strtab: bytes, layout: _Layout, required: Iterable[str]
) -> Imports:
    """Imports from .symtab (no .dynsym); GNU ld writes them as `name@VERSION`."""
    # Local symbols come first (sh_info = index of the first global one) and
    # are never imports, so start after them.
    first, flags = undefined_flags(raw, layout.bits, first_global)
    imports: dict[str, str | None] = {}
    for offset in compress(name_offsets(raw, layout.endian, layout.bits)[first:], flags):
        if offset:
            name, _, version = _cstr(strtab, offset).partition("@")
            imports[name] = version.lstrip("@") or imports.get(name)
    return Imports(imports, required)


def undefined_flags(raw: bytes, bits: int, first: int = 1) -> tuple[int, bytes]:
    """(first, flags): flags[k] is 1 when symbol first+k has st_shndx SHN_UNDEF (0).

    Computed with slicing, int arithmetic and bytes.translate, all in C; the
    callers pick values out with itertools.compress, also in C.
    """
    size, at = (24, 6) if bits == 64 else (16, 14)
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
