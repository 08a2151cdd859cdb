"""kernelnix create-pyproject: the files for local development, and a wheel built
from them (noarch, so nothing compiles here; tests/compile/test_local.py builds a
compiled kernel through the same setup.py)."""

from __future__ import annotations

import py_compile
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.compile.develop import create_pyproject
from kernelnix.core.diagnostics import UserError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def copy_of(example: str, tmp_path: Path) -> Path:
    copy = tmp_path / example
    shutil.copytree(EXAMPLES / example, copy, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return copy


def test_pyproject_files(tmp_path: Path) -> None:
    kernel = copy_of("multi-kernel", tmp_path)
    written = create_pyproject(kernel)
    assert written == [kernel / "pyproject.toml", kernel / "setup.py"]
    pyproject = tomllib.loads((kernel / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "multi-kernel"
    assert pyproject["project"]["dependencies"] == ["torch"]
    assert pyproject["tool"]["setuptools"]["packages"] == ["multi_kernel"]
    assert pyproject["tool"]["setuptools"]["package-dir"] == {
        "multi_kernel": "torch-ext/multi_kernel"
    }
    assert any("kernels_ci" in m for m in pyproject["tool"]["pytest"]["ini_options"]["markers"])
    py_compile.compile(str(kernel / "setup.py"), doraise=True)


def test_existing_files_are_kept_without_force(tmp_path: Path) -> None:
    kernel = copy_of("relu", tmp_path)
    (kernel / "setup.py").write_text("# mine\n")
    with pytest.raises(UserError) as caught:
        create_pyproject(kernel)
    assert "setup.py" in caught.value.render()
    assert (kernel / "setup.py").read_text() == "# mine\n"
    assert not (kernel / "pyproject.toml").exists()
    cli = CliRunner().invoke(main, ["create-pyproject", str(kernel)])
    assert cli.exit_code == 2
    forced = CliRunner().invoke(main, ["create-pyproject", str(kernel), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "BuildKernel" in (kernel / "setup.py").read_text()


@pytest.mark.slow
def test_a_wheel_builds_from_the_generated_files(tmp_path: Path) -> None:
    kernel = copy_of("relu-noarch", tmp_path)
    create_pyproject(kernel)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "-w", dist, kernel],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = dist.glob("relu_noarch-1-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "relu_noarch/__init__.py" in names
    assert "relu_noarch/_ops.py" in names
    assert (kernel / "build" / "torch-cpu" / "metadata.json").is_file()
