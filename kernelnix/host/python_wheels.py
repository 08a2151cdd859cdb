"""The Python packages around a variant's Torch, locked from the wheels' metadata.

`kernelnix lock-wheels` resolves two things here, beside the build sets of
kernelnix.host.host_wheels:

- **python-depends** (`host.python-depends` of kernelnix/data/wheel-lock.json):
  for every name of kernelnix/data/python_dependencies.json (the `kernels`
  loader's list), per system and Python tag, the wheels of its pip packages
  and of everything they require, Torch excepted (a variant has its own):

      python-depends: system -> Python tag -> name ->
          {wheels: [file...], alternatives?: [[file...]...]} | {missing: why}

  A variant's environment holds those of its python-depends, so its import
  check and ci-test see what `pip install` of the kernel's dependencies gives.
  A package whose `lock` is a list locks each release it names: `wheels` the
  first, `alternatives` the others. The loader accepts any release, and no one
  release serves every kernel (nvidia-cutlass-dsl 4.6 removed what 4.5's users
  call), so a variant is checked with the first that it loads with
  (kernelnix.host.environments.locked_python_depends gives them in order).
- **what loads with every kernel** (kernelnix/data/python-imports.json, which
  kernelnix.checks.tables reads): the top-level modules of the distributions
  that the Torch wheel of each build set requires, and of those the `kernels`
  loader requires. Only direct requirements count, with their markers
  evaluated for the system and every locked Python tag: they are what Torch
  and the loader promise; what those require in turn may change in any release.
  A CPU build set locked on Torch's CUDA wheel (PyPI has no CPU one) counts
  without what the CUDA build adds over the CPU build (`is_cuda_flavor`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernelnix.core.fileio import write_atomic
from kernelnix.host.environments import each_release
from kernelnix.host.hermetic_wheels import open_wheel, read_lock
from kernelnix.host.host_wheels import (
    LOCK_COMMAND,
    LOCK_SYSTEMS,
    Resolver,
    Target,
    not_cuda_python,
    requires_dist,
    update_host_part,
)
from kernelnix.plan.metadata import python_dependency_table

IMPORTS_FILE = Path(__file__).resolve().parents[1] / "data" / "python-imports.json"
IMPORTS_COMMENT = (
    "Written by `kernelnix lock-wheels` (kernelnix/host/python_wheels.py) from the locked wheels' "
    "metadata: the top-level modules of what each build set's Torch wheel and the kernels loader "
    "require (Requires-Dist, markers evaluated for the system and every locked Python tag). "
    "kernelnix.checks.tables reads it: a kernel may import these at load time."
)
# What a CUDA build of Torch requires beyond its CPU build of the same release:
# NVIDIA's libraries and CUDA Python packages (tests/host/test_python_wheels.py
# compares the two builds' metadata).
NVIDIA_PREFIXES = ("nvidia-", "cuda-toolkit")


def is_cuda_flavor(name: str) -> bool:
    """Whether a requirement of Torch's CUDA wheel is absent from its CPU wheel."""
    name = str(canonicalize_name(name))
    return name.startswith(NVIDIA_PREFIXES) or not not_cuda_python(name)


def _not_torch(name: str) -> bool:
    return canonicalize_name(name) != "torch"


def depends_packages(table: dict[str, Any]) -> dict[str, list[list[str]]]:
    """python-depends name -> the requirements to lock, one list per release
    (the preferred first), from python_dependencies.json: a package's `lock`
    requirement (or its list of them) where it has one, else the package. A
    package with fewer `lock` entries than another of the same name keeps its last."""
    entries = [table["general"], *table["backends"].values()]
    found: dict[str, list[list[str]]] = {}
    for group in entries:
        for name, entry in group.items():
            found[name] = each_release(
                [_lock_choices(package) for package in entry.get("python", [])]
            )
    return found


def _lock_choices(package: dict[str, Any]) -> list[str]:
    lock = package.get("lock", package["pkg"])
    return [lock] if isinstance(lock, str) else list(lock)


def lock_python_depends(
    resolver: Resolver,
    table: dict[str, Any],
    python_tags: Iterable[str],
    log: Callable[[str], None],
    systems: Iterable[str] = LOCK_SYSTEMS,
) -> dict[str, Any]:
    """`host.python-depends` of `systems`: each name's wheels per system and
    Python tag, or why not."""
    locked: dict[str, Any] = {}
    for system in systems:
        for python in python_tags:
            target = Target(system, python)
            names: dict[str, Any] = {}
            for name, releases in sorted(depends_packages(table).items()):
                log(f"resolving python-depends {name} for {python} {system}")
                names[name] = _lock_releases(resolver, releases, target)
            locked.setdefault(system, {})[python] = names
    return locked


