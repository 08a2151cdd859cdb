"""A build against the glibc target (kernelnix.host.glibc_target): what CMake is
told, and one clear error for a glibc function newer than the target.

The target's headers are the newest glibc's, gated by zig on `__GLIBC_MINOR__`,
so a newer function is either undeclared (a compile error) or, declared by the
kernel itself, left undefined in the library and bound at load time to whatever
glibc the user has. The build step turns both into one error naming the
function, the release that added it and the file that calls it; the second is
read from the linked library, a check at link time that allows the Python C API,
which only the interpreter loading the module defines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from kernelnix.checks.elf import ElfError, read_elf
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.host.glibc_target import TARGET_FILE


@dataclass(frozen=True)
class GlibcTarget:
    """An assembled target: its sysroot and what the build needs of it."""

    root: Path
    glibc: str
    multiarch: str
    newer: dict[str, str]  # function -> the glibc release that added it

    @property
    def libraries(self) -> Path:
        return self.root / "usr" / "lib" / self.multiarch


def read_glibc_target(root: Path) -> GlibcTarget:
    """The target assembled at `root`; a UserError when it is not one."""
    path = root / TARGET_FILE
    try:
        data = json.loads(path.read_text())
        target = GlibcTarget(root, data["glibc"], data["multiarch"], dict(data["newer-symbols"]))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError.single(
            f"{root} is not an assembled glibc target: cannot read {path}: {error}",
            key="--glibc-target",
            fix="pass the directory `kernelnix build --local` or the flake assembled, or drop "
            "--glibc-target; a damaged one in kernelnix's cache can be deleted and is made anew",
        ) from error
    if not (target.libraries / "compat.o").is_file():
        raise UserError.single(
            f"the glibc target {root} lacks {target.libraries / 'compat.o'}",
            key="--glibc-target",
            fix="delete it and build again: kernelnix assembles it anew",
        )
    return target


def cmake_definitions(target: GlibcTarget) -> list[str]:
    """The CMake project's settings for the target (kernelnix.cmake's kernelnix_glibc_target)."""
    return [
        f"-DKERNELNIX_GLIBC_SYSROOT={target.root}",
        f"-DKERNELNIX_GLIBC_MINOR={target.glibc.split('.')[1]}",
        f"-DKERNELNIX_GLIBC_LIBRARIES={target.libraries}",
    ]


def _diagnostic(name: str, release: str, file: str, line: int | None, target: str) -> Diagnostic:
    return Diagnostic(
        f"{name} needs glibc {release}, but published variants are built against glibc "
        f"{target}, so that they load on every Linux machine the Hub serves (Ubuntu 20.04, "
        "RHEL 8, Amazon Linux 2)",
        file=file,
        line=line,
        fix=f"use what glibc {target} offers instead of {name} (its manual page names the "
        "release that added it); or build with --host-glibc (flake: hostGlibc = true) for "
        "this machine only, which `upload` refuses",
    )


# A compiler's error or warning with its place: gcc and clang `file:line:col: error:`,
# nvcc `file(line): error:`; gcc quotes names with '' or, in a UTF-8 locale, with ‘’.
_DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s:()][^:()]*?)(?::(?P<line>\d+)(?::\d+)?:|\((?P<nvline>\d+)\):) "
    r"(?:fatal )?(?:error|warning): (?P<message>.*)$",
    re.MULTILINE,
)
_UNDECLARED = ("not declared", "undeclared", "is undefined", "implicit declaration")
_QUOTED = re.compile(r"['\"‘](\w+)['\"’]")


def _relative(path: str, kernel: Path) -> str:
    """A compiled file's path as the compiler printed it (absolute, or relative to the
    build tree), relative to the kernel's directory, linked at `kernel`."""
    marker = f"{kernel.parent.name}/{kernel.name}/"
    return path.split(marker, 1)[1] if marker in path else path


def undeclared_newer_functions(output: str, target: GlibcTarget, kernel: Path) -> list[Diagnostic]:
    """The compile errors in `output` about a function of a newer glibc (the target's
    headers do not declare it), one each, with the kernel's file relative to `kernel`."""
    found: dict[tuple[str, str], Diagnostic] = {}
    for match in _DIAGNOSTIC.finditer(output):
        if not any(words in match["message"] for words in _UNDECLARED):
            continue
        file = _relative(match["file"], kernel)
        line = int(match["line"] or match["nvline"])
        for name in _QUOTED.findall(match["message"]):
            if name in target.newer:
                diagnostic = _diagnostic(name, target.newer[name], file, line, target.glibc)
                found.setdefault((name, file), diagnostic)
    return list(found.values())


def _source_of(object_file: Path, build: Path) -> str:
    """The kernel source CMake compiled into `object_file`
    (`CMakeFiles/<target>.dir/kernel/src/a.cu.o` -> `src/a.cu`)."""
    parts = object_file.relative_to(build).parts
    inside = parts[2:] if len(parts) > 2 and parts[0] == "CMakeFiles" else parts
    if inside and inside[0] == "kernel":
        inside = inside[1:]
    return str(Path(*inside)).removesuffix(".o")


def unbound_newer_functions(library: Path, build: Path, target: GlibcTarget) -> list[Diagnostic]:
    """The functions of a newer glibc the linked `library` leaves undefined (the
    stubs do not have them, so nothing bound them to a 2.27 version), each named
    with the objects under `build` that call it."""
    try:
        undefined = read_elf(library).undefined
    except (OSError, ElfError) as error:
        raise UserError.single(f"cannot read {library}: {error}") from error
    newer = sorted(n for n, v in undefined.items() if v is None and n in target.newer)
    if not newer:
        return []
    callers: dict[str, list[str]] = {name: [] for name in newer}
    for object_file in sorted(build.rglob("*.o")):
        try:
            names = read_elf(object_file).undefined
        except (OSError, ElfError):
            continue
        for name in newer:
            if name in names:
                callers[name].append(_source_of(object_file, build))
    return [
        _diagnostic(name, target.newer[name], caller, None, target.glibc)
        for name in newer
        for caller in callers[name] or [library.name]
    ]
