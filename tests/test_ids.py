"""Kernel ids: explicit, from the git tree (with _dirty), or random."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kernelnix.ids import check_unique_id, git_state, ops_id, random_unique_id, unique_id


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
    state = git_state(repo)
    assert state is not None and state.dirty and len(state.commit) == 40


def test_changes_outside_the_kernel_keep_its_id(repo: Path) -> None:
    before = unique_id(repo)
    (repo.parent.parent / "README").write_text("changed\n")
    git(repo.parent.parent, "commit", "-qam", "readme")
    assert unique_id(repo) == before


def test_random_id_without_git(tmp_path: Path) -> None:
    first, second = unique_id(tmp_path), random_unique_id()
    assert re.fullmatch(r"[a-z2-7]{13}", first) and first != second


def test_ops_id_format() -> None:
    assert ops_id("relu_triton", "cuda", "a1b2c3d") == "_relu_triton_cuda_a1b2c3d"
    assert ops_id("relu", "cuda", "a1b2c3d_dirty") == "_relu_cuda_a1b2c3d_dirty"


@pytest.mark.parametrize("bad", ["ABC", "a.b", "a b", "", "x;rm"])
def test_bad_unique_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid unique id"):
        check_unique_id(bad)
