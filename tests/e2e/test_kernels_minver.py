"""`kernels-minver` against two real `kernels` releases from PyPI.

A variant with a kernel dependency records the first loader that resolves one
(0.17.0, kernelnix/data/loader-releases.json). Its dependency is a variant that
`kernelnix build --local` built; the variant itself is the plan's metadata.json
with an `__init__.py` that calls `get_kernel_dep` (kernelnix's own import check
does not resolve kernel dependencies yet, so it cannot be built whole). 0.16.2,
the last release before 0.17.0, warns with its own message and cannot load it;
0.17.2 loads it, and refuses a `kernels-minver` newer than itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from handmade import copy_example, make_variant

from kernelnix.config import load_config
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.metadata import loader_releases, read_metadata

OLD_LOADER = "0.16.2"  # the newest release older than kernel-depends' minver
DEPENDENCY = "kernelnix-tests/relu-noarch"
CPU_ONLY = 'backends = ["cpu"]'

INIT = f"""\
from kernels import get_kernel_dep

relu = get_kernel_dep({DEPENDENCY!r}).relu
"""

LOAD = """\
import pathlib, sys, torch, kernels
kernel = kernels.get_local_kernel(pathlib.Path(sys.argv[1]))
print(kernel.relu(torch.tensor([-1.0, 2.0])).tolist())
"""


def _cpu_only(project: Path, extra: str = "") -> None:
    toml = project / "build.toml"
    text = re.sub(r"^backends = .*$", CPU_ONLY + extra, toml.read_text(), flags=re.M)
    toml.write_text(text)


@pytest.fixture(scope="session")
def old_loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv over the system site-packages (Torch) with kernels 0.16.2 from PyPI."""
    venv = tmp_path_factory.mktemp("kernels-old") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", f"kernels=={OLD_LOADER}"]
    subprocess.run(install, check=True)
    return python


@pytest.fixture(scope="session")
def dependency(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """relu-noarch's CPU variant, built by `kernelnix build --local`: the repo folder."""
    project = copy_example("relu-noarch", tmp_path_factory.mktemp("dependency"))
    _cpu_only(project)
    build = ["kernelnix", "build", "--local", str(project), "--variant", "torch-cpu"]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return project


@pytest.fixture(scope="session")
def dependent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CPU variant with `kernel-depends` on the dependency: the repo folder."""
    root = tmp_path_factory.mktemp("dependent")
    project = copy_example("relu-noarch", root)
    _cpu_only(project, f'\nkernel-depends = [{{ repo-id = "{DEPENDENCY}", version = 1 }}]')
    plan = build_plan(load_config(project), PlanOptions(systems=("x86_64-linux",)))
    metadata = plan.variants["x86_64-linux"]["torch-cpu"].metadata.to_data()
    kernel = root / "kernel"
    make_variant(
        kernel / "build", "relu-noarch", "torch-cpu", {"__init__.py": INIT.encode()}, metadata
    )
    return kernel


def _load(python: Path, kernel: Path, dependency: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LOCAL_KERNELS": f"{DEPENDENCY}={dependency}"}
    command = [str(python), "-c", LOAD, str(kernel)]
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


def test_the_variant_records_the_first_loader_with_kernel_dependencies(dependent: Path) -> None:
    from kernels._rust import Metadata as LoaderMetadata

    variant = dependent / "build" / "torch-cpu"
    written = json.loads((variant / "metadata.json").read_text())
    assert written["kernels-minver"] == loader_releases()["features"]["kernel-depends"] == "0.17.0"
    loaded = LoaderMetadata.read_from_file(variant / "metadata.json")
    assert str(loaded.kernels_minver) in ("0.17.0", "0.17")
    assert read_metadata(variant).model is not None


def test_the_built_dependency_records_its_kind_s_first_loader(dependency: Path) -> None:
    written = json.loads((dependency / "build" / "torch-cpu" / "metadata.json").read_text())
    assert written["kernels-minver"] == loader_releases()["variant-kinds"]["noarch"]


def test_kernels_0_17_2_loads_the_variant_with_its_dependency(
    dependent: Path, dependency: Path
) -> None:
    done = _load(Path(sys.executable), dependent, dependency)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 2.0]"


def test_the_older_loader_names_the_minimum_and_cannot_load_it(
    old_loader: Path, dependent: Path, dependency: Path
) -> None:
    done = _load(old_loader, dependent, dependency)
    assert done.returncode != 0
    # 0.16.2's own message (kernels/minver.py), then the feature it lacks.
    assert re.search(
        rf"Kernel 'relu-noarch' variant 'torch-cpu' requires kernels>=0\.17(\.0)?, "
        rf"but version {re.escape(OLD_LOADER)} is installed",
        done.stderr,
    ), done.stderr
    assert "get_kernel_dep" in done.stderr


def test_kernels_0_17_2_refuses_a_newer_minimum(
    dependent: Path, dependency: Path, tmp_path: Path
) -> None:
    """MinverValidator (0.17.0 on) refuses the key as kernelnix writes it, when newer."""
    kernel = tmp_path / "kernel"
    variant = kernel / "build" / "torch-cpu"
    shutil.copytree(dependent / "build" / "torch-cpu", variant)
    metadata = json.loads((variant / "metadata.json").read_text())
    (variant / "metadata.json").write_text(json.dumps({**metadata, "kernels-minver": "99.0.0"}))
    done = _load(Path(sys.executable), kernel, dependency)
    assert done.returncode != 0
    assert "requires kernels>=99" in done.stderr and "is installed" in done.stderr, done.stderr
