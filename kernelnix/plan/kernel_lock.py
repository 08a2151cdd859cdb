"""`kernels.lock`: the commit each kernel dependency resolves to, in the format the
`kernels` loader reads (`kernels._rust.KernelLocks.from_json`): a JSON list of
`{"dependency": {"repo-id", "version" | "revision"}, "lock": {"commit"}}`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from kernelnix.core.diagnostics import UserError
from kernelnix.core.fileio import write_atomic

LOCK_NAME = "kernels.lock"
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True, order=True)
class LockedKernel:
    """One dependency (a repo at a major version or a revision) and its locked commit."""

    repo_id: str
    version: int | str  # int: the `vN` branch; str: a git revision
    commit: str

    def to_json(self) -> dict[str, object]:
        key = "version" if isinstance(self.version, int) else "revision"
        return {
            "dependency": {"repo-id": self.repo_id, key: self.version},
            "lock": {"commit": self.commit},
        }


def render_lock(locks: list[LockedKernel]) -> str:
    """The file's text: entries sorted so that the same tree always gives the same bytes."""
    return json.dumps([lock.to_json() for lock in sorted(locks, key=_sort_key)], indent=2) + "\n"


def _sort_key(lock: LockedKernel) -> tuple[str, str]:
    return lock.repo_id, str(lock.version)


def write_lock(path: Path, locks: list[LockedKernel]) -> None:
    write_atomic(path, render_lock(locks))


def read_lock(path: Path) -> list[LockedKernel]:
    """The entries of `path`; a malformed file is one error naming it and the fix."""
    fix = "run `kernelnix lock` to write it again"
    try:
        entries = json.loads(path.read_text())
        return [_entry(entry) for entry in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError.single(f"not a kernels.lock: {exc}", file=str(path), fix=fix) from None


def _entry(entry: dict[str, dict[str, object]]) -> LockedKernel:
    dependency, commit = entry["dependency"], entry["lock"]["commit"]
    version = dependency["version"] if "version" in dependency else dependency["revision"]
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        raise ValueError(f"commit {commit!r} is not a 40-digit lowercase git id")
    if not isinstance(version, (int, str)):
        raise ValueError(f"version {version!r} is neither a number nor a revision")
    return LockedKernel(str(dependency["repo-id"]), version, commit)
