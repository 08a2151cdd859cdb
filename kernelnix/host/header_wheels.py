"""The wheels of header dependencies (build.toml `depends`: CUTLASS) that the
hermetic toolchain fetches, locked by `kernelnix lock-wheels --only header-depends`.

For each dependency of kernelnix/data/dependencies.json that a pip package ships
(`wheel`: PyPI's nvidia-cutlass carries CUTLASS's headers), the newest wheel of
the major.minor it names (`cutlass_3_8` -> nvidia-cutlass 3.8.*), per system:

    header-depends: system -> dependency -> {wheel: file} | {missing: why}

The wheels are pure (`py3-none-any`), so every system locks the same file; the
entry is per system like the lock's other parts. A dependency PyPI has no wheel
of (CUTLASS 4.0) is `missing`, with the releases it has: a Nix build then fetches
the GitHub release dependencies.json pins (nix/toolchains/host/header-depends.nix),
so it is a note, not a failure of `lock-wheels`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion

from kernelnix.host.environments import HEADER_DEPENDS_KEY
from kernelnix.host.host_wheels import (
    DEFAULT_PYTHON_TAGS,
    LOCK_SYSTEMS,
    Resolver,
    Target,
    update_host_part,
)
from kernelnix.plan.dependencies import HeaderDependency, header_dependencies


def _releases(resolver: Resolver, wheel: str) -> str:
    """The releases of `wheel` on the index, oldest first: `3.3.0.0, 4.2.0.0`."""
    versions = set()
    for file in resolver.index(wheel):
        # A file name that is not a wheel's (an sdist, a mangled upload), as Resolver.best.
        try:
            versions.add(parse_wheel_filename(file.filename)[1])
        except (ValueError, InvalidVersion):
            continue
    return ", ".join(str(v) for v in sorted(versions)) or "none"


def lock_dependency(
    resolver: Resolver, dependency: HeaderDependency, system: str
) -> dict[str, str]:
    """`{wheel: file}` of the newest wheel of `dependency`'s major.minor for
    `system`, or `{missing: why}`."""
    assert dependency.wheel is not None
    series = f"{dependency.version.major_minor()}.*"
    try:
        # Pure wheels: any Python tag selects them.
        file = resolver.best(
            dependency.wheel, SpecifierSet(f"=={series}"), Target(system, DEFAULT_PYTHON_TAGS[0])
        )
    except (OSError, ValueError) as error:
        return {"missing": f"cannot read the {dependency.wheel} wheels on PyPI: {error}"}
    if file is None:
        releases = _releases(resolver, dependency.wheel)
        return {"missing": f"PyPI has no {dependency.wheel} {series} wheel (it has {releases})"}
    resolver.files.setdefault(file.filename, file)
    return {"wheel": file.filename}


def lock_header_depends(
    resolver: Resolver, systems: Iterable[str] = LOCK_SYSTEMS
) -> dict[str, dict[str, dict[str, str]]]:
    """The `header-depends` part of `systems`: every dependency a wheel ships."""
    shipped = {k: d for k, d in header_dependencies().items() if d.wheel is not None}
    return {
        system: {key: lock_dependency(resolver, d, system) for key, d in shipped.items()}
        for system in systems
    }


def lock_header_file(
    path: Path, pypi: str, log: Callable[[str], None], systems: Iterable[str] = LOCK_SYSTEMS
) -> list[str]:
    """Lock the header dependencies' wheels of `systems` into the lock file at
    `path`; those PyPI has no wheel of, with why and what Nix builds take instead
    (one line each)."""
    systems = tuple(systems)
    resolver = Resolver(pypi, log)
    part = lock_header_depends(resolver, systems)
    update_host_part(path, {HEADER_DEPENDS_KEY: part}, systems, resolver)
    known = header_dependencies()
    return sorted(
        {
            f"header-depends {key}: {entry['missing']}; Nix builds fetch its release, "
            f"{known[key].release.describe()}"
            for by_key in part.values()
            for key, entry in by_key.items()
            if "missing" in entry
        }
    )
