"""`kernelnix lock` against the fake Hub on 127.0.0.1: the lock file it writes, its
exit code and its one-sentence errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubserver import FakeHub, serving_downloads
from kernels._rust import KernelDependency, KernelLocks, KernelVersion

from kernelnix.cli import main

BUILD_TOML = """\
[general]
name = "uses-b"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]
kernel-depends = [{{ repo-id = "{repo}", version = 1 }}]

[torch-noarch]
"""


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    with serving_downloads(monkeypatch, tmp_path / "hub-cache") as server:
        yield server


def kernel(tmp_path: Path, repo: str) -> Path:
    directory = tmp_path / "uses-b"
    (directory / "torch-ext" / "uses_b").mkdir(parents=True)
    (directory / "torch-ext" / "uses_b" / "__init__.py").write_text("")
    (directory / "build.toml").write_text(BUILD_TOML.format(repo=repo))
    return directory


def test_lock_writes_the_loaders_lock(hub: FakeHub, tmp_path: Path) -> None:
    files = {"build/torch-cpu/metadata.json": b'{"version": 1, "kernel-depends": []}'}
    hub.seed("kernel", "org/b", {"main": files, "v1": files})
    directory = kernel(tmp_path, "org/b")
    result = CliRunner().invoke(main, ["lock", str(directory)])
    assert result.exit_code == 0, result.output
    locks = KernelLocks.from_json((directory / "kernels.lock").read_text())
    head = hub.repos[("kernel", "org/b")].branches["v1"].head
    assert locks[KernelDependency("org/b", KernelVersion.Version(1))].commit == head


def test_an_unknown_repo_exits_2_naming_the_fix(hub: FakeHub, tmp_path: Path) -> None:
    directory = kernel(tmp_path, "org/missing")
    result = CliRunner().invoke(main, ["lock", str(directory)])
    assert result.exit_code == 2
    assert "org/missing: no such kernel repo" in result.output
    assert "Traceback" not in result.output
    assert not (directory / "kernels.lock").exists()
