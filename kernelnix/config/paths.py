"""Source and include paths of build.toml must stay inside the kernel project.

A path that is absolute, climbs out with `..`, or is a symlink pointing outside
would let a build read (and a bundle ship) files from elsewhere on the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kernelnix.config.locate import KeyPath
from kernelnix.config.model import BuildConfig


def declared_lists(config: BuildConfig) -> Iterator[tuple[KeyPath, list[str], bool]]:
    """(key path, values, must exist) for every list of source or include paths."""
    framework = getattr(config, config.framework.replace("-", "_"))
    for key in ("src", "include"):
        yield (config.framework, key), getattr(framework, key, None) or [], key == "src"
    for name, kernel in config.kernel.items():
        for key in ("src", "include"):
            yield ("kernel", name, key), getattr(kernel, key), key == "src"


def declared_paths(config: BuildConfig) -> Iterator[tuple[KeyPath, str, bool]]:
    """(key path, value, must exist) for every source and include path."""
    for key, values, must_exist in declared_lists(config):
        for index, value in enumerate(values):
            yield (*key, index), value, must_exist


@dataclass(frozen=True)
class _Directory:
    real: str  # its resolved path
    listing: dict[str, os.DirEntry[str]]
    inside: bool  # whether `real` is the root or under it
    plain: frozenset[str]  # the names in it that are not symlinks

    @cached_property
    def files(self) -> frozenset[str]:
        """The names in it of files, or of symlinks to files."""
        return frozenset(name for name, entry in self.listing.items() if entry.is_file())


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
            real, inside = self._resolve(directory)
            listing = _listing(real)
            plain = frozenset(n for n, e in listing.items() if not e.is_symlink())
            known = self._directories[directory] = _Directory(real, listing, inside, plain)
        return known

    def _resolve(self, directory: str) -> tuple[str, bool]:
        """`directory`'s real path and whether it is inside the root. A plain
        subdirectory of a known directory is resolved from its parent's listing;
        anything else (a symlink, `.`, `..`, an absolute path) by `realpath`."""
        if not directory:
            return self.root, True
        parent, _, name = directory.rpartition("/")
        if name not in (".", "..") and not os.path.isabs(directory):
            above = self._directory(parent)
            entry = above.listing.get(name)
            if entry is not None and name in above.plain and entry.is_dir():
                return f"{above.real}/{name}", above.inside
        real = os.path.realpath(os.path.join(self.root, directory))
        return real, self._inside(real)

    def _inside(self, resolved: str) -> bool:
        return resolved == self.root or resolved.startswith(self.root + os.sep)

    def _entry(self, value: str) -> tuple[_Directory, str, os.DirEntry[str] | None]:
        """`value`'s directory (resolved), its name, and its directory entry if it exists."""
        directory, _, name = value.rpartition("/")
        known = self._directory(directory)
        return known, name, known.listing.get(name)

    def escaping(self, values: list[str]) -> Iterator[tuple[int, str]]:
        """(index, why) for each of `values` that escapes the root."""
        directories = self._directories
        for index, value in enumerate(values):
            # The common case, decided by lookups: a plain file of a directory inside
            # (and the path neither absolute, POSIX being the only system, nor climbing).
            directory, _, name = value.rpartition("/")
            known = directories.get(directory)
            if (
                known is not None
                and known.inside
                and name in known.plain
                and ".." not in value
                and value[:1] != "/"
            ):
                continue
            reason = self.escape_reason(value)
            if reason:
                yield index, reason

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
        if directory.inside and not symlink:  # one verdict per directory
            return None
        resolved = f"{directory.real}/{name}"
        if symlink:
            resolved = os.path.realpath(resolved)
        if not self._inside(resolved):
            return f"it is a symlink that points outside the kernel directory (to {resolved})"
        return None

    def is_file(self, value: str) -> bool:
        """Whether `value` names a file (or a symlink to one)."""
        directory, _, name = value.rpartition("/")
        return name in self._directory(directory).files

    def missing(self, values: list[str]) -> Iterator[int]:
        """The index of each of `values` that names no file (nor a symlink to one)."""
        for index, value in enumerate(values):
            if not self.is_file(value):
                yield index


def _listing(directory: str) -> dict[str, os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return {entry.name: entry for entry in entries}
    except OSError:  # missing or not a directory: nothing in it exists
        return {}
