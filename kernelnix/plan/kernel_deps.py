"""The kernel dependencies a variant is built and import-checked with: for each
kernel its `kernel-depends` reach (transitive ones too, as the loader resolves
them eagerly), the variant folder of it that loads beside this variant and the
files of that folder, from kernels.lock and kernelnix-kernels.json (written by
`kernelnix lock`). A lock that is missing or no longer matches build.toml, or a
dependency with no folder for this variant, is the variant's `error`: the flake
and the build step refuse to build it with that sentence; the plan itself is
still made, so `kernelnix plan` and `list-variants` work before locking."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kernelnix.config.model import KernelDependencyRef
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.kernel_lock import (
    FILES_LOCK_NAME,
    LOCK_NAME,
    FilesLock,
    KernelFiles,
    LockedKernel,
    read_files_lock,
    read_lock,
)
from kernelnix.plan.model import Plan, PlanKernelDep, PlanKernelDeps, PlanKernelFile

LOCK_FIX = "run `kernelnix lock` (with HF_ENDPOINT for another Hub) and commit both files"


@dataclass(frozen=True)
class KernelLocks:
    """A kernel directory's two lock files, read; `problem` says why they cannot be used."""

    locks: list[LockedKernel]
    files: FilesLock | None
    sha256: str | None
    problem: str | None


def read_kernel_locks(directory: Path, roots: list[KernelDependencyRef]) -> KernelLocks:
    """The lock files of `directory`, checked against build.toml's kernel-depends."""
    lock_path, files_path = directory / LOCK_NAME, directory / FILES_LOCK_NAME
    sha = hashlib.sha256(files_path.read_bytes()).hexdigest() if files_path.exists() else None
    for path in (lock_path, files_path):
        if not path.exists():
            problem = f"build.toml has kernel-depends but {path.name} is missing; {LOCK_FIX}"
            return KernelLocks([], None, sha, problem)
    try:
        locks, files = read_lock(lock_path), read_files_lock(files_path)
    except UserError as exc:
        return KernelLocks([], None, sha, f"{exc.diagnostics[0].message}; {LOCK_FIX}")
    return KernelLocks(locks, files, sha, _staleness(roots, locks, files))


def _staleness(
    roots: list[KernelDependencyRef], locks: list[LockedKernel], files: FilesLock
) -> str | None:
    locked = {(lock.repo_id, lock.version) for lock in locks}
    for ref in roots:
        if (ref.repo_id, ref_version(ref)) not in locked:
            return (
                f"kernels.lock no longer matches build.toml: it does not lock {ref.repo_id} "
                f"{_describe(ref_version(ref))}; {LOCK_FIX}"
            )
    for lock in locks:
        if files.kernel(lock.repo_id, lock.commit) is None:
            return (
                f"kernelnix-kernels.json does not match kernels.lock: it has no files of "
                f"{lock.repo_id} at {lock.commit}; {LOCK_FIX}"
            )
    return None


def ref_version(ref: KernelDependencyRef) -> int | str:
    """A build.toml `kernel-depends` entry's major version, else its revision."""
    return ref.version if ref.version is not None else str(ref.revision)


def _describe(version: int | str) -> str:
    return f"version {version}" if isinstance(version, int) else f"at {version}"


def candidate_folders(variant_name: str, kind: str, backend: str) -> list[str]:
    """A dependency's folders that load beside `variant_name`, best first: the same
    name, then its backend's noarch folder, then the universal one."""
    same = [variant_name] if kind != "noarch" else []
    return [*same, f"torch-{backend}", "torch-universal"]


def plan_kernel_deps(
    roots: list[KernelDependencyRef], locks: KernelLocks, candidates: list[str]
) -> PlanKernelDeps:
    """What one variant (whose folder names in the loader's order are `candidates`)
    is built with."""
    if locks.problem is not None or locks.files is None:
        return PlanKernelDeps.model_construct(
            lock_sha256=locks.sha256, error=locks.problem, kernels=[]
        )
    found: dict[str, PlanKernelDep] = {}
    pending = [(ref.repo_id, ref_version(ref)) for ref in roots]
    try:
        while pending:
            repo_id, version = pending.pop(0)
            if repo_id in found:
                continue
            kernel = _locked_files(repo_id, version, locks)
            folder = _folder(kernel, candidates)
            found[repo_id] = _dep(locks.files, kernel, folder)
            pending += list(kernel.variants[folder].kernel_depends)
    except _NoFolder as exc:
        return PlanKernelDeps.model_construct(lock_sha256=locks.sha256, error=str(exc), kernels=[])
    return PlanKernelDeps.model_construct(
        lock_sha256=locks.sha256,
        error=None,
        kernels=sorted(found.values(), key=lambda d: d.repo_id),
    )


class _NoFolder(Exception):
    pass


def _locked_files(repo_id: str, version: int | str, locks: KernelLocks) -> KernelFiles:
    lock = next((k for k in locks.locks if (k.repo_id, k.version) == (repo_id, version)), None)
    kernel = locks.files.kernel(repo_id, lock.commit) if lock and locks.files else None
    if kernel is None:
        raise _NoFolder(
            f"kernels.lock does not lock {repo_id} {_describe(version)}, which a locked "
            f"kernel depends on; {LOCK_FIX}"
        )
    return kernel


def _folder(kernel: KernelFiles, candidates: list[str]) -> str:
    folder = next((name for name in candidates if name in kernel.variants), None)
    if folder is None:
        offered = ", ".join(sorted(kernel.variants)) or "none"
        raise _NoFolder(
            f"kernel dependency {kernel.repo_id} (at {kernel.commit}) has no variant that loads "
            f"beside {candidates[0]} (looked for {', '.join(candidates)}; it has {offered}): "
            "leave this variant out (torchVersions in flake.nix, or the backend in build.toml), "
            "or depend on a version of it that builds one"
        )
    return folder


def _dep(files: FilesLock, kernel: KernelFiles, folder: str) -> PlanKernelDep:
    listed = [
        PlanKernelFile.model_construct(
            path=path, url=files.url(kernel, folder, path), sha256=digest
        )
        for path, digest in sorted(kernel.variants[folder].files.items())
    ]
    return PlanKernelDep.model_construct(
        repo_id=kernel.repo_id, commit=kernel.commit, variant=folder, files=listed
    )


def kernel_deps_of(plan: Plan, system: str) -> list[PlanKernelDep]:
    """Every dependency folder the variants of `system` are built with, each once."""
    found = {
        (dep.repo_id, dep.commit, dep.variant): dep
        for variant in plan.variants.get(system, {}).values()
        if variant.kernel_deps is not None
        for dep in variant.kernel_deps.kernels
    }
    return list(found.values())
