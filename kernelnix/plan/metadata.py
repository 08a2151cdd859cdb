"""metadata.json: the reference's fields and kebab-case keys, per backend.

What we write must be accepted unchanged by the `kernels` loader's parser.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, Literal

from kernelnix import __version__
from kernelnix.config.model import BuildConfig, KernelDependencyRef
from kernelnix.config.types import Backend, KernelName, NonNegativeInt
from kernelnix.schema import Model, field

BUILDER_VERSION = f"kernelnix {__version__}"


class BackendInfo(Model):
    type: Backend
    archs: list[str] | None = None


class Digest(Model):
    algorithm: Literal["sha256", "sha512"]
    files: dict[str, str]


class BuilderVersion(Model):
    version: str
    commit: str | None = None
    dirty: bool | None = None


class KernelGit(Model):
    commit: str
    dirty: bool


class BuildProvenance(Model):
    """kernelnix's own record: which toolchain built it and whether it may be shared."""

    toolchain: str
    redistributable: bool


class Provenance(Model):
    kernel_builder: BuilderVersion
    kernel: KernelGit | None = None
    kernelnix: BuildProvenance | None = None


class Metadata(Model):
    """One variant's metadata.json, fields in the reference's order."""

    name: KernelName
    id: str
    version: NonNegativeInt
    license: str
    upstream: str | None = None
    source: str | None = None
    python_depends: list[str]
    kernel_depends: list[KernelDependencyRef] = field([])
    backend: BackendInfo
    digest: Digest | None = None
    provenance: Provenance | None = None

    def to_json_text(self) -> str:
        return json.dumps(self.to_data(exclude_none=True), indent=2) + "\n"


@cache
def python_dependency_table() -> dict[str, Any]:
    text = resources.files("kernelnix.data").joinpath("python_dependencies.json").read_text()
    return json.loads(text)


class UnknownPythonDependency(ValueError):
    """A python-depends name the loader would refuse."""


def python_depends_for(config: BuildConfig, backend: str) -> list[str]:
    """General names, then the backend's; each checked against the known table."""
    table = python_dependency_table()
    for name in config.general.python_depends:
        if name not in table["general"]:
            raise UnknownPythonDependency(
                f"general.python-depends: unknown dependency {name!r}; known: "
                f"{', '.join(sorted(table['general']))}"
                + (
                    f" (and for {backend}: {', '.join(table['backends'][backend])})"
                    if table["backends"].get(backend)
                    else ""
                )
            )
    names = list(config.general.python_depends)
    backend_table = getattr(config.general, backend, None)
    own = list(getattr(backend_table, "python_depends", []) or [])
    if own and backend not in table["backends"]:
        raise UnknownPythonDependency(
            f"general.{backend}.python-depends: no Python dependencies are defined for "
            f"backend {backend!r}; remove the list"
        )
    for name in own:
        if name not in table["backends"][backend]:
            known = ", ".join(sorted(table["backends"][backend])) or "none"
            raise UnknownPythonDependency(
                f"general.{backend}.python-depends: unknown dependency {name!r} for backend "
                f"{backend!r}; known: {known}"
            )
    return names + own


def python_imports(names: list[str], backend: str) -> list[str]:
    """The import names of python-depends (for the Python import rule)."""
    table = python_dependency_table()
    imports = []
    for name in names:
        entry = table["general"].get(name) or table["backends"].get(backend, {}).get(name, {})
        imports += [p["import"] for p in entry.get("python", []) if "import" in p]
    return imports


def kernel_depends_for(config: BuildConfig, backend: str) -> list[KernelDependencyRef]:
    backend_table = getattr(config.general, backend, None)
    return [*config.general.kernel_depends, *getattr(backend_table, "kernel_depends", [])]


def noarch_archs(config: BuildConfig, backend: str) -> list[str] | None:
    noarch = config.torch_noarch
    if noarch is None:
        return None
    return {"cuda": noarch.cuda_capabilities, "rocm": noarch.rocm_archs}.get(backend)


def metadata_for_backend(
    config: BuildConfig,
    backend: str,
    kernel_id: str,
    archs: list[str] | None = None,
    provenance: Provenance | None = None,
) -> Metadata:
    general = config.general
    return Metadata(
        name=general.name,
        id=kernel_id,
        version=general.version,
        license=general.license,
        upstream=general.upstream,
        source=general.source,
        python_depends=python_depends_for(config, backend),
        kernel_depends=kernel_depends_for(config, backend),
        backend=BackendInfo(type=backend, archs=archs),  # type: ignore[arg-type]
        provenance=provenance,
    )
