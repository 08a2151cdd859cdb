"""The store-path rule: no library of a variant names a Nix store path.

A store path inside a library makes Nix keep that path alive with the
variant (and refuse the output where the derivation disallows references),
and it names a directory that no user's machine has. Nix's own scan only says
which store paths it found; this rule says which library holds each one, in
which ELF section, what usually puts it there, and how to fix it, before Nix's
scan runs. The scan is over the file's bytes, as Nix scans them.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable
from pathlib import Path

from kernelnix.checks.binaries import is_binary_name
from kernelnix.checks.context import VariantContext
from kernelnix.checks.elf import ElfError, Section, read_sections
from kernelnix.checks.report import Violation

# Nix's base-32 alphabet (no e, o, u, t) and a 32-character hash part.
STORE_PATH = re.compile(rb"/nix/store/[0-9a-df-np-sv-z]{32}-[\x21-\x7e]*")

# What usually puts a path into a section, and how to fix it: (prefix, origin, fix).
ORIGINS = (
    (
        ".nv_fatbin",
        "CUDA device code: the line tables of -lineinfo or -G, or the file name of a device "
        "assert, of a file compiled without the build step's nvcc host compiler wrapper",
        "compile the file through the generated CMake project (its nvcc host compiler "
        "maps every store path in device code), or drop -lineinfo and -G",
    ),
    (
        "__nv_relfatbin",
        "CUDA device code of relocatable device code (-rdc): line tables or a device assert "
        "of a file compiled without the build step's nvcc host compiler wrapper",
        "compile the file through the generated CMake project, or drop -lineinfo and -G",
    ),
    (
        ".debug",
        "debug information (-g) of a file compiled without the build step's path map",
        "compile the file through the generated CMake project (it maps every store path), "
        "or drop -g",
    ),
    (
        ".dyn",
        "the dynamic section: a DT_NEEDED library or a search path given as a store path",
        "link against the library by name and leave search paths to the loader",
    ),
    (
        ".rodata",
        "a string constant: __FILE__ of an assert or a logging macro in code compiled "
        "without the path map, or a path written into the source",
        "remove the path from the source, or build the file through the generated CMake "
        "project, which maps store paths",
    ),
)


def _section_at(sections: list[Section], offset: int) -> str:
    for section in sections:
        if section.size and section.offset <= offset < section.offset + section.size:
            return section.name
    return "no section"


def _origin(section: str) -> tuple[str, str]:
    for prefix, origin, fix in ORIGINS:
        if section.startswith(prefix):
            return origin, fix
    return (
        f"the {section} section",
        "find the source that embeds it (strings -t x the library, then readelf -S)",
    )


def _store_paths(path: Path) -> dict[bytes, int]:
    """Each store path in the file's bytes, with the offset where it first occurs."""
    found: dict[bytes, int] = {}
    with open(path, "rb") as handle:
        if path.stat().st_size == 0:
            return found
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for match in STORE_PATH.finditer(data):
                found.setdefault(match.group(), match.start())
    return found


def store_paths(ctx: VariantContext) -> Iterable[Violation]:
    """Every library of the variant without a store path in it."""
    for relative in ctx.listing.files:
        if not is_binary_name(relative):
            continue
        path = ctx.variant_dir / relative
        found = _store_paths(path)
        if not found:
            continue
        try:
            sections = read_sections(path)
        except ElfError:
            sections = []
        for store_path, offset in sorted(found.items(), key=lambda item: item[1]):
            section = _section_at(sections, offset)
            origin, fix = _origin(section)
            yield Violation(
                rule="store-path",
                file=relative,
                subject=store_path.decode(errors="replace"),
                found=f"at offset {offset:#x}, in {section}: {origin}",
                limit="no Nix store path: users' machines have none, and Nix keeps every "
                "path a library names alive with it",
                fix=fix,
            )
