"""Writing files and directories so that no failure, not even a kill, leaves a
half-written one behind.

Each output is written under a temporary name beside its target, then renamed
over it. The temporary name holds the writer's process id,
`.<target name>.<pid>.<random>.tmp`: a killed writer cannot clean up, so the
next write of the same target removes what writers no longer running left.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def _temp_prefix(target: Path) -> str:
    return f".{target.name}.{os.getpid()}."


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temps(target: Path) -> None:
    """Remove the temporaries of `target` whose writers are no longer running."""
    # mkstemp's random part has no dot, so a sibling target's temps never match.
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(\d+)\.[a-z0-9_]+{TEMP_SUFFIX}")
    try:
        entries = list(os.scandir(target.parent))
    except FileNotFoundError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or _running(int(match[1])):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temp file next to `path`, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def replacing_dir(destination: Path) -> Iterator[Path]:
    """A path beside `destination` for the caller to create and fill; when the
    block succeeds, it replaces `destination`, else it is removed.

    `destination` is at every moment its old content, its new content or (between
    two renames) absent, never partly written.
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(destination)
    staging = Path(
        tempfile.mkdtemp(
            prefix=_temp_prefix(destination), suffix=TEMP_SUFFIX, dir=destination.parent
        )
    )
    try:
        new = staging / destination.name
        yield new
        if destination.exists():
            destination.rename(staging / f"{destination.name}.old")
        new.rename(destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
