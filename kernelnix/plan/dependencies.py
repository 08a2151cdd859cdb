"""What a kernel's `depends` give its sources: header-only libraries (CUTLASS), each
with the release it names, from kernelnix/data/dependencies.json.

The plan says which dependency a kernel needs; where its headers are on a machine
is the build's business (kernelnix.compile.dependencies), so the plan stays the
same everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from kernelnix.core.version import Version


@dataclass(frozen=True)
class Release:
    """The GitHub release kernel-builder fetches a dependency from, which a Nix build
    fetches where the lock has no wheel of it (nix/toolchains/host/header-depends.nix)."""

    owner: str
    repo: str
    tag: str
    include: str  # the include directory, relative to the release's top folder

    def describe(self) -> str:
        return f"{self.owner}/{self.repo} {self.tag}"


@dataclass(frozen=True)
class HeaderDependency:
    """A `depends` entry that puts an include directory on a kernel's sources."""

    key: str  # the name in build.toml: cutlass_3_8
    name: str  # CUTLASS
    version: Version  # the release kernel-builder pins: 3.8.0
    header: str  # cutlass/version.h: proves the directory and holds the version
    python_package: str | None  # cutlass_library: where a pip package ships the headers
    python_include: str | None  # source/include, under that package
    wheel: str | None  # nvidia-cutlass: that package on PyPI
    release: Release
    # Directories relative to the include directory, added after it where they exist:
    # CUTLASS's ../tools/util/include (cutlass/util/), beside include/ in its source
    # tree and its pip wheel, inside include/ once CUTLASS is installed.
    extra_includes: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.name} {self.version.major_minor()} (`{self.key}`)"


@cache
def header_dependencies() -> dict[str, HeaderDependency]:
    text = resources.files("kernelnix.data").joinpath("dependencies.json").read_text()
    return {
        key: HeaderDependency(
            key=key,
            name=entry["name"],
            version=Version.parse(entry["version"]),
            header=entry["header"],
            python_package=entry.get("python-package"),
            python_include=entry.get("python-include"),
            wheel=entry.get("wheel"),
            release=Release(
                entry["release"]["owner"],
                entry["release"]["repo"],
                entry["release"]["tag"],
                entry["release"]["include"],
            ),
            extra_includes=tuple(entry.get("extra-includes", ())),
        )
        for key, entry in json.loads(text)["dependencies"].items()
    }


def kernel_header_dependencies(depends: list[str]) -> list[str]:
    """The entries of a kernel's `depends` that give it headers, in their order."""
    known = header_dependencies()
    return [name for name in depends if name in known]
