"""The supported version matrix: data in `kernelnix/data/matrix.json`, read by
this module and by the Nix library alike."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

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


def load_matrix() -> Matrix:
    data = matrix_data()
    build_sets = tuple(
        BuildSet(
            torch=Version.parse(entry["torch"]),
            backend=entry["backend"],
            version=_optional_version(entry.get("version")),
            systems=tuple(entry["systems"]),
            bundle=bool(entry["bundle"]),
            tvm_ffi=_optional_version(entry.get("tvm-ffi")),
        )
        for entry in data["build-sets"]
    )
    return Matrix(
        tuple(data["systems"]), build_sets, tuple(data["backend-order"]), data["toolkits"]
    )
