"""Kernel ids (the Torch op namespace) and the kernel's git state.

id = `_<python_name>_<backend>_<unique>`. The unique part comes from an explicit
option, else from git: the 7-hex tree id of the kernel directory at HEAD, plus
`_dirty` when tracked files changed (the reference uses the repository root's
tree; the kernel's own tree stays stable when unrelated files in a monorepo
change), else 13 base32 characters of a hash of the build's files. The
reference draws those at random; a hash gives an uncommitted kernel the same
id, and so a no-op rebuild, as long as its files are unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

_UNIQUE = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class GitState:
    commit: str
    tree: str
    dirty: bool


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(directory: Path) -> GitState | None:
    """HEAD commit, the directory's tree at HEAD and whether tracked files changed."""
    commit = _git(directory, "rev-parse", "--verify", "-q", "HEAD")
    prefix = _git(directory, "rev-parse", "--show-prefix")
    if not commit or prefix is None:
        return None
    tree = _git(directory, "rev-parse", "--verify", "-q", f"HEAD:{prefix}")
    if not tree:  # the directory is not committed yet
        return None
    status = _git(directory, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return GitState(commit=commit, tree=tree, dirty=bool(status))


def content_unique_id(directory: Path, files: Iterable[str]) -> str:
    """13 lowercase base32 characters (a u64, as the reference's random ids) of a
    SHA-256 over `files` (relative to `directory`): their names and contents."""
    digest = hashlib.sha256()
    for name in files:
        try:
            content = (directory / name).read_bytes()
        except OSError:  # a missing source: the plan reports it
            content = b""
        for part in (os.fsencode(name), content):  # any file name, even undecodable
            digest.update(len(part).to_bytes(8, "little") + part)
    return base64.b32encode(digest.digest()[:8]).decode().rstrip("=").lower()


def check_unique_id(value: str) -> str:
    if not _UNIQUE.fullmatch(value):
        raise ValueError(
            f"invalid unique id {value!r}: use lowercase letters, digits and '_' "
            "(it becomes part of a Python module name)"
        )
    return value


def unique_id_for(explicit: str | None, state: GitState | None, content: Callable[[], str]) -> str:
    """The unique part from an explicit option, else the git state, else `content()`
    (content_unique_id of the build's files, computed only when needed)."""
    if explicit is not None:
        return check_unique_id(explicit.replace("-", "_"))
    if state is None:
        return content()
    return state.tree[:7] + ("_dirty" if state.dirty else "")


def ops_id(python_name: str, backend: str, unique: str) -> str:
    """The op namespace, module name and library stem of a variant."""
    return f"_{python_name}_{backend}_{unique}"
