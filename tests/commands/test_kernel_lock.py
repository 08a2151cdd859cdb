"""`kernelnix lock` against the fake Hub on 127.0.0.1: the lock file it writes, its
exit code and its one-sentence errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from handmade import kernel_depending_on
from hubserver import FakeHub, serving_downloads
from kernels._rust import KernelDependency, KernelLocks, KernelVersion

from kernelnix.cli import main


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    with serving_downloads(monkeypatch, tmp_path / "hub-cache") as server:
        yield server


def kernel(tmp_path: Path, repo: str) -> Path:
    return kernel_depending_on(tmp_path / "uses-b", repo)


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
