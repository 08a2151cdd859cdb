"""kernels-community's relu through its own flake.nix with only the input URL
changed: kernel-builder's flakes name no toolchain, so it builds with kernelnix's
default, the hermetic one, in the Nix sandbox. Its CPU variant (a CPU kernel) and
its CUDA variant (a CUDA kernel, every default capability of CUDA 13; heavy: it
passed in 34 minutes of a shared two-core machine) are built and held to the
publishing policy.

The wheel lock of the kernelnix clone keeps Torch 2.13's CPU and CUDA 13 build
sets, so these are the variants offered here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from nix_projects import kernel_builder_project, kernelnix_clone, nix
from paths import TESTS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"


@pytest.fixture(scope="module")
def relu(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    work = tmp_path_factory.mktemp("hermetic-community")
    url, env = kernelnix_clone(work, ("2.13-cpu", "2.13-cuda-13"))
    source = TESTS / "data" / "community" / "relu"
    return kernel_builder_project(source, work / "relu", url, host=False), env


def test_the_default_toolchain_is_hermetic(relu: tuple[Path, dict[str, str]]) -> None:
    project, env = relu
    variants = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    assert variants == [CPU, CUDA]
    drv = nix(project, env, "eval", "--raw", f".#packages.x86_64-linux.{CPU}.drvPath").stdout
    shown = json.loads(nix(project, env, "show-derivation", drv).stdout)
    assert next(iter(shown.values()))["env"]["toolchainName"] == "hermetic"


# The CUDA variant compiles relu.cu for every default capability of CUDA 13:
# 20 minutes and more on two shared cores, beyond CI's budget (pytest --heavy).
@pytest.mark.parametrize("variant", [CPU, pytest.param(CUDA, marks=pytest.mark.heavy)])
def test_builds_in_the_sandbox_and_meets_the_publishing_policy(
    relu: tuple[Path, dict[str, str]], variant: str
) -> None:
    project, env = relu
    link = project / f"result-{variant}"
    nix(project, env, "build", f".#{variant}", "-o", str(link), *SANDBOX)
    # The host's Torch is CPU-only: the CUDA variant's import was checked in its build.
    no_import = ["--no-import"] if variant == CUDA else []
    check = ["kernelnix", "check", "--policy", "kernel", "--redistributable", *no_import]
    done = subprocess.run([*check, str(link / variant)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
