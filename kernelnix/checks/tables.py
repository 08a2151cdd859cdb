"""The data tables the rules consult, loaded once from kernelnix/data/."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from kernelnix.core.version import Version
from kernelnix.plan.metadata import python_imports


def _data_text(name: str) -> str:
    return resources.files("kernelnix").joinpath("data", name).read_text(encoding="utf-8")


def _rows(name: str) -> Iterable[list[str]]:
    for line in _data_text(name).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line.split()


@cache
def python_stable_abi() -> dict[str, Version]:
    """Stable-ABI symbol -> the Python version that added it.

    Every name in the table starts with `Py` or `_Py`, which lets the rule skip
    all other symbols with one prefix test.
    """
    return {row[0]: Version.parse(row[2]) for row in _rows("python-stable-abi.txt")}


@cache
def torch_shim_versions() -> dict[str, Version]:
    """Torch stable-ABI shim function -> the torch version that added it (2.10+)."""
    return {row[0]: Version.parse(row[1]) for row in _rows("torch-stable-shim-versions.txt")}


@cache
def _runtime_libraries() -> dict[str, Any]:
    return json.loads(_data_text("runtime-libraries.json"))


@cache
def runtime_library_matcher(backend: str | None) -> re.Pattern[str]:
    """One compiled pattern for the loader, Torch's and the backend runtime's libraries."""
    data = _runtime_libraries()
    patterns = [*data["loader"], *data["torch"]]
    if backend is not None:
        patterns += data["backends"].get(backend, [])
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def runtime_library_kinds(backend: str | None) -> str:
    """How the allowed runtime libraries are described in messages."""
    data = _runtime_libraries()
    if backend and data["backends"].get(backend):
        return f"Torch's libraries and the {backend} runtime's"
    return "Torch's libraries"


@cache
def _python_imports() -> dict[str, Any]:
    return json.loads(_data_text("python-imports.json"))


def allowed_imports(backend: str | None) -> frozenset[str]:
    """Top-level modules allowed besides the standard library and python-depends."""
    data = _python_imports()
    return frozenset([*data["torch"], *data["backends"].get(backend or "", [])])


def python_depends_imports(names: Iterable[str], backend: str | None) -> list[str]:
    """Import names for python-depends entries, via the shared dependency table."""
    return python_imports(list(names), backend or "")
