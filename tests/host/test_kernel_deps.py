"""kernel_deps against the fake Hub on 127.0.0.1 through the real huggingface_hub."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubserver import TOKEN, FakeHub, serving_downloads
from huggingface_hub import constants
from kernels._rust import KernelDependency, KernelLocks, KernelVersion

from kernelnix.config.tables import KernelDependencyRef
from kernelnix.core.diagnostics import UserError
from kernelnix.host.kernel_deps import Dependency, hub_api, lock_tree, store_kernel_deps
from kernelnix.plan import kernel_deps as planned
from kernelnix.plan.kernel_lock import render_lock

VARIANT = "torch-universal"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    with serving_downloads(monkeypatch, tmp_path / "hub-cache") as server:
        yield server


def seed(hub: FakeHub, repo_id: str, branch: str, depends: list[tuple[str, int]]) -> None:
    """A kernel repo whose one variant depends on `depends` (repo-id, version)."""
    metadata = {
        "version": 1,
        "kernel-depends": [{"repo-id": repo, "version": v} for repo, v in depends],
    }
    files = {
        f"build/{VARIANT}/metadata.json": json.dumps(metadata).encode(),
        f"build/{VARIANT}/__init__.py": b"",
    }
    hub.seed("kernel", repo_id, {"main": files, branch: files})


def test_a_two_level_tree_is_locked_in_the_loaders_format(hub: FakeHub) -> None:
    seed(hub, "org/b", "v1", [("org/c", 1)])
    seed(hub, "org/c", "v1", [])
    locks = lock_tree([Dependency("org/b", 1)], hub_api())
    loaded = KernelLocks.from_json(render_lock(locks.locks))
    heads = {repo: hub.repos[("kernel", repo)].branches["v1"].head for repo in ("org/b", "org/c")}
    for repo, head in heads.items():
        assert loaded[KernelDependency(repo, KernelVersion.Version(1))].commit == head
    assert len(loaded) == 2


def test_an_unknown_repo_is_one_error(hub: FakeHub) -> None:
    with pytest.raises(UserError) as info:
        lock_tree([Dependency("org/missing", 1)], hub_api())
    (diagnostic,) = info.value.diagnostics
    assert "org/missing: no such kernel repo" in diagnostic.message
    assert "repo-id" in str(diagnostic.fix)


def test_a_version_without_its_branch_names_the_versions(hub: FakeHub) -> None:
    seed(hub, "org/b", "v2", [])
    with pytest.raises(UserError) as info:
        lock_tree([Dependency("org/b", 1)], hub_api())
    (diagnostic,) = info.value.diagnostics
    assert "has no branch v1 (its version branches: v2)" in diagnostic.message


def test_a_cycle_names_the_chain(hub: FakeHub) -> None:
    seed(hub, "org/b", "v1", [("org/c", 1)])
    seed(hub, "org/c", "v1", [("org/b", 1)])
    with pytest.raises(UserError) as info:
        lock_tree([Dependency("org/b", 1)], hub_api())
    (diagnostic,) = info.value.diagnostics
    assert "cycle: org/b v1 -> org/c v1 -> org/b v1" in diagnostic.message


@pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")
def test_a_private_dependency_reaches_the_store_where_the_flake_fetches_it(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nix's fetchurl sends no token: kernelnix puts a private dependency's files
    where it would fetch them (nix/lib/kernel-deps.nix), and the token stays out."""
    unique = os.urandom(8).hex()  # content no store has yet
    files = {
        f"build/{VARIANT}/metadata.json": b'{"version": 1}',
        f"build/{VARIANT}/__init__.py": f"MARK = {unique!r}\n".encode(),
    }
    hub.seed("kernel", "org/private", {"main": files, "v1": files}, private=True)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    tree = lock_tree([Dependency("org/private", 1)], hub_api())
    locks = planned.KernelLocks(tree.locks, tree.files, None, None)
    ref = KernelDependencyRef.model_validate({"repo-id": "org/private", "version": 1})
    (dep,) = planned.plan_kernel_deps([ref], locks, [VARIANT]).kernels
    store_kernel_deps([dep])
    for file in dep.files:
        fetch = f'import <nix/fetchurl.nix> {{ url = "{file.url}"; sha256 = "{file.sha256}"; }}'
        path = subprocess.run(
            ["nix", "eval", "--raw", "--impure", "--expr", f"({fetch}).outPath"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        stored = Path(path).read_bytes()
        assert stored == files[f"build/{VARIANT}/{file.path}"]
        assert TOKEN.encode() not in stored
    # Without the token the Hub refuses: Nix could not have fetched them.
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(UserError) as info:
        lock_tree([Dependency("org/private", 1)], hub_api())
    assert "org/private: no such kernel repo" in info.value.diagnostics[0].message


def test_a_dependency_on_a_hub_that_stopped_answering_is_one_error(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Locked while the Hub answered; fetched (for `build`, `archive`, `reproduce`)
    after it stopped: one error naming the file, no traceback."""
    unique = os.urandom(8).hex()  # content no store or cache has yet
    files = {f"build/{VARIANT}/metadata.json": f'{{"version": 1, "x": "{unique}"}}'.encode()}
    hub.seed("kernel", "org/gone", {"main": files, "v1": files})
    tree = lock_tree([Dependency("org/gone", 1)], hub_api())
    locks = planned.KernelLocks(tree.locks, tree.files, None, None)
    ref = KernelDependencyRef.model_validate({"repo-id": "org/gone", "version": 1})
    (dep,) = planned.plan_kernel_deps([ref], locks, [VARIANT]).kernels
    hub.__exit__()  # the server stops: its port refuses connections
    # Another machine: nothing of the dependency in its download cache.
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(UserError) as info:
        store_kernel_deps([dep])
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.message.startswith(
        f"cannot download the kernel dependency org/gone ({dep.files[0].url}): "
    )
    assert "did not answer" in diagnostic.message and diagnostic.fix
