"""Source and include paths of build.toml must stay inside the kernel project.

A path that is absolute, climbs out with `..`, or is a symlink pointing outside
would let a build read (and a bundle ship) files from elsewhere on the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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


class ProjectFiles:
    """Answers questions about paths inside `root`, listing each directory once
    (a project lists thousands of sources in a few directories: one `scandir`
    per directory instead of one `stat` per file)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self._directories: dict[str, tuple[str, dict[str, os.DirEntry[str]]]] = {}

    def _entry(self, value: str) -> tuple[str, os.DirEntry[str] | None]:
        """`value` with its directory resolved, and its directory entry if it exists."""
        directory, _, name = value.rpartition("/")
        known = self._directories.get(directory)
        if known is None:
            real = os.path.realpath(os.path.join(self.root, directory))
            known = self._directories[directory] = (real, _listing(real))
        real_dir, listing = known
        return f"{real_dir}/{name}", listing.get(name)

    def escape_reason(self, value: str) -> str | None:
        """Why `value` escapes the root, or None when it stays inside."""
        if not value.strip():
            return "the path is empty"
        if os.path.isabs(value):
            return "absolute paths are not allowed"
        if ".." in value.replace("\\", "/").split("/"):
            return "`..` climbs out of the kernel directory"
        resolved, entry = self._entry(value)
        if entry is not None and entry.is_symlink():
            resolved = os.path.realpath(resolved)
        if resolved != self.root and not resolved.startswith(self.root + os.sep):
            return f"it is a symlink that points outside the kernel directory (to {resolved})"
        return None

    def is_file(self, value: str) -> bool:
        """Whether `value` names a file (or a symlink to one)."""
        _, entry = self._entry(value)
        return entry is not None and entry.is_file()


def _listing(directory: str) -> dict[str, os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return {entry.name: entry for entry in entries}
    except OSError:  # missing or not a directory: nothing in it exists
        return {}
