"""kernel_deps against the fake Hub on 127.0.0.1 through the real huggingface_hub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubserver import FakeHub, serving_downloads
from kernels._rust import KernelDependency, KernelLocks, KernelVersion

from kernelnix.core.diagnostics import UserError
from kernelnix.host.kernel_deps import Dependency, hub_api, lock_tree
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
