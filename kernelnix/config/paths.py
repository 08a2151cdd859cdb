"""Source and include paths of build.toml must stay inside the kernel project.

A path that is absolute, climbs out with `..`, or is a symlink pointing outside
would let a build read (and a bundle ship) files from elsewhere on the machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

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


def escape_reason(root: Path, value: str) -> str | None:
    """Why `value` escapes `root`, or None when it stays inside."""
    if not value.strip():
        return "the path is empty"
    pure = PurePosixPath(value)
    if pure.is_absolute() or Path(value).is_absolute():
        return "absolute paths are not allowed"
    if ".." in pure.parts:
        return "`..` climbs out of the kernel directory"
    resolved = (root / value).resolve()
    if not resolved.is_relative_to(root.resolve()):
        return f"it is a symlink that points outside the kernel directory (to {resolved})"
    return None
