"""Rules over the variant's compiled libraries (ELF and Mach-O).

Each rule is a function `(Binary, BinarySettings) -> Iterable[Violation]`; the
rule lists at the bottom say which run for which format.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kernelnix.checks.demangle import demangle, outer_names
from kernelnix.checks.elf import HEAD_BYTES, ElfError, ElfInfo, Imports, is_elf, read_elf_fd
from kernelnix.checks.macho import MachOError, is_macho, read_macho
from kernelnix.checks.policy import Policy, VersionVerdict
from kernelnix.checks.report import Violation
from kernelnix.checks.tables import (
    python_stable_abi,
    runtime_library_kinds,
    runtime_library_matcher,
    torch_shim_versions,
)
from kernelnix.core.version import Version

BINARY_SUFFIXES = (".so", ".pyd", ".dylib")
# Every name in CPython's stable-ABI table, and every CPython-internal name, starts so.
PYTHON_PREFIXES = ("Py", "_Py")


def is_binary_name(path: str) -> bool:
    """Files the binary rules examine: shared objects by name, as the reference does."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(BINARY_SUFFIXES) or ".so." in name


class Linking(Protocol):
    """What a library loads: dependencies, search paths and, for ELF, the
    library each symbol version comes from."""

    @property
    def needed(self) -> list[str]: ...

    @property
    def rpath(self) -> list[str]: ...

    @property
    def runpath(self) -> list[str]: ...

    @property
    def version_libraries(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class DylibLinking:
    """A Mach-O slice's LC_LOAD_DYLIB and LC_RPATH entries, as Linking."""

    needed: list[str]
    rpath: list[str]
    runpath: list[str] = field(default_factory=list)  # Mach-O has no RUNPATH
    version_libraries: dict[str, str] = field(default_factory=dict)  # nor symbol versions


@dataclass(slots=True)
class Binary:
    """One library (or one slice of a universal Mach-O file), format-neutral."""

    file: str
    format: str  # "ELF" or "Mach-O"
    cpu: str
    imports: Imports
    # ElfInfo for ELF files: it decodes .dynamic only when a rule asks.
    linking: Linking
    minos: Version | None = None
    version_min_macosx: Version | None = None
    slice_label: str = ""  # "[x86_64] " for slices of universal files
    symbols_readable: bool = True

    @property
    def needed(self) -> list[str]:
        return self.linking.needed

    @property
    def rpath(self) -> list[str]:
        return self.linking.rpath

    @property
    def runpath(self) -> list[str]:
        return self.linking.runpath

    @property
    def version_libraries(self) -> dict[str, str]:
        return self.linking.version_libraries


@dataclass(frozen=True)
class BinarySettings:
    """Variant-wide inputs of the binary rules."""

    policy: Policy | None
    python_abi: Version
    stable_abi: Version | None
    macos_min: Version
    backend: str | None
    cpu: str | None
    os_name: str | None
    redistributable: bool
    kind: str | None = None  # the variant's (arch, stable-abi, tvm-ffi...), from its name


BinaryRule = Callable[[Binary, BinarySettings], Iterable[Violation]]


def load_binaries(root: Path | str, relative: str) -> tuple[list[Binary], list[Violation]]:
    """Parse one file into Binary records, or say why it cannot be checked."""
    path = f"{root}/{relative}"  # a str: no Path object per file
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.pread(fd, HEAD_BYTES, 0)
            if is_elf(head):
                return [_from_elf(read_elf_fd(fd, head), relative)], []
        finally:
            os.close(fd)
        if is_macho(head):
            return _from_macho(path, relative), []
    except (ElfError, MachOError, OSError) as exc:
        return [], [_format_violation(relative, str(exc))]
    found = "a Windows PE file" if head[:2] == b"MZ" else "neither ELF nor Mach-O"
    return [], [_format_violation(relative, found)]


def _format_violation(file: str, found: str) -> Violation:
    return Violation(
        rule="binary-format",
        file=file,
        subject="file format",
        found=found,
        limit="ELF (Linux) or Mach-O (macOS) shared library",
        fix="ship only the kernel's extension library; rebuild it if it is damaged",
    )


def _from_elf(info: ElfInfo, relative: str) -> Binary:
    return Binary(
        relative,
        "ELF",
        info.machine_name,
        info.imports,
        info,
        symbols_readable=info.has_dynsym or info.has_symtab,
    )


def _from_macho(path: str, relative: str) -> list[Binary]:
    slices = read_macho(path)
    universal = len(slices) > 1
    return [
        Binary(
            file=relative,
            format="Mach-O",
            cpu=info.cpu_name,
            imports=info.imports,
            linking=DylibLinking(needed=info.dylibs, rpath=info.rpaths),
            minos=info.minos,
            version_min_macosx=info.version_min_macosx,
            slice_label=f"[{info.cpu_name}] " if universal else "",
        )
        for info in slices
    ]


# ---------------------------------------------------------------------------
# Rules for both formats


_FORMAT_OF_OS = {"linux": "ELF", "darwin": "Mach-O"}


def binary_platform(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """The library is built for the OS and CPU the variant name promises."""
    expected_format = _FORMAT_OF_OS.get(settings.os_name or "")
    if expected_format and binary.format != expected_format:
        yield Violation(
            rule="binary-platform",
            file=binary.file,
            subject="file format",
            found=f"{binary.format} library",
            limit=f"{expected_format} for a {settings.os_name} variant",
            fix="build this variant on (or for) the system its name declares",
        )
    elif settings.cpu and binary.cpu != settings.cpu:
        yield Violation(
            rule="binary-platform",
            file=binary.file,
            subject=f"{binary.slice_label}architecture",
            found=f"built for {binary.cpu}",
            limit=f"{settings.cpu}, as the variant name says",
            fix="build the variant for the CPU in its name (or rename the variant)",
        )


def python_abi_symbols(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """Only CPython stable-ABI symbols available in the target Python version."""
    table = python_stable_abi()
    target = settings.python_abi
    for name in binary.imports.with_prefix(PYTHON_PREFIXES):
        added = table.get(name)
        if added is None:
            yield Violation(
                rule="python-abi",
                file=binary.file,
                subject=binary.slice_label + name,
                found="not part of the Python stable ABI (abi3)",
                limit=f"stable ABI of Python {target}",
                fix="build with Py_LIMITED_API (-DPy_LIMITED_API=0x03090000) and replace "
                "this CPython-internal call with a limited-API one",
            )
        elif added > target:
            yield Violation(
                rule="python-abi",
                file=binary.file,
                subject=binary.slice_label + name,
                found=f"added to the stable ABI in Python {added}",
                limit=f"stable ABI of Python {target}",
                fix=f"avoid this function, or raise the Python ABI target to {added} "
                "(--python-abi)",
            )


def torch_stable_abi_symbols(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """Stable-ABI variants: shim functions no newer than the target, no libtorch C++ API."""
    target = settings.stable_abi
    if target is None:
        return []
    shims = torch_shim_versions()
    too_new: list[tuple[str, Version]] = []
    unstable: list[str] = []
    for name in binary.imports.all():
        added = shims.get(name)
        if added is not None:
            if added > target:
                too_new.append((name, added))
            continue
        if _is_unstable_torch_symbol(name):
            unstable.append(name)
    violations = [
        Violation(
            rule="torch-stable-abi",
            file=binary.file,
            subject=binary.slice_label + name,
            found=f"shim function added in torch {added}",
            limit=f"torch stable ABI {target}",
            fix=f"avoid it, or target torch stable ABI {added} (torch-stable-abi{added.flat()})",
        )
        for name, added in too_new
    ]
    readable = demangle(unstable)
    violations += [
        Violation(
            rule="torch-stable-abi",
            file=binary.file,
            subject=binary.slice_label + readable[name],
            found="libtorch C++ API (not part of the stable ABI)",
            limit=f"torch stable ABI {target}: torch::stable:: and the C shim only",
            fix="use the torch/csrc/stable API (torch::stable::Tensor, STABLE_TORCH_LIBRARY) "
            "instead of at::/c10::/torch:: functions",
        )
        for name in unstable
    ]
    return violations


def _is_unstable_torch_symbol(name: str) -> bool:
    outer = outer_names(name)
    if not outer or outer[0] not in ("at", "c10", "torch"):
        return False
    return not (outer[0] == "torch" and outer[1:2] == ["stable"])


def search_paths(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """Redistributable builds carry no RPATH/RUNPATH into the build machine."""
    if not settings.redistributable or not (binary.rpath or binary.runpath):
        return
    kinds = [("RPATH", p) for p in binary.rpath] + [("RUNPATH", p) for p in binary.runpath]
    if binary.format == "Mach-O":
        kinds = [("LC_RPATH", p) for p in binary.rpath]
    for kind, entry in kinds:
        if entry.startswith(("$ORIGIN", "${ORIGIN}", "@loader_path", "@rpath", "@executable_path")):
            continue
        found = (
            "absolute path: it names a directory of the build machine"
            if entry.startswith("/")
            else "relative path: it resolves against the user's working directory"
        )
        yield Violation(
            rule="search-path",
            file=binary.file,
            subject=f"{binary.slice_label}{kind} {entry}",
            found=found,
            limit="no search paths except $ORIGIN/@loader_path-relative ones",
            fix="drop it (CMAKE_SKIP_RPATH=ON, or `patchelf --remove-rpath`); Torch's "
            "libraries are found because torch is already loaded",
        )


# ---------------------------------------------------------------------------
# ELF-only rules


def symbol_versions(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """glibc/libstdc++/libgcc symbol versions within the policy's ceilings."""
    policy = settings.policy
    if policy is None:
        return
    # Names are only looked up for rejected versions.
    bad = policy.rejected(binary.imports.versions())
    if not bad:
        return
    carried: set[str] = set()
    for name, version in binary.imports.with_versions(bad):
        carried.add(version)
        yield _version_violation(binary.file, f"{name}@{version}", bad[version], policy)
    # Version requirements no symbol carries (e.g. GLIBC_ABI_DT_RELR from
    # -z pack-relative-relocs) bind the library to a glibc just the same.
    for version, verdict in sorted(bad.items()):
        if version not in carried:
            library = binary.version_libraries.get(version, "?")
            yield _version_violation(
                binary.file, f"{version} (needed from {library})", verdict, policy
            )


_VERSION_FIXES = {
    "GLIBC": "build with the hermetic toolchain (its old glibc), or avoid this function; "
    "a newer glibc symbol version cannot load on older systems",
    "GLIBCXX": "this libstdc++ feature is newer than the policy allows: build with the "
    "hermetic toolchain or avoid the feature (e.g. floating-point std::to_chars)",
    "CXXABI": "this C++ runtime ABI feature is newer than the policy allows: build with the "
    "hermetic toolchain or avoid it",
    "GCC": "this libgcc_s function is newer than the policy allows: take libgcc's helpers "
    "from the archive (-l:libgcc.a after the objects, as redistributable builds do); "
    "never -static-libgcc, which brings a second unwinder",
}


def _version_violation(
    file: str, subject: str, verdict: VersionVerdict, policy: Policy
) -> Violation:
    if verdict.numeric:
        found = f"requires {verdict.namespace} {verdict.version}"
        fix = _VERSION_FIXES.get(
            verdict.namespace, f"avoid this {verdict.namespace} symbol version or rebuild"
        )
    else:
        found = f"non-numeric version {verdict.namespace}_{verdict.version}"
        if verdict.version == "PRIVATE":
            found += " (internal to glibc: it changes between glibc releases)"
        fix = (
            "do not call internal or feature-specific C library entry points; use the "
            "public API (often the function is pulled in by a static library: rebuild it)"
        )
    return Violation(
        rule="symbol-version",
        file=file,
        subject=subject,
        found=found,
        limit=f"policy {policy.name}: {verdict.limit}",
        fix=fix,
    )


def forbidden_symbols(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """Symbols the policy lists as private to an allowed library (e.g. libz internals)."""
    policy = settings.policy
    if policy is None or (
        policy.forbidden_symbols.keys().isdisjoint(binary.needed)
        and policy.forbidden_symbols.keys().isdisjoint(binary.version_libraries.values())
    ):
        return
    for name, version in binary.imports.all().items():
        library = binary.version_libraries.get(version) if version else None
        candidates = [library] if library else binary.needed
        for candidate in candidates:
            if name in policy.forbidden_symbols.get(candidate, ()):
                yield Violation(
                    rule="forbidden-symbol",
                    file=binary.file,
                    subject=name,
                    found=f"internal symbol of {candidate}",
                    limit=f"policy {policy.name}",
                    fix=f"use only the public API of {candidate}",
                )


def needed_libraries(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """DT_NEEDED: the policy's libraries, Torch's, and the backend runtime's only."""
    policy = settings.policy
    if policy is None:
        return
    runtime = runtime_library_matcher(settings.backend, settings.kind)
    for library in binary.needed:
        if library in policy.forbidden_libraries:
            yield Violation(
                rule="needed-library",
                file=binary.file,
                subject=library,
                found="dynamic dependency forbidden by the policy",
                limit=f"policy {policy.name}",
                fix=policy.forbidden_libraries[library],
            )
        elif library not in policy.allowed_libraries and not runtime.fullmatch(library):
            yield Violation(
                rule="needed-library",
                file=binary.file,
                subject=library,
                found="dynamic dependency that users' machines do not provide",
                limit=f"policy {policy.name}'s system libraries, "
                f"{runtime_library_kinds(settings.backend, settings.kind)}",
                fix="link it statically or drop it; a kernel may only depend on the system, "
                "Torch and the backend runtime that Torch brings",
            )


# Defined only by libstdc++ itself: a library that exports one carries a static
# libstdc++ with default visibility (docs/libstdcxx.md, section 1).
LIBSTDCXX_MARKERS = ("__cxa_throw", "__gxx_personality_v0", "_ZSt4cout", "_ZNSt6locale7classicEv")
# What an unwinder calls to find a frame's unwind tables; only libgcc_eh's copy,
# linked in by -static-libgcc, brings these calls into a kernel.
FDE_LOOKUPS = ("_dl_find_object", "dl_iterate_phdr")
UNWINDER_PREFIX = ("_Unwind_",)


def cxx_runtime(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """A kernel's own C++ runtime must stay private and use the process's unwinder.

    Both links this rejects load and then break in a process with Torch
    (docs/libstdcxx.md): an exported static libstdc++ loses its locale facets
    to Torch's libstdc++.so.6; a private unwinder aborts the process at the
    first exception that leaves the kernel.
    """
    exported = binary.imports.exports(LIBSTDCXX_MARKERS)
    if exported:
        yield Violation(
            rule="cxx-runtime",
            file=binary.file,
            subject=", ".join(exported),
            found="exports the C++ runtime (a static libstdc++ with default visibility): "
            "its locale facet ids bind to Torch's libstdc++.so.6, so std::regex throws "
            "std::bad_cast and streams write nothing",
            limit="a static libstdc++ kept private",
            fix="link with -static-libstdc++ -Wl,--exclude-libs,ALL (kernelnix's "
            "redistributable builds do)",
        )
    if not binary.imports.with_prefix(UNWINDER_PREFIX):
        lookups = [name for name in binary.imports.with_prefix(FDE_LOOKUPS) if name in FDE_LOOKUPS]
        if lookups:
            yield Violation(
                rule="cxx-runtime",
                file=binary.file,
                subject=", ".join(lookups),
                found="carries its own unwinder (-static-libgcc): an exception thrown "
                "through Torch's frames aborts a process in which Torch has not thrown yet",
                limit="the unwinder of libgcc_s.so.1 (imports _Unwind_*)",
                fix="drop -static-libgcc; take libgcc's helpers from the archive instead "
                "(-l:libgcc.a after the objects), as kernelnix's redistributable builds do",
            )


def symbols_present(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """A library without symbol tables cannot be vetted."""
    if not binary.symbols_readable:
        yield Violation(
            rule="binary-format",
            file=binary.file,
            subject="symbol tables",
            found="no .dynsym and no .symtab",
            limit="a dynamic symbol table",
            fix="ship an ordinary shared library (not a static or object file)",
        )


# ---------------------------------------------------------------------------
# Mach-O-only rules


def macos_dylibs(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """Redistributable builds load dylibs from the system or through @rpath/@loader_path."""
    if not settings.redistributable:
        return
    for dylib in binary.needed:
        if dylib.startswith("/") and not dylib.startswith(("/usr/lib/", "/System/")):
            yield Violation(
                rule="needed-library",
                file=binary.file,
                subject=binary.slice_label + dylib,
                found="absolute install name outside the system directories",
                limit="/usr/lib, /System, or @rpath/@loader_path-relative names",
                fix="rewrite it (install_name_tool -change … @rpath/<name>) or link statically",
            )


def macos_deployment_target(binary: Binary, settings: BinarySettings) -> Iterable[Violation]:
    """LC_BUILD_VERSION's minimum macOS no newer than the target."""
    target = settings.macos_min
    if binary.minos is None:
        legacy = (
            f" (only the legacy LC_VERSION_MIN_MACOSX {binary.version_min_macosx})"
            if binary.version_min_macosx
            else ""
        )
        yield Violation(
            rule="macos-version",
            file=binary.file,
            subject=f"{binary.slice_label}LC_BUILD_VERSION",
            found=f"missing{legacy}",
            limit=f"minimum macOS <= {target}",
            fix=f"build with a current Xcode toolchain and -mmacosx-version-min={target}",
        )
    elif binary.minos > target:
        yield Violation(
            rule="macos-version",
            file=binary.file,
            subject=f"{binary.slice_label}minimum macOS",
            found=str(binary.minos),
            limit=f"<= {target}",
            fix=f"set the deployment target to {target} (MACOSX_DEPLOYMENT_TARGET or "
            f"-mmacosx-version-min={target})",
        )


ELF_RULES: tuple[BinaryRule, ...] = (
    binary_platform,
    symbols_present,
    symbol_versions,
    forbidden_symbols,
    needed_libraries,
    cxx_runtime,
    search_paths,
    python_abi_symbols,
    torch_stable_abi_symbols,
)
MACHO_RULES: tuple[BinaryRule, ...] = (
    binary_platform,
    macos_deployment_target,
    macos_dylibs,
    search_paths,
    python_abi_symbols,
    torch_stable_abi_symbols,
)


def check_binary(
    binary: Binary, settings: BinarySettings, rules: tuple[BinaryRule, ...] | None = None
) -> list[Violation]:
    """`binary` against `rules`, by default every rule of its format."""
    if rules is None:
        rules = ELF_RULES if binary.format == "ELF" else MACHO_RULES
    return [violation for rule in rules for violation in rule(binary, settings)]