def _lock_releases(resolver: Resolver, releases: list[list[str]], target: Target) -> dict[str, Any]:
    """One name's lock entry: the wheels of each release's requirements and of
    what they require, or why one of them cannot be locked."""
    closures = []
    for packages in releases:
        roots = [Requirement(package) for package in packages]
        try:
            found = resolver.closure(roots, target, {}, follows=_not_torch)
        except (OSError, ValueError) as error:
            found = f"cannot read its index page or a wheel's metadata: {error}"
        if isinstance(found, str):
            return {"missing": f"{found}; run `{LOCK_COMMAND}` to lock it anew"}
        closures.append(found)
    first, *others = closures
    return {"wheels": first, **({"alternatives": others} if others else {})}


@functools.cache
def top_level_modules(url: str) -> tuple[str, ...]:
    """The top-level modules a wheel installs (packages, modules, extensions)."""
    with open_wheel(url) as wheel:
        names = wheel.namelist()
    modules = set()
    for name in names:
        first, slash, _ = name.partition("/")
        if first.endswith((".dist-info", ".data")) or first == "__pycache__":
            continue
        if slash:
            modules.add(first)
        elif first.endswith(".py"):
            modules.add(first.removesuffix(".py"))
        elif first.endswith(".so"):
            modules.add(first.split(".")[0])
    return tuple(sorted(modules))


def required_modules(
    resolver: Resolver,
    requires: list[str],
    targets: list[Target],
    keep: Callable[[str], bool],
) -> dict[str, list[str]]:
    """Distribution -> modules, for the requirements among `requires` that apply
    to every target (no extra) and that `keep` accepts."""
    found: dict[str, list[str]] = {}
    for line in requires:
        requirement = Requirement(line)
        name = str(canonicalize_name(requirement.name))
        marker = requirement.marker
        applies = marker is None or all(
            marker.evaluate(target.marker_environment()) for target in targets
        )
        if not applies or not keep(name) or name in found:
            continue
        file = resolver.best(requirement.name, requirement.specifier, targets[0])
        if file is None:
            resolver.log(f"  no wheel of {requirement} on PyPI: its modules are not counted")
            continue
        found[name] = list(top_level_modules(file.url))
    return dict(sorted(found.items()))


def load_time_imports(
    resolver: Resolver, host: dict[str, Any], loader: dict[str, Any]
) -> dict[str, Any]:
    """kernelnix/data/python-imports.json's content from the locked Torch wheels
    (`host`: the lock's host part) and the kernels loader (`loader`: the lock's
    `python.kernels` part), with the markers of every Python tag locked for a system."""
    environments = host.get("environments", {})
    torch: dict[str, Any] = {}
    for system, by_tag in environments.items():
        targets = [Target(system, tag) for tag in by_tag]
        if not targets:
            continue
        keys = set.intersection(*(set(by_tag[target.python]) for target in targets))
        for key in sorted(keys):
            entry = by_tag[targets[0].python][key]
            url = host["wheels"][entry["wheels"][0]]["url"]
            cpu_on_cuda = key.endswith("-cpu") and "+cu" in entry["torch"]
            keep = (lambda n: not is_cuda_flavor(n)) if cpu_on_cuda else _not_torch
            modules = required_modules(resolver, requires_dist(url), targets, keep)
            torch.setdefault(system, {})[key] = {"torch": entry["torch"], "requires": modules}
    version = max(loader, key=lambda v: tuple(int(p) for p in v.split(".")), default=None)
    systems = [s for s in LOCK_SYSTEMS if s in (loader[version] if version else {})]
    requires: dict[str, list[str]] = {}
    tags = list(environments.get(systems[0], {})) if systems else []
    if version and tags:
        targets = [Target(systems[0], tag) for tag in tags]
        lines = requires_dist(loader[version][systems[0]]["url"])
        requires = required_modules(resolver, lines, targets, lambda _: True)
    return {
        "comment": IMPORTS_COMMENT,
        "loader": {"kernels": version, "requires": requires},
        "torch": torch,
    }


def lock_python_file(
    path: Path,
    pypi: str,
    python_tags: Iterable[str],
    log: Callable[[str], None],
    systems: Iterable[str] = LOCK_SYSTEMS,
) -> list[str]:
    """Lock the python-depends of `systems` into the lock file at `path` (its host
    part). The names that could not be locked, with why."""
    systems = tuple(systems)
    resolver = Resolver(pypi, log)
    locked = lock_python_depends(resolver, python_dependency_table(), python_tags, log, systems)
    update_host_part(path, {"python-depends": locked}, systems, resolver)
    return [
        f"python-depends {name} {tag} {system}: {entry['missing']}"
        for system, by_tag in locked.items()
        for tag, entries in by_tag.items()
        for name, entry in entries.items()
        if "missing" in entry
    ]


def write_imports(
    lock_path: Path, pypi: str, log: Callable[[str], None], imports_path: Path = IMPORTS_FILE
) -> None:
    """Write `imports_path` (python-imports.json) from the lock file at `lock_path`."""
    data = read_lock(lock_path)
    loader = data.get("python", {}).get("kernels", {})
    imports = load_time_imports(Resolver(pypi, log), data.get("host", {}), loader)
    write_atomic(imports_path, json.dumps(imports, indent=2, sort_keys=True) + "\n")
