"""Resolve build.toml's `kernel-depends` on the Hub the way the `kernels` loader does:
version N is the repo's `vN` branch, every variant's `metadata.json` under `build/` names
its own `kernel-depends`, and those are followed too; a cycle is refused."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelnix.core.diagnostics import UserError
from kernelnix.host.environments import nix_store
from kernelnix.host.network import hub_requests
from kernelnix.plan.kernel_lock import (
    FilesLock,
    KernelFiles,
    LockedKernel,
    VariantFiles,
    is_plain_file_path,
)
from kernelnix.plan.model import PlanKernelDep, PlanKernelFile

if TYPE_CHECKING:
    from huggingface_hub import HfApi

_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Dependency:
    """A kernel named by a `kernel-depends` entry: a major version or a full commit."""

    repo_id: str
    version: int | str

    def __str__(self) -> str:
        return (
            f"{self.repo_id} v{self.version}"
            if isinstance(self.version, int)
            else (f"{self.repo_id}@{self.version}")
        )


def hub_api() -> HfApi:
    """An HfApi for HF_ENDPOINT, read now; huggingface_hub itself honours HF_TOKEN."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


@dataclass
class LockedTree:
    """What `kernelnix lock` writes: kernels.lock's entries and the files lock."""

    locks: list[LockedKernel]
    files: FilesLock


def lock_tree(roots: Iterable[Dependency], api: HfApi) -> LockedTree:
    """Every dependency reachable from `roots`, each locked to a commit, with the
    files (and their sha256) of each of its variants at that commit."""
    locked: dict[Dependency, LockedKernel] = {}
    files: dict[Dependency, KernelFiles] = {}
    for root in roots:
        _lock(root, api, locked, files, chain=[])
    kernels = tuple({(k.repo_id, k.commit): k for k in files.values()}.values())
    return LockedTree(list(locked.values()), FilesLock(api.endpoint, kernels))


def _lock(
    dependency: Dependency,
    api: HfApi,
    locked: dict[Dependency, LockedKernel],
    files: dict[Dependency, KernelFiles],
    chain: list[Dependency],
) -> None:
    if dependency in chain:
        cycle = " -> ".join(str(d) for d in [*chain[chain.index(dependency) :], dependency])
        raise UserError.single(
            f"kernel dependency cycle: {cycle}",
            fix=f"remove one of these kernel-depends entries, e.g. {chain[-1]}'s on {dependency}",
        )
    if dependency in locked:
        return
    commit = _commit_of(dependency, api)
    variants = _variants(dependency.repo_id, commit, api)
    children = [Dependency(*d) for v in variants.values() for d in v.kernel_depends]
    for child in dict.fromkeys(children):
        _lock(child, api, locked, files, [*chain, dependency])
    locked[dependency] = LockedKernel(dependency.repo_id, dependency.version, commit)
    files[dependency] = KernelFiles(dependency.repo_id, commit, variants)


def _commit_of(dependency: Dependency, api: HfApi) -> str:
    """The `vN` branch's head for a version, the commit itself for a full commit."""
    if isinstance(dependency.version, str):
        if not _COMMIT.fullmatch(dependency.version):
            raise UserError.single(
                f"kernel dependency {dependency}: kernelnix lock resolves a version or a full "
                "40-digit commit, not a branch or tag name",
                fix="give `version = N` or the revision's full commit id",
            )
        return dependency.version
    branches = _branches(dependency.repo_id, api)
    wanted = f"v{dependency.version}"
    if wanted not in branches:
        versions = ", ".join(sorted(b for b in branches if b.startswith("v"))) or "none"
        raise UserError.single(
            f"kernel dependency {dependency}: the repo has no branch {wanted} "
            f"(its version branches: {versions})",
            fix="set `version` to one of those versions",
        )
    return branches[wanted]


def _branches(repo_id: str, api: HfApi) -> dict[str, str]:
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        refs = api.list_repo_refs(repo_id, repo_type="kernel")
    except RepositoryNotFoundError:
        raise UserError.single(
            f"kernel dependency {repo_id}: no such kernel repo on {api.endpoint}",
            fix="correct the repo-id in kernel-depends (or log in with HF_TOKEN if it is private)",
        ) from None
    return {branch.name: branch.target_commit for branch in refs.branches}


