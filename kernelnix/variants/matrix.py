"""The supported version matrix: data in `kernelnix/data/matrix.json`, read by
this module and by the Nix library alike."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.core.version import Version


@dataclass(frozen=True)
class BuildSet:
    """One matrix entry: a Torch version with one backend (and its version)."""

    torch: Version
    backend: str
    version: Version | None
    systems: tuple[str, ...]
    bundle: bool
    tvm_ffi: Version | None

    def describe(self) -> str:
        backend = f"{self.backend} {self.version.major_minor()}" if self.version else self.backend
        return f"torch {self.torch.major_minor()} with {backend}"


@dataclass(frozen=True)
class Matrix:
    systems: tuple[str, ...]
    build_sets: tuple[BuildSet, ...]
    backend_order: tuple[str, ...]
    toolkits: dict[str, Any]

    def cuda_default_archs(self, cuda: Version) -> list[str]:
        for entry in self.toolkits["cuda"]["default-archs"]:
            if cuda >= Version.parse(entry["min-version"]):
                return list(entry["archs"])
        raise AssertionError("matrix.json: the last default-archs entry must have min-version 0")

    def rocm_archs(self) -> list[str]:
        return list(self.toolkits["rocm"]["archs"])

    def macos_target(self, backend: str) -> Version | None:
        target = self.toolkits["macos-deployment-target"].get(backend)
        return Version.parse(target) if target else None


def _optional_version(text: str | None) -> Version | None:
    return Version.parse(text) if text else None


@cache
def matrix_data() -> dict[str, Any]:
    """matrix.json as plain data (read-only: it is shared), as Nix reads it."""
    data: dict[str, Any] = json.loads(
        resources.files("kernelnix.data").joinpath("matrix.json").read_text()
    )
    return data


# The names of the Nix toolchains (nix/toolchains/<name>/). The Nix library
# reads the same list from matrix.json.
TOOLCHAINS: tuple[str, ...] = tuple(matrix_data()["toolchains"])


def _build_set(entry: dict[str, Any]) -> BuildSet:
    return BuildSet(
        torch=Version.parse(entry["torch"]),
        backend=entry["backend"],
        version=_optional_version(entry.get("version")),
        systems=tuple(entry["systems"]),
        bundle=bool(entry.get("bundle", False)),
        tvm_ffi=_optional_version(entry.get("tvm-ffi")),
    )


def load_matrix(build_sets: tuple[BuildSet, ...] | None = None) -> Matrix:
    """kernelnix's matrix; `build_sets` replaces its build sets (a flake's `torchVersions`)."""
    data = matrix_data()
    if build_sets is None:
        build_sets = tuple(_build_set(entry) for entry in data["build-sets"])
    return Matrix(
        tuple(data["systems"]), build_sets, tuple(data["backend-order"]), data["toolkits"]
    )


# Backends with a version in their build sets (`cu126`, `rocm71`, `xpu20253`).
VERSIONED_BACKENDS = ("cuda", "rocm", "xpu")
_FIELDS = {
    "torch": str,
    "backend": str,
    "version": str,
    "systems": list,
    "bundle": bool,
    "tvm-ffi": str,
}
_REQUIRED = ("torch", "backend", "systems")


def _build_set_errors(entry: object, key: str) -> list[tuple[str, str]]:
    """What is wrong with one entry of a `build-sets` list: (key path, problem) pairs."""
    if not isinstance(entry, dict):
        return [(key, f"expected an object, got {type(entry).__name__}")]
    matrix = matrix_data()
    problems = [(f"{key}.{name}", "unknown field") for name in entry if name not in _FIELDS]
    problems += [(f"{key}.{name}", "missing") for name in _REQUIRED if name not in entry]
    problems += [
        (f"{key}.{name}", f"expected a {kind.__name__}")
        for name, kind in _FIELDS.items()
        if name in entry and not isinstance(entry[name], kind)
    ]
    if problems:
        return problems
    for name in ("torch", "version", "tvm-ffi"):
        try:
            _optional_version(entry.get(name))
        except ValueError as exc:
            problems.append((f"{key}.{name}", str(exc)))
    backend = entry["backend"]
    if backend not in matrix["backend-order"]:
        known = ", ".join(matrix["backend-order"])
        problems.append(
            (f"{key}.backend", f"{backend!r} is not a backend kernelnix builds ({known})")
        )
    elif (backend in VERSIONED_BACKENDS) != ("version" in entry):
        needed = "needs" if backend in VERSIONED_BACKENDS else "takes no"
        problems.append((f"{key}.version", f"backend {backend!r} {needed} a version"))
    unknown = [s for s in entry["systems"] if s not in matrix["systems"]]
    if unknown:
        known = ", ".join(matrix["systems"])
        problems.append((f"{key}.systems", f"unknown system {unknown[0]!r} (known: {known})"))
    return problems


def read_build_sets(path: Path) -> tuple[BuildSet, ...]:
    """The build sets of a matrix file (`{"build-sets": [...]}`, in matrix.json's form)."""
    where = display_path(path)
    fix = "write build sets in the form of kernelnix/data/matrix.json's `build-sets`"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError.single(f"cannot read the matrix: {exc}", file=where, fix=fix) from None
    entries = data.get("build-sets") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise UserError.single(
            "expected an object with a list", file=where, key="build-sets", fix=fix
        )
    problems = [
        problem
        for i, entry in enumerate(entries)
        for problem in _build_set_errors(entry, f"build-sets[{i}]")
    ]
    if problems:
        raise UserError([Diagnostic(m, file=where, key=k, fix=fix) for k, m in problems])
    return tuple(_build_set(entry) for entry in entries)
