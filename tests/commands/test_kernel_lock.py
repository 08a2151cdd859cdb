"""`kernelnix lock` against the fake Hub on 127.0.0.1: the lock file it writes, its
exit code and its one-sentence errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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


def lock_in_a_process(directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`kernelnix lock` as a user runs it: its own process, huggingface_hub reading
    the environment when it loads."""
    variables = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    return subprocess.run(
        [sys.executable, "-m", "kernelnix", "lock", str(directory)],
        capture_output=True,
        text=True,
        env={**variables, **env},
        check=False,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("env", "message", "fix"),
    [
        (
            {"HF_HUB_OFFLINE": "1"},
            "error: cannot resolve the kernel-depends of build.toml on the Hub: HF_HUB_OFFLINE "
            "is set, and it needs https://huggingface.co",
            "fix: unset HF_HUB_OFFLINE (and reach the Hub) to run it",
        ),
        (
            {"HF_ENDPOINT": "http://127.0.0.1:{port}"},
            "error: cannot resolve the kernel-depends of build.toml on the Hub: "
            "http://127.0.0.1:{port} did not answer (ConnectError: ",
            "fix: check the network, and HF_ENDPOINT if you use another Hub",
        ),
    ],
)
def test_an_unreachable_hub_exits_2_naming_it(
    tmp_path: Path, env: dict[str, str], message: str, fix: str
) -> None:
    port = str(closed_port())
    directory = kernel(tmp_path, "org/b")
    done = lock_in_a_process(directory, **{k: v.format(port=port) for k, v in env.items()})
    assert done.returncode == 2, done.stderr
    assert message.format(port=port) in done.stderr and fix in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (directory / "kernels.lock").exists()
