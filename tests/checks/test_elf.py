"""kernelnix.checks.elf's section table (`read_sections`) against binutils' readelf,
on the real libraries of the checks corpus; a file that is not ELF is an ElfError."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from checks_corpus.corpus import build_corpus

from kernelnix.checks.elf import SHT_NOBITS, ElfError, read_sections

pytestmark = [
    pytest.mark.slow,  # the corpus is compiled with gcc
    pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf"),
]

# `  [ 1] .note.gnu.build-id NOTE  00000000000002a8 0002a8 000024 ...`; section 0 has no name.
_ROW = re.compile(r"^\s*\[\s*\d+\]\s+(\S+)?\s+(\S+)\s+[0-9a-f]{16}\s+([0-9a-f]+)\s+([0-9a-f]+)\s")


def readelf_sections(path: Path) -> list[tuple[str, int, int, bool]]:
    """(name, offset, size, is NOBITS) of each section, as readelf lists them."""
    listing = subprocess.run(
        ["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    rows = [m.groups() for m in map(_ROW.match, listing.splitlines()) if m]
    return [
        (name or "", int(offset, 16), int(size, 16), kind == "NOBITS")
        for name, kind, offset, size in rows
    ]


@pytest.mark.parametrize("case", ["clean_c", "dynamic_cxx", "glibc_234_stripped", "cuda_kernel"])
def test_sections_are_those_readelf_lists(case: str) -> None:
    corpus = build_corpus()
    if case not in corpus.libraries:
        pytest.skip(f"{case}: compiler not available")
    path = corpus.path(case)
    ours = [(s.name, s.offset, s.size, s.type == SHT_NOBITS) for s in read_sections(path)]
    theirs = [
        (name, offset, 0 if nobits else size, nobits)
        for name, offset, size, nobits in readelf_sections(path)
    ]
    assert ours == theirs
    assert ".text" in [name for name, *_ in ours]


def test_a_file_that_is_not_elf_is_an_elf_error(tmp_path: Path) -> None:
    text = tmp_path / "lib.so"
    text.write_text("INPUT(-lfoo)\n")  # a linker script named like a library
    with pytest.raises(ElfError, match="not an ELF file"):
        read_sections(text)
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(build_corpus().path("clean_c").read_bytes()[:100])
    with pytest.raises(ElfError):
        read_sections(truncated)
