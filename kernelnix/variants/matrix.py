"""The supported version matrix: data in `kernelnix/data/matrix.json`, read by
this module and by the Nix library alike."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from pydantic import ValidationError

from kernelnix.config.base import FileModel
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path, format_key_path
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


# matrix.json's `toolkits`: shipped data, checked by tests/variants, typed here.
DefaultArchs = TypedDict("DefaultArchs", {"min-version": str, "archs": list[str]})
CudaToolkit = TypedDict(
    "CudaToolkit", {"supported-archs": list[str], "default-archs": list[DefaultArchs]}
)


class RocmToolkit(TypedDict):
    archs: list[str]


CriImage = TypedDict(
    "CriImage",
    {"comment": str, "marker": str, "offload-targets": list[str], "aot-devices": list[str]},
)
XpuToolkit = TypedDict(
    "XpuToolkit",
    {
        "offload-targets": list[str],
        "aot-devices": list[str],
        "aot-devices-sycl-tla": list[str],
        "sycl-flags": list[str],
        "cri-image": CriImage,
    },
)
Toolkits = TypedDict(
    "Toolkits",
    {
        "cuda": CudaToolkit,
        "rocm": RocmToolkit,
        "xpu": XpuToolkit,
        "macos-deployment-target": dict[str, str],
    },
)


@dataclass(frozen=True)
class Matrix:
    systems: tuple[str, ...]
    build_sets: tuple[BuildSet, ...]
    backend_order: tuple[str, ...]
    toolkits: Toolkits

    def cuda_default_archs(self, cuda: Version) -> list[str]:
        for entry in self.toolkits["cuda"]["default-archs"]:
            if cuda >= Version.parse(entry["min-version"]):
                return list(entry["archs"])
        raise AssertionError("matrix.json: the last default-archs entry must have min-version 0")

    def cuda_supported_archs(self) -> list[str]:
        """Every CUDA capability some CUDA version of the matrix builds (`9.0`, no suffix)."""
        return list(self.toolkits["cuda"]["supported-archs"])

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


class BuildSetEntry(FileModel):
    """An entry of `build-sets`: in matrix.json, a `--matrix` file, a flake's torchVersions."""

    torch: str
    backend: str
    version: str | None = None
    systems: list[str]
    bundle: bool = False
    tvm_ffi: str | None = None

    def build_set(self) -> BuildSet:
        return BuildSet(
            torch=Version.parse(self.torch),
            backend=self.backend,
            version=_optional_version(self.version),
            systems=tuple(self.systems),
            bundle=self.bundle,
            tvm_ffi=_optional_version(self.tvm_ffi),
        )


def load_matrix(build_sets: tuple[BuildSet, ...] | None = None) -> Matrix:
    """kernelnix's matrix; `build_sets` replaces its build sets (a flake's `torchVersions`)."""
    data = matrix_data()
    if build_sets is None:
        build_sets = tuple(BuildSetEntry.validate(e).build_set() for e in data["build-sets"])
    return Matrix(
        tuple(data["systems"]), build_sets, tuple(data["backend-order"]), data["toolkits"]
    )


# Backends with a version in their build sets (`cu126`, `rocm71`, `xpu20253`).
VERSIONED_BACKENDS = ("cuda", "rocm", "xpu")


def _entry_problems(entry: BuildSetEntry, key: str) -> list[tuple[str, str]]:
    """What the model cannot say of a well-formed entry: versions, backend, systems."""
    matrix = matrix_data()
    problems = []
    for name, text in (("torch", entry.torch), ("version", entry.version)):
        try:
            _optional_version(text)
        except ValueError as exc:
            problems.append((f"{key}.{name}", str(exc)))
    try:
        _optional_version(entry.tvm_ffi)
    except ValueError as exc:
        problems.append((f"{key}.tvm-ffi", str(exc)))
    if entry.backend not in matrix["backend-order"]:
        known = ", ".join(matrix["backend-order"])
        problems.append(
            (f"{key}.backend", f"{entry.backend!r} is not a backend kernelnix builds ({known})")
        )
    elif (entry.backend in VERSIONED_BACKENDS) != (entry.version is not None):
        needed = "needs" if entry.backend in VERSIONED_BACKENDS else "takes no"
        problems.append((f"{key}.version", f"backend {entry.backend!r} {needed} a version"))
    unknown = [s for s in entry.systems if s not in matrix["systems"]]
    if unknown:
        known = ", ".join(matrix["systems"])
        problems.append((f"{key}.systems", f"unknown system {unknown[0]!r} (known: {known})"))
    return problems


def _build_set_entry(entry: object, key: str) -> tuple[BuildSetEntry | None, list[tuple[str, str]]]:
    """One entry of a `build-sets` list, or the (key path, problem) pairs of it."""
    try:
        model = BuildSetEntry.validate(entry)
    except ValidationError as exc:
        from kernelnix.config.issues import issues_of  # only a bad file pays for it

        return None, [
            (f"{key}{_sub_key(issue.loc)}", issue.message)
            for issue in issues_of(exc, BuildSetEntry)
        ]
    return model, _entry_problems(model, key)


def _sub_key(loc: tuple[str | int, ...]) -> str:
    path = format_key_path(loc)
    return "" if not path else path if path.startswith("[") else f".{path}"


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
    read = [_build_set_entry(entry, f"build-sets[{i}]") for i, entry in enumerate(entries)]
    problems = [problem for _, found in read for problem in found]
    if problems:
        raise UserError([Diagnostic(m, file=where, key=k, fix=fix) for k, m in problems])
    return tuple(model.build_set() for model, _ in read if model is not None)
