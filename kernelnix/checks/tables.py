"""The data tables the rules consult, loaded once from kernelnix/data/."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kernelnix.core.version import Version
from kernelnix.plan.metadata import python_imports
from kernelnix.variants.names import VariantName, build_set_key


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
def runtime_library_matcher(backend: str | None, kind: str | None = None) -> re.Pattern[str]:
    """One compiled pattern for the loader, the framework's (Torch's, or TVM FFI's
    for a `tvm-ffi` variant `kind`) and the backend runtime's libraries."""
    data = _runtime_libraries()
    patterns = [*data["loader"], *data["frameworks"].get(kind, data["torch"])]
    if backend is not None:
        patterns += data["backends"].get(backend, [])
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def runtime_library_kinds(backend: str | None, kind: str | None = None) -> str:
    """How the allowed runtime libraries are described in messages."""
    data = _runtime_libraries()
    framework = "TVM FFI's library" if kind in data["frameworks"] else "Torch's libraries"
    if backend and data["backends"].get(backend):
        return f"{framework} and the {backend} runtime's"
    return framework


@cache
def _python_imports() -> dict[str, Any]:
    return json.loads(_data_text("python-imports.json"))


# Builds of Torch the lock cannot hold stand in for by its CUDA builds: the ROCm and
# XPU wheels are on the PyTorch index only, and like the CUDA wheels each requires
# its Triton (pytorch-triton-rocm, pytorch-triton-xpu); a `universal` variant (an
# older name) is a Triton kernel for any GPU.
TORCH_BACKEND_OF = {"universal": "cuda", "rocm": "cuda", "xpu": "cuda"}


@dataclass(frozen=True)
class LoadTimeModules:
    """What loads with every kernel of a variant, from kernelnix/data/python-imports.json
    (`kernelnix lock-wheels` derives it from the locked wheels' metadata): torch,
    the top-level modules of what its Torch requires and of what the loader requires."""

    modules: frozenset[str]
    environment: str  # `Torch 2.14.1+cu130 or by the kernels 0.17.2 loader`
    # Modules other builds of Torch bring -> which: for the message of a refused one.
    elsewhere: dict[str, str]


def load_time_modules(name: VariantName | None, backend: str | None) -> LoadTimeModules:
    """The modules every kernel of the variant `name` (of `backend`) may import at load time."""
    data = _python_imports()
    loader = data["loader"]
    loader_modules = {m for modules in loader["requires"].values() for m in modules}
    entries = _torch_entries(data["torch"], name, backend)
    torch_modules = set.intersection(*map(_modules, entries)) if entries else set()
    modules = {"torch", *torch_modules, *loader_modules}
    torch = _torch_label(entries, backend)
    elsewhere = {
        module: f"the {' and '.join(sorted(names))} builds of Torch"
        for module, names in _torch_backends_of_modules().items()
        if module not in modules
    }
    return LoadTimeModules(
        frozenset(modules), f"{torch} or by the kernels {loader['kernels']} loader", elsewhere
    )


def _modules(entry: dict[str, Any]) -> set[str]:
    """The modules of what one locked build of Torch requires."""
    return {module for modules in entry["requires"].values() for module in modules}


def _backend_of(key: str) -> str:
    """`cuda` of the build set key `2.14-cuda-13`."""
    return key.split("-")[1]


@cache
def _torch_backends_of_modules() -> dict[str, frozenset[str]]:
    """Module -> the backends of the locked Torch builds that require it."""
    backends: dict[str, set[str]] = {}
    for by_key in _python_imports()["torch"].values():
        for key, entry in by_key.items():
            for module in _modules(entry):
                backends.setdefault(module, set()).add(_backend_of(key))
    return {module: frozenset(names) for module, names in backends.items()}


def _torch_entries(
    by_system: dict[str, Any], name: VariantName | None, backend: str | None
) -> list[dict[str, Any]]:
    """The lock's Torch builds a variant loads in: its build set's for a Torch
    variant, else every locked build of its backend (noarch, stable ABI, tvm-ffi)."""
    if name is not None and name.kind == "arch" and name.system and name.framework_version:
        version = str(name.backend_version) if name.backend_version else None
        key = build_set_key(str(name.framework_version), name.backend, version)
        found = by_system.get(name.system, {}).get(key)
        if found is not None:
            return [found]
    wanted = TORCH_BACKEND_OF.get(backend or "", backend or "")
    systems = [name.system] if name is not None and name.system else list(by_system)
    return [
        entry
        for system in systems
        for key, entry in sorted(by_system.get(system, {}).items())
        if _backend_of(key) == wanted
    ]


def _torch_label(entries: list[dict[str, Any]], backend: str | None) -> str:
    if len(entries) == 1:
        return f"Torch {entries[0]['torch']}"
    if entries:
        releases = sorted({e["torch"].partition("+")[0] for e in entries}, key=Version.parse)
        return f"the {backend} builds of Torch {releases[0]} to {releases[-1]}"
    return f"Torch for {backend} (its requirements are not locked)"


def python_depends_imports(names: Iterable[str], backend: str | None) -> list[str]:
    """Import names for python-depends entries, via the shared dependency table."""
    return python_imports(list(names), backend or "")
