"""Resolve build.toml's `kernel-depends` on the Hub the way the `kernels` loader does:
version N is the repo's `vN` branch, every variant's `metadata.json` under `build/` names
its own `kernel-depends`, and those are followed too; a cycle is refused."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelnix.core.diagnostics import UserError
from kernelnix.plan.kernel_lock import LockedKernel

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


def lock_tree(roots: Iterable[Dependency], api: HfApi) -> list[LockedKernel]:
    """Every dependency reachable from `roots`, each locked to a commit."""
    locked: dict[Dependency, LockedKernel] = {}
    for root in roots:
        _lock(root, api, locked, chain=[])
    return list(locked.values())


def _lock(
    dependency: Dependency,
    api: HfApi,
    locked: dict[Dependency, LockedKernel],
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
    for child in _variant_dependencies(dependency.repo_id, commit, api):
        _lock(child, api, locked, [*chain, dependency])
    locked[dependency] = LockedKernel(dependency.repo_id, dependency.version, commit)


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


def _variant_dependencies(repo_id: str, commit: str, api: HfApi) -> list[Dependency]:
    """The `kernel-depends` of every variant under build/ at `commit`."""
    from huggingface_hub.hf_api import RepoFolder

    entries = api.list_repo_tree(repo_id, "build", revision=commit, repo_type="kernel")
    found: list[Dependency] = []
    for variant in (entry.path for entry in entries if isinstance(entry, RepoFolder)):
        path = api.hf_hub_download(
            repo_id, f"{variant}/metadata.json", revision=commit, repo_type="kernel"
        )
        for entry in json.loads(Path(path).read_text()).get("kernel-depends", []):
            found.append(Dependency(entry["repo-id"], entry.get("version", entry.get("revision"))))
    return list(dict.fromkeys(found))
