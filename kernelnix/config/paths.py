"""Source and include paths of build.toml must stay inside the kernel project.

A path that is absolute, climbs out with `..`, or is a symlink pointing outside
would let a build read (and a bundle ship) files from elsewhere on the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelnix.config.locate import KeyPath
from kernelnix.config.model import BuildConfig


def declared_paths(config: BuildConfig) -> Iterator[tuple[KeyPath, str, bool]]:
    """(key path, value, must exist) for every source and include path."""
    framework = getattr(config, config.framework.replace("-", "_"))
    for key in ("src", "include"):
        for index, value in enumerate(getattr(framework, key, None) or []):
            yield (config.framework, key, index), value, key == "src"
    for name, kernel in config.kernel.items():
        for key in ("src", "include"):
            for index, value in enumerate(getattr(kernel, key)):
                yield ("kernel", name, key, index), value, key == "src"


@dataclass(frozen=True)
class _Directory:
    real: str  # its resolved path
    listing: dict[str, os.DirEntry[str]]
    inside: bool  # whether `real` is the root or under it


class ProjectFiles:
    """Answers questions about paths inside `root`, listing each directory once
    (a project lists thousands of sources in a few directories: one `scandir`
    per directory instead of one `stat` per file)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self._directories: dict[str, _Directory] = {}

    def _directory(self, directory: str) -> _Directory:
        known = self._directories.get(directory)
        if known is None:
            real = os.path.realpath(os.path.join(self.root, directory))
            known = self._directories[directory] = _Directory(
                real, _listing(real), self._inside(real)
            )
        return known

    def _inside(self, resolved: str) -> bool:
        return resolved == self.root or resolved.startswith(self.root + os.sep)

    def _entry(self, value: str) -> tuple[_Directory, str, os.DirEntry[str] | None]:
        """`value`'s directory (resolved), its name, and its directory entry if it exists."""
        directory, _, name = value.rpartition("/")
        known = self._directory(directory)
        return known, name, known.listing.get(name)

    def escape_reason(self, value: str) -> str | None:
        """Why `value` escapes the root, or None when it stays inside."""
        if not value.strip():
            return "the path is empty"
        if os.path.isabs(value):
            return "absolute paths are not allowed"
        if ".." in value and ".." in value.replace("\\", "/").split("/"):
            return "`..` climbs out of the kernel directory"
        directory, name, entry = self._entry(value)
        symlink = entry is not None and entry.is_symlink()
        if directory.inside and not symlink:  # the common case: one verdict per directory
            return None
        resolved = f"{directory.real}/{name}"
        if symlink:
            resolved = os.path.realpath(resolved)
        if not self._inside(resolved):
            return f"it is a symlink that points outside the kernel directory (to {resolved})"
        return None

    def is_file(self, value: str) -> bool:
        """Whether `value` names a file (or a symlink to one)."""
        _, _, entry = self._entry(value)
        return entry is not None and entry.is_file()


def _listing(directory: str) -> dict[str, os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return {entry.name: entry for entry in entries}
    except OSError:  # missing or not a directory: nothing in it exists
        return {}
