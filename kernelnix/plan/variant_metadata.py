"""The metadata.json a variant gets from build.toml: its Python and kernel
dependencies, its archs, and the model of kernelnix.plan.metadata built from them."""

from __future__ import annotations

from kernelnix.config.model import BuildConfig
from kernelnix.config.tables import KernelDependencyRef
from kernelnix.core.diagnostics import ConfigValueError
from kernelnix.plan.metadata import (
    BackendInfo,
    Metadata,
    Provenance,
    loader_releases,
    python_dependency_table,
)


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


def kernel_depends_for(config: BuildConfig, backend: str) -> list[KernelDependencyRef]:
    backend_table = getattr(config.general, backend, None)
    return [*config.general.kernel_depends, *getattr(backend_table, "kernel_depends", [])]


def noarch_archs(config: BuildConfig, backend: str) -> list[str] | None:
    noarch = config.torch_noarch
    if noarch is None:
        return None
    return {"cuda": noarch.cuda_capabilities, "rocm": noarch.rocm_archs}.get(backend)


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def kernels_minver_for(kind: str, kernel_depends: list[KernelDependencyRef]) -> str:
    """The oldest loader release that loads a variant of `kind` using these features:
    the newest of their first releases (kernelnix/data/loader-releases.json)."""
    releases = loader_releases()
    needed = [releases["variant-kinds"][kind]]
    if kernel_depends:
        needed.append(releases["features"]["kernel-depends"])
    return max(needed, key=_release)


def metadata_for_backend(
    config: BuildConfig,
    backend: str,
    kind: str,
    kernel_id: str,
    archs: list[str] | None = None,
    provenance: Provenance | None = None,
) -> Metadata:
    general = config.general
    kernel_depends = kernel_depends_for(config, backend)
    # Unvalidated: the values are the validated config's (see kernelnix.plan.build).
    return Metadata.model_construct(
        name=general.name,
        id=kernel_id,
        version=general.version,
        kernels_minver=kernels_minver_for(kind, kernel_depends),
        license=general.license,
        upstream=general.upstream,
        source=general.source,
        python_depends=python_depends_for(config, backend),
        kernel_depends=kernel_depends,
        backend=BackendInfo.model_construct(type=backend, archs=archs),
        provenance=provenance,
    )
