"""A kernel that uses another kernel, end to end against a Hub on 127.0.0.1:
relu-noarch's CPU variant, built by `kernelnix build --local`, is served as
`kernelnix-examples/relu-noarch` (branch v1); examples/scaled-relu, whose
`__init__.py` calls `kernels.get_kernel_dep` on it, is locked with `kernelnix
lock`, built by `build --local` (the dependency through huggingface_hub's cache)
and through its flake (a fixed-output fetch of each locked file), import-checked
with the dependency in both, and its `ci-test` passes. Without its lock, the
flake refuses to evaluate the variant and says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from handmade import copy_example, kernel_depending_on
from hubserver import FakeHub
from nix_projects import kernelnix_clone, make_project, nix
from paths import BUILD_OUTPUTS, EXAMPLES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

DEPENDENCY = "kernelnix-examples/relu-noarch"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"


@dataclass(frozen=True)
class Served:
    hub: FakeHub
    env: dict[str, str]
    work: Path
    kernelnix_url: str


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, check=False)


def _relu_noarch_cpu(work: Path) -> Path:
    """relu-noarch's torch-cpu variant folder, built by `kernelnix build --local`."""
    project = copy_example("relu-noarch", work)
    toml = project / "build.toml"
    toml.write_text(re.sub(r"^backends = .*$", 'backends = ["cpu"]', toml.read_text(), flags=re.M))
    build = ("kernelnix", "build", "--local", str(project), "--variant", "torch-cpu")
    done = _run(dict(os.environ), *build)
    assert done.returncode == 0, done.stdout + done.stderr
    return project / "build" / "torch-cpu"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    work = tmp_path_factory.mktemp("kernel-deps")
    folder = _relu_noarch_cpu(work / "dependency")
    files = {
        f"build/torch-cpu/{p.relative_to(folder).as_posix()}": p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
    url, env = kernelnix_clone(work, ("2.13-cpu",))
    # The Nix builds fetch from it too: it must outlive them.
    with FakeHub(lifetime=1800) as hub:
        hub.seed("kernel", DEPENDENCY, {"main": files, "v1": files})
        env = {**env, "HF_ENDPOINT": hub.url, "HF_HOME": str(work / "hf")}
        env.pop("HF_HUB_OFFLINE", None)
        yield Served(hub, env, work, url)


@pytest.fixture(scope="module")
def locked(served: Served) -> Path:
    """examples/scaled-relu with its lock files, written by `kernelnix lock`."""
    project = served.work / "scaled-relu"
    shutil.copytree(EXAMPLES / "scaled-relu", project, ignore=BUILD_OUTPUTS)
    done = _run(served.env, "kernelnix", "lock", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    return project


def test_lock_pins_the_v1_head_and_every_file(served: Served, locked: Path) -> None:
    head = served.hub.repos[("kernel", DEPENDENCY)].branches["v1"].head
    (entry,) = json.loads((locked / "kernels.lock").read_text())
    assert entry == {
        "dependency": {"repo-id": DEPENDENCY, "version": 1},
        "lock": {"commit": head},
    }
    (kernel,) = json.loads((locked / "kernelnix-kernels.json").read_text())["kernels"]
    assert kernel["commit"] == head and list(kernel["variants"]) == ["torch-cpu"]
    assert "metadata.json" in kernel["variants"]["torch-cpu"]["files"]


@pytest.fixture(scope="module")
def built_local(served: Served, locked: Path) -> Path:
    """scaled-relu's variant for this Torch, built by `kernelnix build --local`."""
    done = _run(served.env, "kernelnix", "build", "--local", str(locked), "--variant", VARIANT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    return locked / "build" / VARIANT


def test_build_local_loads_the_dependency_in_its_import_check(built_local: Path) -> None:
    # The import check passed (the build step fails otherwise); the variant is whole.
    assert {"__init__.py", "_ops.py", "metadata.json"} <= {p.name for p in built_local.iterdir()}


GET_LOCKED = """\
import sys, torch, kernels
kernel = kernels.get_locked_kernel(
    "kernelnix-examples/scaled-relu", lockfile=sys.argv[1], trust_remote_code=True
)
print(kernel.scaled_relu(torch.tensor([-1.0, 2.0]), 3.0).tolist())
"""


def test_a_two_level_tree_locks_and_the_loader_loads_it_with_the_lock(
    served: Served, built_local: Path
) -> None:
    """scaled-relu (served as v1) depends on relu-noarch: `kernelnix lock` of a kernel
    that depends on scaled-relu locks both, and `kernels.get_locked_kernel` downloads
    and loads both from the Hub at the locked commits."""
    files = {
        f"build/{VARIANT}/{p.relative_to(built_local).as_posix()}": p.read_bytes()
        for p in sorted(built_local.rglob("*"))
        if p.is_file()
    }
    served.hub.seed("kernel", "kernelnix-examples/scaled-relu", {"main": files, "v1": files})
    top = served.work / "uses-scaled-relu"
    kernel_depending_on(top, "kernelnix-examples/scaled-relu", "uses-scaled-relu")
    done = _run(served.env, "kernelnix", "lock", str(top))
    assert done.returncode == 0, done.stdout + done.stderr
    locked = {e["dependency"]["repo-id"] for e in json.loads((top / "kernels.lock").read_text())}
    assert locked == {"kernelnix-examples/scaled-relu", DEPENDENCY}
    env = {**served.env, "HF_HOME": str(served.work / "hf-loader")}
    done = _run(env, sys.executable, "-c", GET_LOCKED, str(top / "kernels.lock"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "[0.0, 6.0]"


# The README's way (the hermetic default, in the sandbox) and the host toolchain's
# (about 100 s more: `pytest --heavy`).
TOOLCHAINS = {
    "hermetic": ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false"),
    "host": (),
}


@pytest.mark.parametrize(
    "toolchain",
    [
        "hermetic",
        pytest.param("host", marks=pytest.mark.heavy),
    ],
)
def test_the_flake_builds_it_and_ci_test_passes(
    served: Served, locked: Path, toolchain: str
) -> None:
    options = ("--toolchain", toolchain)
    dest = served.work / f"flake-{toolchain}"
    project = make_project(locked, dest, served.kernelnix_url, served.env, options)
    build = ("build", f".#{VARIANT}", "-o", str(project / "result"), *TOOLCHAINS[toolchain])
    nix(project, served.env, *build)
    metadata = json.loads((project / "result" / VARIANT / "metadata.json").read_text())
    assert metadata["kernel-depends"] == [{"repo-id": DEPENDENCY, "version": 1}]
    assert metadata["kernels-minver"] == "0.17.0"
    done = nix(project, served.env, "run", ".#ci-test")
    assert re.search(r"\b9 passed\b", done.stdout), done.stdout + done.stderr


def test_without_its_lock_the_flake_says_what_to_run(served: Served) -> None:
    example = EXAMPLES / "scaled-relu"
    project = make_project(example, served.work / "unlocked", served.kernelnix_url, served.env)
    attribute = f".#packages.x86_64-linux.{VARIANT}.drvPath"
    done = nix(project, served.env, "eval", "--raw", attribute, check=False)
    assert done.returncode != 0
    assert "kernels.lock is missing; run `kernelnix lock`" in done.stderr
