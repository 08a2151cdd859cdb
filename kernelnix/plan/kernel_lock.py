"""`kernels.lock`: the commit each kernel dependency resolves to, in the format the
`kernels` loader reads (`kernels._rust.KernelLocks.from_json`): a JSON list of
`{"dependency": {"repo-id", "version" | "revision"}, "lock": {"commit"}}`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        return {
            "dependency": dependency_json(self.repo_id, self.version),
            "lock": {"commit": self.commit},
        }


def dependency_json(repo_id: str, version: int | str) -> dict[str, object]:
    """A dependency as the loader's files write it: `version` N, or a `revision`."""
    return {"repo-id": repo_id, ("version" if isinstance(version, int) else "revision"): version}


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


# What Nix and `build --local` fetch of each locked kernel: written by `kernelnix lock`
# beside kernels.lock (whose format the loader owns and refuses extra keys in).
FILES_LOCK_NAME = "kernelnix-kernels.json"
FILES_LOCK_VERSION = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A file of a variant as Nix fetches it: no `..`, no leading dot or slash, nothing a
# shell or a store path name would read specially.
_FILE_PATH = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*")


@dataclass(frozen=True)
class VariantFiles:
    """One variant folder of a locked kernel: its files' sha256 (by path under the
    variant) and the kernel-depends its metadata.json names."""

    files: dict[str, str]
    kernel_depends: tuple[tuple[str, int | str], ...] = ()

    def to_json(self) -> dict[str, object]:
        depends = [dependency_json(repo, version) for repo, version in self.kernel_depends]
        return {"kernel-depends": depends, "files": dict(sorted(self.files.items()))}


@dataclass(frozen=True)
class KernelFiles:
    """The variants of one locked kernel at its commit."""

    repo_id: str
    commit: str
    variants: dict[str, VariantFiles]

    def to_json(self) -> dict[str, object]:
        variants = {name: v.to_json() for name, v in sorted(self.variants.items())}
        return {"repo-id": self.repo_id, "commit": self.commit, "variants": variants}


@dataclass(frozen=True)
class FilesLock:
    """kernelnix-kernels.json: the Hub they come from and every locked kernel's files."""

    endpoint: str
    kernels: tuple[KernelFiles, ...]

    def kernel(self, repo_id: str, commit: str) -> KernelFiles | None:
        return next((k for k in self.kernels if (k.repo_id, k.commit) == (repo_id, commit)), None)

    def url(self, kernel: KernelFiles, variant: str, path: str) -> str:
        """Where the Hub serves a file of `variant` at the locked commit."""
        base = self.endpoint.rstrip("/")
        return f"{base}/kernels/{kernel.repo_id}/resolve/{kernel.commit}/build/{variant}/{path}"


def render_files_lock(lock: FilesLock) -> str:
    kernels = sorted(lock.kernels, key=lambda k: (k.repo_id, k.commit))
    data = {
        "schema-version": FILES_LOCK_VERSION,
        "endpoint": lock.endpoint,
        "kernels": [k.to_json() for k in kernels],
    }
    return json.dumps(data, indent=2) + "\n"


def write_files_lock(path: Path, lock: FilesLock) -> None:
    write_atomic(path, render_files_lock(lock))


def read_files_lock(path: Path) -> FilesLock:
    """The files lock at `path`; a malformed one is one error naming it and the fix."""
    fix = "run `kernelnix lock` to write it again"
    try:
        data = json.loads(path.read_text())
        if data.get("schema-version") != FILES_LOCK_VERSION:
            raise ValueError(f"schema-version {data.get('schema-version')!r} is not 1")
        kernels = tuple(_kernel_files(entry) for entry in data["kernels"])
        return FilesLock(str(data["endpoint"]), kernels)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError.single(
            f"not a kernelnix kernel files lock: {exc}", file=str(path), fix=fix
        ) from None


def _kernel_files(entry: dict[str, Any]) -> KernelFiles:
    commit = entry["commit"]
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        raise ValueError(f"commit {commit!r} is not a 40-digit lowercase git id")
    variants = {name: _variant_files(name, v) for name, v in entry["variants"].items()}
    return KernelFiles(str(entry["repo-id"]), commit, variants)


def _variant_files(name: str, entry: dict[str, Any]) -> VariantFiles:
    if not _FILE_PATH.fullmatch(name) or "/" in name:
        raise ValueError(f"variant name {name!r} is not a plain folder name")
    files = dict(entry["files"])
    for path, digest in files.items():
        if not _FILE_PATH.fullmatch(path):
            raise ValueError(f"file {path!r} of variant {name} is not a plain relative path")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ValueError(f"sha256 {digest!r} of {name}/{path} is not 64 hex digits")
    depends = tuple(
        (str(d["repo-id"]), d["version"] if "version" in d else str(d["revision"]))
        for d in entry.get("kernel-depends", [])
    )
    return VariantFiles(files, depends)


def is_plain_file_path(path: str) -> bool:
    """Whether `path` (a file under a variant folder) may be locked and fetched."""
    return _FILE_PATH.fullmatch(path) is not None
