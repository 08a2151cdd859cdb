"""Itanium C++ names: the outer namespaces (from the mangled form) and display text."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

# Special-name prefixes followed by an ordinary <type>/<name> encoding:
# vtable, VTT, typeinfo, typeinfo name, guard variable.
_SPECIAL_PREFIXES = ("TV", "TI", "TS", "TT", "GV")


def outer_names(mangled: str, depth: int = 2) -> list[str]:
    """The first `depth` components of a nested (namespace-qualified) name.

    `_ZN2at6native3addEv` -> ["at", "native"]; `_ZNK3c1010TensorImpl4sizeEv`
    -> ["c10", "TensorImpl"]; `_ZTVN3c1011StorageImplE` -> ["c10", "StorageImpl"].
    Unscoped names (`_Z3foov`), std:: names and anything not understood -> [].
    Deciding on the mangled form catches what a prefix test on demangled text
    misses, e.g. templates whose demangling starts with the return type
    (`void c10::foo<int>(int)`) and `typeinfo for at::Tensor`.
    """
    if not mangled.startswith("_Z"):
        return []
    rest = mangled[2:]
    if rest[:2] in _SPECIAL_PREFIXES:
        rest = rest[2:]
    if not rest.startswith("N"):
        return []
    rest = rest[1:].lstrip("rVK")
    if rest[:1] in ("R", "O"):
        rest = rest[1:]
    names: list[str] = []
    while len(names) < depth:
        digits = 0
        while digits < len(rest) and rest[digits].isdigit():
            digits += 1
        if digits == 0:
            break
        length = int(rest[:digits])
        names.append(rest[digits : digits + length])
        rest = rest[digits + length :]
    return names


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Demangled text for each name, with one `c++filt` call for the whole batch.

    Names c++filt cannot decode (or all of them, when c++filt is not installed)
    map to themselves.
    """
    if not names:
        return {}
    tool = shutil.which("c++filt")
    if tool is None:
        return {name: name for name in names}
    try:
        result = subprocess.run(
            [tool],
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return {name: name for name in names}
    lines = result.stdout.splitlines()
    if len(lines) != len(names):
        return {name: name for name in names}
    return dict(zip(names, lines, strict=True))
