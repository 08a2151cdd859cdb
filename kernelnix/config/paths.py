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


class EscapeChecker:
    """Tells whether paths stay inside `root`, resolving each directory once
    (a project lists thousands of sources in a few directories)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self._directories: dict[str, str] = {}

    def _real(self, path: str) -> str:
        directory, name = os.path.split(path)
        real_dir = self._directories.get(directory)
        if real_dir is None:
            real_dir = self._directories[directory] = os.path.realpath(directory)
        candidate = os.path.join(real_dir, name)
        return os.path.realpath(candidate) if os.path.islink(candidate) else candidate

    def reason(self, value: str) -> str | None:
        """Why `value` escapes the root, or None when it stays inside."""
        if not value.strip():
            return "the path is empty"
        if os.path.isabs(value):
            return "absolute paths are not allowed"
        if ".." in value.replace("\\", "/").split("/"):
            return "`..` climbs out of the kernel directory"
        resolved = self._real(os.path.join(self.root, value))
        if resolved != self.root and not resolved.startswith(self.root + os.sep):
            return f"it is a symlink that points outside the kernel directory (to {resolved})"
        return None
