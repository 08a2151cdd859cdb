"""Where a build finds the headers of its kernels' dependencies (CUTLASS, ...).

In order: the directory named by `--dependency cutlass_3_8=DIR` or the environment
variable `KERNELNIX_DEP_<NAME>` (`KERNELNIX_DEP_CUTLASS_3_8=/src/cutlass/include`;
the option sets the variable), else the pip package of the
build's Python that ships them (PyPI's `nvidia-cutlass` wheels carry CUTLASS's
headers under `cutlass_library/source/include`). The version is read from the
headers themselves and must have the major.minor the dependency names: CUTLASS 3.9
is never used for `cutlass_3_8`. A missing or mismatched dependency is an error
that names it, the version wanted, what was found and how to provide it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelnix.core.diagnostics import UserError
from kernelnix.core.version import Version
from kernelnix.host.environments import header_wheel_locked
from kernelnix.plan.dependencies import HeaderDependency, header_dependencies
from kernelnix.plan.model import Plan, PlanVariant

_DEFINE = re.compile(r"^\s*#\s*define\s+CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class ResolvedDependency:
    key: str
    include: Path
    version: Version
    source: str  # how it was found, for messages: "KERNELNIX_DEP_CUTLASS_3_8", "nvidia-cutlass"
    extra: tuple[Path, ...] = ()  # its extra include directories that exist, after it

    @property
    def includes(self) -> list[Path]:
        return [self.include, *self.extra]


def environment_variable(key: str) -> str:
    return "KERNELNIX_DEP_" + re.sub(r"[^A-Za-z0-9]", "_", key).upper()


def dependency_locations(values: tuple[str, ...]) -> dict[str, str]:
    """`--dependency NAME=DIR` options as the environment variables they stand for."""
    known = header_dependencies()
    found = {}
    for value in values:
        name, separator, directory = value.partition("=")
        if not separator or not directory or name not in known:
            raise UserError.single(
                f"invalid --dependency {value!r}",
                key="--dependency",
                fix=f"give NAME=DIR, NAME one of: {', '.join(known)}",
            )
        found[environment_variable(name)] = str(Path(directory).resolve())
    return found


def needed_dependencies(plan: Plan, variant: PlanVariant) -> list[str]:
    """The header dependencies of the kernels `variant` compiles, each once."""
    known = header_dependencies()
    names = [d for kernel in variant.compile for d in plan.kernels[kernel].depends if d in known]
    return list(dict.fromkeys(names))


def header_version(include: Path, dependency: HeaderDependency) -> Version | None:
    """The version the headers under `include` declare, or None when they are not there."""
    header = include / dependency.header
    if not header.is_file():
        return None
    found = dict(_DEFINE.findall(header.read_text(errors="replace")))
    if "MAJOR" not in found or "MINOR" not in found:
        return None
    return Version.parse(f"{found['MAJOR']}.{found['MINOR']}.{found.get('PATCH', '0')}")


def _python_include(dependency: HeaderDependency) -> Path | None:
    if dependency.python_package is None or dependency.python_include is None:
        return None
    spec = importlib.util.find_spec(dependency.python_package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / dependency.python_include


def _how_to_provide(dependency: HeaderDependency) -> str:
    wanted = dependency.version.major_minor()
    variable = environment_variable(dependency.key)
    if dependency.wheel and header_wheel_locked(dependency.key):
        return (
            f"install it: `{sys.executable} -m pip install '{dependency.wheel}=={wanted}.*'`, "
            f"or set {variable}=<the include directory of {dependency.name} {wanted}> "
            f"(the directory holding {dependency.header})"
        )
    # PyPI has no wheel of the release (CUTLASS 4.0): its source release has the headers.
    release = dependency.release
    return (
        f"clone its release: `git clone --depth 1 --branch {release.tag} "
        f"https://github.com/{release.owner}/{release.repo}`, and set "
        f"{variable}=<the clone>/{release.include} (a Nix build fetches the release itself)"
    )


def resolve_dependency(key: str) -> ResolvedDependency:
    """The include directory of dependency `key` on this machine; UserError otherwise."""
    dependency = header_dependencies()[key]
    variable = environment_variable(key)
    given = os.environ.get(variable)
    if given:
        candidates = [(Path(given), variable)]
    else:
        python = _python_include(dependency)
        source = f"the {dependency.wheel} package of {sys.executable}"
        candidates = [(python, source)] if python is not None else []
    wanted = dependency.version
    for include, source in candidates:
        found = header_version(include, dependency)
        if found is None:
            raise UserError.single(
                f"dependency {dependency.describe()}: {include} (from {source}) has no "
                f"{dependency.header}",
                key=variable,
                fix=_how_to_provide(dependency),
            )
        if found.major_minor() != wanted.major_minor():
            raise UserError.single(
                f"dependency {dependency.describe()} wants {dependency.name} "
                f"{wanted.major_minor()}, but {include} (from {source}) holds "
                f"{dependency.name} {found}",
                key=variable,
                fix=_how_to_provide(dependency),
            )
        extra = tuple(
            path
            for path in (Path(os.path.normpath(include / e)) for e in dependency.extra_includes)
            if path.is_dir()
        )
        return ResolvedDependency(key, include, found, source, extra)
    raise UserError.single(
        f"dependency {dependency.describe()} was not found: {variable} is not set and "
        f"{sys.executable} has no {dependency.wheel or dependency.python_package} package",
        key=variable,
        fix=_how_to_provide(dependency),
    )


def dependency_definitions(plan: Plan, variant: PlanVariant) -> list[str]:
    """`-DKERNELNIX_DEP_<key>=<include>[;<extra include>...]` for each dependency the
    variant's kernels need (a CMake list: the include directory, then its extra ones)."""
    definitions = []
    for key in needed_dependencies(plan, variant):
        resolved = resolve_dependency(key)
        dependency = header_dependencies()[key]
        pinned = dependency.version
        note = "" if resolved.version == pinned else f"; kernel-builder pins {pinned}"
        print(
            f"dependency {key}: {dependency.name} {resolved.version} at "
            f"{resolved.include} ({resolved.source}{note})"
            + "".join(f", and {extra}" for extra in resolved.extra),
            flush=True,
        )
        definitions.append(f"-DKERNELNIX_DEP_{key}={';'.join(map(str, resolved.includes))}")
    return definitions
