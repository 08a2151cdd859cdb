"""The hermetic toolchain's tools (nix/registry/) from the toolchain lock alone:
built in the sandbox, bit for bit, and evaluated for aarch64-linux."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kernelnix.host.toolchain_fetch import prefetch_toolchain

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _registry(system: str, attribute: str) -> str:
    return (
        f"let r = import {ROOT}/nix/registry {{ kernelnixSrc = {ROOT}; }};"
        f" s = r.systems.{system}; in {attribute}"
    )


def _nix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nix", *args], capture_output=True, text=True, check=False)


_TOOLCHAIN = _registry("x86_64-linux", "[ s.drvs.gcc s.drvs.cmake s.drvs.pythonEnv s.glibcTarget ]")
_BUILD = ["build", "--impure", "--no-link", "--option", "sandbox", "true", "--expr", _TOOLCHAIN]


def test_the_toolchain_builds_in_the_sandbox() -> None:
    prefetch_toolchain("x86_64-linux", print)
    built = _nix(*_BUILD)
    assert built.returncode == 0, built.stderr
    python = _registry("x86_64-linux", "s.python")
    done = _nix("eval", "--impure", "--raw", "--expr", python)
    program = done.stdout
    # The toolchain's Python has kernelnix's dependencies, the loader and pytest (ci-test).
    versions = subprocess.run(
        [program, "-c", "import kernels, pydantic, jinja2, pytest; print(kernels.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert versions.stdout.strip() == "0.17.2"
    target = _nix("eval", "--impure", "--raw", "--expr", _registry("x86_64-linux", "s.glibcTarget"))
    description = json.loads((Path(target.stdout) / "kernelnix-glibc-target.json").read_text())
    assert description["glibc"] == "2.27" and description["newer-symbols"]


def test_aarch64_linux_evaluates_from_the_lock() -> None:
    tools = _registry("aarch64-linux", "[ s.python s.cc s.cxx s.patchelf ] ++ s.path")
    done = _nix("eval", "--impure", "--json", "--expr", tools)
    assert done.returncode == 0, done.stderr
    assert all(path.startswith("/nix/store/") for path in json.loads(done.stdout))
    # Its glibc sysroot: the aarch64 ziglang wheel, assembled by aarch64 tools
    # (every derivation behind it is for aarch64-linux or a Nix built-in).
    target = _nix(
        "eval", "--impure", "--raw", "--expr", _registry("aarch64-linux", "s.glibcTarget.drvPath")
    )
    assert target.returncode == 0, target.stderr
    graph = json.loads(_nix("show-derivation", "-r", target.stdout).stdout)
    assert {drv["system"] for drv in graph.values()} == {"aarch64-linux", "builtin"}
    urls = [drv["env"]["url"] for drv in graph.values() if "url" in drv["env"]]
    assert [u for u in urls if "/ziglang-0.17.0-" in u and "_aarch64." in u]
    assert [u for u in urls if u.endswith("_arm64.deb")]
    assert not [u for u in urls if "x86_64" in u or "amd64" in u]


# Each toolchain derivation built a second time from scratch: minutes more on two cores.
@pytest.mark.heavy
def test_the_toolchain_rebuilds_bit_for_bit() -> None:
    prefetch_toolchain("x86_64-linux", print)
    assert _nix(*_BUILD).returncode == 0
    # Nix fails the build where any byte of an output differs.
    rebuilt = _nix(*_BUILD, "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