def _variants(repo_id: str, commit: str, api: HfApi) -> dict[str, VariantFiles]:
    """Every variant under build/ at `commit`: its files' sha256 (an LFS file's from
    the listing, any other file's from its download) and its metadata.json's
    kernel-depends."""
    from huggingface_hub.hf_api import RepoFile

    listing = api.list_repo_tree(
        repo_id, "build", revision=commit, repo_type="kernel", recursive=True, expand=True
    )
    by_variant: dict[str, dict[str, str]] = {}
    for entry in listing:
        parts = entry.path.split("/", 2)
        if not isinstance(entry, RepoFile) or len(parts) < 3:
            continue
        _, variant, path = parts
        if not is_plain_file_path(path):
            raise UserError.single(
                f"kernel dependency {repo_id}: file {entry.path!r} at {commit} has a name "
                "kernelnix does not fetch (a dot first, a space or another special character)",
                fix=f"rename it in {repo_id}, or ask its authors to",
            )
        digest = (
            entry.lfs.sha256 if entry.lfs else _downloaded_sha256(repo_id, entry.path, commit, api)
        )
        by_variant.setdefault(variant, {})[path] = digest
    return {
        variant: VariantFiles(files, _metadata_depends(repo_id, variant, commit, api))
        for variant, files in sorted(by_variant.items())
        if "metadata.json" in files
    }


def _downloaded_sha256(repo_id: str, path: str, commit: str, api: HfApi) -> str:
    local = api.hf_hub_download(repo_id, path, revision=commit, repo_type="kernel")
    return hashlib.sha256(Path(local).read_bytes()).hexdigest()


def _metadata_depends(
    repo_id: str, variant: str, commit: str, api: HfApi
) -> tuple[tuple[str, int | str], ...]:
    path = api.hf_hub_download(
        repo_id, f"build/{variant}/metadata.json", revision=commit, repo_type="kernel"
    )
    entries = json.loads(Path(path).read_text()).get("kernel-depends", [])
    return tuple((e["repo-id"], e.get("version", e.get("revision"))) for e in entries)


def local_kernels_value(folders: dict[str, Path]) -> str:
    """`folders` (repo-id -> variant folder) in the loader's LOCAL_KERNELS form."""
    return ":".join(f"{repo}={folder}" for repo, folder in sorted(folders.items()))


def fetch_kernel_deps(deps: list[PlanKernelDep]) -> dict[str, Path]:
    """Each dependency's variant folder in huggingface_hub's cache (downloaded at its
    locked commit from the Hub that served the lock), every file checked against the
    lock's sha256: repo-id -> folder."""
    from huggingface_hub import hf_hub_download

    folders: dict[str, Path] = {}
    for dep in deps:
        for file in dep.files:
            endpoint = file.url.split(f"/kernels/{dep.repo_id}/resolve/", 1)[0]
            with hub_requests(f"download the kernel dependency {dep.repo_id} ({file.url})"):
                local = Path(
                    hf_hub_download(
                        dep.repo_id,
                        f"build/{dep.variant}/{file.path}",
                        revision=dep.commit,
                        repo_type="kernel",
                        endpoint=endpoint,
                    )
                )
            if hashlib.sha256(local.read_bytes()).hexdigest() != file.sha256:
                raise UserError.single(
                    f"kernel dependency {dep.repo_id}: build/{dep.variant}/{file.path} at "
                    f"{dep.commit} does not have the sha256 kernelnix-kernels.json locks",
                    fix="run `kernelnix lock` again if the repo was rewritten, else retry",
                )
        # The cache's snapshot of the commit: the file paths mirror the repo's.
        folders[dep.repo_id] = local.parents[len(Path(file.path).parts) - 1]
    return folders


def _fetched_name(file: PlanKernelFile) -> str:
    """The store name Nix's fetchurl gives the file: the last part of its URL."""
    return file.url.rsplit("/", 1)[-1]


def _missing_from_store(dep: PlanKernelDep) -> list[PlanKernelFile]:
    return [
        f
        for f in dep.files
        if not Path(
            nix_store("--print-fixed-path", "sha256", f.sha256, _fetched_name(f)) or "/"
        ).exists()
    ]


def store_kernel_deps(deps: Iterable[PlanKernelDep]) -> None:
    """Put the locked files of `deps` into the Nix store where the flake's fetchurl of
    each would (nix/lib/kernel-deps.nix), so that Nix fetches none of them: downloaded
    through huggingface_hub, whose HF_TOKEN reaches a private repo (Nix's fetchurl
    sends no token) and reaches neither the store nor a log. Without Nix, nothing."""
    if shutil.which("nix-store") is None:
        return
    for dep in deps:
        missing = _missing_from_store(dep)
        if not missing:
            continue
        folder = fetch_kernel_deps([dep])[dep.repo_id]
        with tempfile.TemporaryDirectory(prefix="kernelnix-kernel-dep-") as tmp:
            for file in missing:
                named = Path(tmp) / _fetched_name(file)
                shutil.copyfile(folder / file.path, named)
                nix_store("--add-fixed", "sha256", str(named))
                named.unlink()
