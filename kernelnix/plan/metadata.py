"""metadata.json: the reference's fields and kebab-case keys, per backend.

What we write must be accepted unchanged by the `kernels` loader's parser.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import ConfigDict, Field

from kernelnix import __version__
from kernelnix.config.base import FileModel
from kernelnix.config.json_schema import document_schema
from kernelnix.config.model import BuildConfig, KernelDependencyRef
from kernelnix.config.types import Backend, KernelName, NonNegativeInt
from kernelnix.core.diagnostics import ConfigValueError

BUILDER_VERSION = f"kernelnix {__version__}"


class Record(FileModel):
    """A table of metadata.json. kernelnix also builds these in code, by field name;
    a file is still read by its kebab-case keys only (`validate`)."""

    model_config = ConfigDict(validate_by_name=True)


class BackendInfo(Record):
    type: Backend = Field(description="The backend the variant is built for.")
    archs: list[str] | None = Field(
        None, description="The GPU archs the variant's kernels are compiled for."
    )


class Digest(Record):
    """The hashes of the variant's files, as `kernelnix hash` writes them."""

    algorithm: Literal["sha256", "sha512"]
    files: dict[str, str] = Field(
        description="Each file's path in the variant and the base64 of its hash."
    )


class BuilderVersion(Record):
    version: str
    commit: str | None = None
    dirty: bool | None = None


class KernelGit(Record):
    commit: str = Field(description="The kernel's git commit the variant was built from.")
    dirty: bool = Field(description="Whether the work tree had uncommitted changes.")


class BuildProvenance(Record):
    """kernelnix's own record: which toolchain built it and whether it may be shared."""

    toolchain: str
    redistributable: bool
    policy: str | None = Field(
        None,
        description="The check policy the variant passed when it was built "
        "(`kernelnix check` applies it again unless given --policy).",
    )
    development_archs: list[str] | None = Field(
        None, description="A development build's archs (`--cuda-archs`): not publishable."
    )


class Provenance(Record):
    kernel_builder: BuilderVersion = Field(description="The tool that built the variant.")
    kernel: KernelGit | None = None
    kernelnix: BuildProvenance | None = None


def _unknown_keys_allowed(schema: dict[str, Any]) -> None:
    # The loader ignores keys it does not know at the top level; so do `kernelnix
    # check` and `hash`, which validate the known keys only.
    schema["additionalProperties"] = True


class Metadata(Record):
    """A variant's metadata.json, as the `kernels` loader reads it."""

    # The fields are in the reference's order: metadata.json is written in it.

    model_config = ConfigDict(json_schema_extra=_unknown_keys_allowed)

    name: KernelName
    id: str = Field(description="The variant's Torch ops namespace.")
    version: NonNegativeInt
    license: str
    upstream: str | None = None
    source: str | None = None
    python_depends: list[str] = Field(description="Python packages the variant needs.")
    kernel_depends: list[KernelDependencyRef] = Field(
        [], description="Hub kernels the variant needs at run time."
    )
    backend: BackendInfo
    digest: Digest | None = None
    provenance: Provenance | None = None

    def to_json_text(self) -> str:
        return json.dumps(self.to_data(exclude_none=True), indent=2) + "\n"


def metadata_schema() -> dict[str, Any]:
    """The JSON Schema of metadata.json (`kernelnix schema metadata`)."""
    return document_schema(Metadata, "metadata.json")


@cache
def python_dependency_table() -> dict[str, Any]:
    text = resources.files("kernelnix.data").joinpath("python_dependencies.json").read_text()
    return json.loads(text)


class UnknownPythonDependency(ConfigValueError):
    """A python-depends name the loader would refuse."""


_DEPENDS_FIX = (
    "use a name the kernels loader knows (kernelnix/data/python_dependencies.json); "
    "a package it does not know cannot be a run-time dependency of a Hub kernel"
)


def python_depends_for(config: BuildConfig, backend: str) -> list[str]:
    """General names, then the backend's; each checked against the known table."""
    table = python_dependency_table()
    for index, name in enumerate(config.general.python_depends):
        if name not in table["general"]:
            per_backend = "; ".join(
                f"{b}: {', '.join(sorted(names))}"
                for b, names in table["backends"].items()
                if names
            )
            raise UnknownPythonDependency(
                f"unknown dependency {name!r}; known on every backend: "
                f"{', '.join(sorted(table['general']))}",
                key=f"general.python-depends[{index}]",
                fix=f"{_DEPENDS_FIX}; names known on one backend only ({per_backend}) go in "
                "[general.<backend>] python-depends",
            )
    names = list(config.general.python_depends)
    backend_table = getattr(config.general, backend, None)
    own = list(getattr(backend_table, "python_depends", []) or [])
    if own and backend not in table["backends"]:
        raise UnknownPythonDependency(
            f"no Python dependencies are defined for backend {backend!r}",
            key=f"general.{backend}.python-depends",
            fix="remove the list",
        )
    for index, name in enumerate(own):
        if name not in table["backends"][backend]:
            known = ", ".join(sorted(table["backends"][backend])) or "none"
            raise UnknownPythonDependency(
                f"unknown dependency {name!r} for backend {backend!r}; known: {known}",
                key=f"general.{backend}.python-depends[{index}]",
                fix=_DEPENDS_FIX,
            )
    return names + own


@dataclass(frozen=True)
class PythonPackage:
    """A pip package a python-depends entry stands for, and the module it provides."""

    depends: str
    pip: str
    module: str | None


def python_packages(names: list[str], backend: str) -> list[PythonPackage]:
    """The pip packages of python-depends names, from the shared dependency table."""
    table = python_dependency_table()
    packages = []
    for name in names:
        entry = table["general"].get(name) or table["backends"].get(backend, {}).get(name, {})
        found = entry.get("python", [])
        packages += [PythonPackage(name, p["pkg"], p.get("import")) for p in found]
    return packages


def python_imports(names: list[str], backend: str) -> list[str]:
    """The import names of python-depends (for the Python import rule)."""
    return [p.module for p in python_packages(names, backend) if p.module]


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
