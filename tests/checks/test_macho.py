"""Mach-O rules on hand-made Mach-O files (header and load commands built here)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kernelnix.checks import CheckOptions, run_checks
from kernelnix.checks.macho import (
    LC_BUILD_VERSION,
    LC_LOAD_DYLIB,
    LC_RPATH,
    LC_SYMTAB,
    LC_VERSION_MIN_MACOSX,
    MH_MAGIC_64,
    encode_version,
    parse_macho,
)
from kernelnix.core.version import Version

CPU_ARM64 = 0x0100000C
CPU_X86_64 = 0x01000007
KERNEL_ID = "_machotest_metal_abc1234"


def _padded(command: bytes) -> bytes:
    return command + b"\0" * (-len(command) % 8)


def _name_command(cmd: int, header: str, name: str) -> bytes:
    fixed = struct.pack(header, 0, *([0] * (struct.calcsize(header) // 4 - 1)))
    body = bytearray(_padded(struct.pack("<II", cmd, 0) + fixed + name.encode() + b"\0"))
    struct.pack_into("<II", body, 0, cmd, len(body))
    struct.pack_into("<I", body, 8, 8 + len(fixed))  # name offset from the command start
    return bytes(body)


def make_macho(
    *,
    minos: str | None = "15.0",
    legacy_min: str | None = None,
    cputype: int = CPU_ARM64,
    undefined: tuple[str, ...] = (),
    dylibs: tuple[str, ...] = (),
    rpaths: tuple[str, ...] = (),
) -> bytes:
    """A 64-bit little-endian MH_DYLIB with the requested load commands."""
    commands: list[bytes] = []
    if minos is not None:
        commands.append(
            struct.pack(
                "<IIIIII",
                LC_BUILD_VERSION,
                24,
                1,
                encode_version(Version.parse(minos)),
                encode_version(Version.parse("26.0")),
                0,
            )
        )
    if legacy_min is not None:
        commands.append(
            struct.pack(
                "<IIII", LC_VERSION_MIN_MACOSX, 16, encode_version(Version.parse(legacy_min)), 0
            )
        )
    commands += [_name_command(LC_LOAD_DYLIB, "<IIII", name) for name in dylibs]
    commands += [_name_command(LC_RPATH, "<I", path) for path in rpaths]
    strings = bytearray(b"\0")
    symbols = bytearray()
    for name in ("_kn_defined", *(f"_{n}" for n in undefined)):
        defined = name == "_kn_defined"
        n_type = 0x0F if defined else 0x01  # N_SECT|N_EXT, or N_UNDF|N_EXT
        symbols += struct.pack("<IBBHQ", len(strings), n_type, 1 if defined else 0, 0, 0)
        strings += name.encode() + b"\0"
    header_size = 32
    symtab_size = 24
    commands_size = sum(len(c) for c in commands) + symtab_size
    symoff = header_size + commands_size
    stroff = symoff + len(symbols)
    commands.append(
        struct.pack(
            "<IIIIII", LC_SYMTAB, symtab_size, symoff, len(symbols) // 16, stroff, len(strings)
        )
    )
    header = struct.pack(
        "<IiiIIIII", MH_MAGIC_64, cputype, 0, 6, len(commands), commands_size, 0, 0
    )
    return header + b"".join(commands) + bytes(symbols) + bytes(strings)


def make_universal(*slices: bytes) -> bytes:
    """A fat file (big-endian header) holding `slices`, each 4 KiB aligned."""
    header = struct.pack(">II", 0xCAFEBABE, len(slices))
    offset = 4096
    entries, body = b"", b""
    for data in slices:
        cputype = struct.unpack_from("<i", data, 4)[0]
        entries += struct.pack(">iiIII", cputype, 0, offset, len(data), 12)
        body += data + b"\0" * (-len(data) % 4096)
        offset += len(data) + (-len(data) % 4096)
    prefix = header + entries
    return prefix + b"\0" * (4096 - len(prefix)) + body


def _variant(root: Path, name: str, backend: str, library: bytes) -> Path:
    variant = root / name
    variant.mkdir(parents=True)
    (variant / "metadata.json").write_text(
        json.dumps(
            {
                "name": "machotest",
                "id": KERNEL_ID,
                "version": 1,
                "license": "MIT",
                "python-depends": [],
                "backend": {"type": backend},
            }
        )
    )
    (variant / "__init__.py").write_text("from ._ops import ops\n")
    (variant / "_ops.py").write_text(
        "import torch\n\nops = torch.ops." + KERNEL_ID + "\n\n\n"
        "def add_op_namespace_prefix(op_name: str) -> str:\n"
        f'    return f"{KERNEL_ID}::{{op_name}}"\n'
    )
    (variant / f"{KERNEL_ID}.abi3.so").write_bytes(library)
    return variant


def _violations(variant: Path, **options: object) -> set[tuple[str, str, str]]:
    report = run_checks(variant, CheckOptions(import_check=False, **options))  # type: ignore[arg-type]
    return {(v.rule, v.subject, v.found) for v in report.violations}


def test_reader_decodes_build_version_symbols_dylibs_and_rpaths() -> None:
    data = make_macho(
        minos="14.2.1",
        undefined=("PyType_GetName",),
        dylibs=("@rpath/libtorch.dylib",),
        rpaths=("@loader_path/lib",),
    )
    (info,) = parse_macho(data)
    assert info.minos == Version.parse("14.2.1")
    assert info.cpu_name == "aarch64"
    assert info.undefined == {"PyType_GetName": None}
    assert info.dylibs == ["@rpath/libtorch.dylib"]
    assert info.rpaths == ["@loader_path/lib"]


def test_metal_variant_with_deployment_target_26_is_clean(tmp_path: Path) -> None:
    variant = _variant(
        tmp_path,
        "torch213-metal-aarch64-darwin",
        "metal",
        make_macho(minos="26.0", undefined=("PyUnicode_FromString",)),
    )
    assert _violations(variant) == set()


def test_cpu_variant_allows_at_most_macos_15(tmp_path: Path) -> None:
    variant = _variant(tmp_path, "torch213-cpu-aarch64-darwin", "cpu", make_macho(minos="26.0"))
    assert _violations(variant) == {("macos-version", "minimum macOS", "26")}
    assert _violations(variant, macos_min=Version.parse("26.0")) == set()


def test_missing_build_version_is_a_violation(tmp_path: Path) -> None:
    variant = _variant(
        tmp_path, "torch213-cpu-aarch64-darwin", "cpu", make_macho(minos=None, legacy_min="11.0")
    )
    ((rule, subject, found),) = _violations(variant)
    assert (rule, subject) == ("macos-version", "LC_BUILD_VERSION")
    assert found == "missing (only the legacy LC_VERSION_MIN_MACOSX 11)"


def test_python_abi_dylibs_and_rpaths_on_macos(tmp_path: Path) -> None:
    library = make_macho(
        minos="15.0",
        undefined=("PyType_GetName", "_PyObject_GetDictPtr", "Py_IncRef"),
        dylibs=(
            "/usr/lib/libSystem.B.dylib",
            "/opt/homebrew/lib/libomp.dylib",
            "@rpath/libc10.dylib",
        ),
        rpaths=("@loader_path/lib", "/Users/builder/torch/lib"),
    )
    variant = _variant(tmp_path, "torch213-cpu-aarch64-darwin", "cpu", library)
    found = {(rule, subject) for rule, subject, _ in _violations(variant)}
    assert found == {
        ("python-abi", "PyType_GetName"),
        ("python-abi", "_PyObject_GetDictPtr"),
        ("needed-library", "/opt/homebrew/lib/libomp.dylib"),
        ("search-path", "LC_RPATH /Users/builder/torch/lib"),
    }
    local = {(r, s) for r, s, _ in _violations(variant, redistributable=False)}
    assert local == {("python-abi", "PyType_GetName"), ("python-abi", "_PyObject_GetDictPtr")}


def test_universal_file_reports_each_slice(tmp_path: Path) -> None:
    library = make_universal(make_macho(minos="15.0"), make_macho(minos="16.0", cputype=CPU_X86_64))
    variant = _variant(tmp_path, "torch213-cpu-aarch64-darwin", "cpu", library)
    assert _violations(variant) == {
        ("binary-platform", "[x86_64] architecture", "built for x86_64"),
        ("macos-version", "[x86_64] minimum macOS", "16"),
    }


def test_elf_library_in_a_darwin_variant(tmp_path: Path) -> None:
    elf = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHI", 3, 183, 1) + b"\0" * 40
    variant = _variant(tmp_path, "torch213-cpu-aarch64-darwin", "cpu", elf)
    assert ("binary-platform", "file format", "ELF library") in _violations(variant)


@pytest.mark.parametrize(("minos", "target"), [("15.0", "15.0"), ("26.0", "15.0"), (None, "15")])
def test_macos_verdict_agrees_with_kernel_abi_check(
    tmp_path: Path, minos: str | None, target: str
) -> None:
    abi = pytest.importorskip("kernel_abi_check")
    path = tmp_path / "lib.so"
    path.write_bytes(make_macho(minos=minos, undefined=("PyType_GetName", "PyLong_FromLong")))
    library = abi.ObjectFile(str(path))
    reference_macos = library.check_macos(target)
    reference_python = {v.name for v in library.check_python_abi("3.9")}
    variant = _variant(tmp_path, "torch213-cpu-aarch64-darwin", "cpu", path.read_bytes())
    ours = _violations(variant, macos_min=Version.parse(target))
    assert bool(reference_macos) == any(rule == "macos-version" for rule, _, _ in ours)
    assert reference_python == {s for rule, s, _ in ours if rule == "python-abi"}
