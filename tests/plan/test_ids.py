"""Kernel ids: explicit, from the git tree (with _dirty), or a hash of the files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from kernelnix.plan.ids import (
    check_unique_id,
    content_unique_id,
    git_state,
    ops_id,
    unique_id_for,
)


def unique_id(directory: Path, explicit: str | None = None) -> str:
    """As the plan picks it, with build.toml as the build's only file."""
    state = git_state(directory) if explicit is None else None
    return unique_id_for(explicit, state, lambda: content_unique_id(directory, ["build.toml"]))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    kernel = tmp_path / "kernels" / "relu"
    kernel.mkdir(parents=True)
    (kernel / "build.toml").write_text("x = 1\n")
    (tmp_path / "README").write_text("top\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "init")
    return kernel


def test_explicit_unique_id_wins(repo: Path) -> None:
    assert unique_id(repo, "abc1234") == "abc1234"
    assert unique_id(repo, "abc1234-dirty") == "abc1234_dirty"  # Nix's dirtyShortRev


def test_unique_id_is_the_kernel_tree_at_head(repo: Path) -> None:
    tree = git(repo, "rev-parse", "HEAD:kernels/relu")
    assert unique_id(repo) == tree[:7]


def test_tracked_change_makes_it_dirty_untracked_does_not(repo: Path) -> None:
    clean = unique_id(repo)
    (repo / "notes.txt").write_text("untracked\n")
    assert unique_id(repo) == clean
    (repo / "build.toml").write_text("x = 2\n")
    assert unique_id(repo) == f"{clean}_dirty"
    (repo / "build.toml").write_text("x = 3\n")  # another edit: the same id
    assert unique_id(repo) == f"{clean}_dirty"
    state = git_state(repo)
    assert state is not None and state.dirty and len(state.commit) == 40


def test_changes_outside_the_kernel_keep_its_id(repo: Path) -> None:
    before = unique_id(repo)
    (repo.parent.parent / "README").write_text("changed\n")
    git(repo.parent.parent, "commit", "-qam", "readme")
    assert unique_id(repo) == before


def test_without_git_the_id_is_a_hash_of_the_files(tmp_path: Path) -> None:
    (tmp_path / "build.toml").write_text("x = 1\n")
    (tmp_path / "relu.cu").write_text("// kernel\n")
    files = ["build.toml", "relu.cu"]
    first = content_unique_id(tmp_path, files)
    assert re.fullmatch(r"[a-z2-7]{13}", first)
    assert unique_id(tmp_path) == content_unique_id(tmp_path, ["build.toml"])
    # Unchanged files, the same id: a rebuild has nothing to recompile.
    assert content_unique_id(tmp_path, files) == first
    (tmp_path / "relu.cu").write_text("// kernel, edited\n")
    edited = content_unique_id(tmp_path, files)
    assert edited != first
    # Names count too, and the boundary between a name and its content.
    (tmp_path / "relu.cu").rename(tmp_path / "gelu.cu")
    assert content_unique_id(tmp_path, ["build.toml", "gelu.cu"]) != edited
    (tmp_path / "a").write_text("bc")
    (tmp_path / "ab").write_text("c")
    assert content_unique_id(tmp_path, ["a"]) != content_unique_id(tmp_path, ["ab"])
    # A file name that is not UTF-8 (os.walk hands it over with surrogates).
    odd = os.fsdecode(b"k\xff.py")
    (tmp_path / odd).write_text("x")
    assert re.fullmatch(r"[a-z2-7]{13}", content_unique_id(tmp_path, [odd]))


def test_an_uncommitted_kernel_in_a_repository_gets_the_hash(repo: Path) -> None:
    fresh = repo.parent / "gelu"
    fresh.mkdir()
    (fresh / "build.toml").write_text("y = 1\n")
    assert git_state(fresh) is None
    assert unique_id(fresh) == content_unique_id(fresh, ["build.toml"])


def test_ops_id_format() -> None:
    assert ops_id("relu_triton", "cuda", "a1b2c3d") == "_relu_triton_cuda_a1b2c3d"
    assert ops_id("relu", "cuda", "a1b2c3d_dirty") == "_relu_cuda_a1b2c3d_dirty"


@pytest.mark.parametrize("bad", ["ABC", "a.b", "a b", "", "x;rm"])
def test_bad_unique_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid unique id"):
        check_unique_id(bad)
