"""A new user's path, with kernelnix installed from its wheel (not editable) and no
flake registry entry: `kernelnix init`, then `kernelnix build` through Nix, then
the bundle loads with `kernels`. The wheel carries kernelnix's Nix library, and
`kernelnix build` passes it to Nix as the flake's `kernelnix` input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from nix_projects import clone_worktree, git

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]


@dataclass(frozen=True)
class Installed:
    venv: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """kernelnix from a wheel of this working tree, in a venv that sees the system's
    Torch and test packages; Nix with an empty flake registry."""
    source = tmp_path_factory.mktemp("source")
    clone_worktree(source)
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(dist)],
        check=True,
        capture_output=True,
    )
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    (wheel,) = dist.glob("kernelnix-*.whl")
    subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "-q", "install", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(source)  # the installed wheel must not need the source tree
    home = tmp_path_factory.mktemp("home")
    registry = home / "registry.json"
    registry.write_text(json.dumps({"version": 2, "flakes": []}))
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NIX_CONFIG")},
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "XDG_CONFIG_HOME": str(home),  # no user registry (~/.config/nix/registry.json)
        "NIX_CONFIG": f"flake-registry = {registry}\nwarn-dirty = false",
        "HF_HUB_OFFLINE": "1",
    }
    return Installed(venv, env)


def kernelnix(installed: Installed, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(installed.venv / "bin/kernelnix"), *args],
        cwd=cwd,
        env=installed.env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_wheel_is_what_runs_and_carries_the_nix_library(installed: Installed) -> None:
    done = subprocess.run(
        [str(installed.venv / "bin/python"), "-c", "import kernelnix; print(kernelnix.__file__)"],
        cwd=installed.venv,  # not the checkout: `python -c` imports from the cwd first
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).is_relative_to(installed.venv)
    url = kernelnix(installed, installed.venv, "nix-library").stdout.strip()
    library = Path(url.removeprefix("path:"))
    assert url.startswith("path:") and library.is_relative_to(installed.venv)
    for name in ("flake.nix", "flake.lock", "nix/lib/default.nix", "kernelnix/data/matrix.json"):
        assert (library / name).is_file(), name


def test_init_then_build_with_nix_then_load(installed: Installed, tmp_path: Path) -> None:
    created = kernelnix(installed, tmp_path, "init", "--name", "acme/zap", "--backends", "cpu")
    assert created.returncode == 0, created.stderr
    project = tmp_path / "zap"
    assert 'toolchain = "hermetic";' in (project / "flake.nix").read_text()
    # The host toolchain here (the hermetic default is built by test_hermetic*.py): this
    # test is about the installed wheel's Nix library, not the toolchain.
    kernelnix(installed, tmp_path, "generate", "zap", "--toolchain", "host")
    git(project, "add", "-A")
    # As if the generated files had never been staged: `build` stages them, and says so.
    git(project, "rm", "-q", "--cached", "flake.nix", "kernelnix-plan.json")

    built = kernelnix(installed, tmp_path, "build", "zap")
    assert built.returncode == 0, built.stderr
    assert "staged flake.nix, kernelnix-plan.json (git add --intent-to-add)" in built.stderr
    assert "--override-input kernelnix path:" in built.stderr
    assert "registry" not in built.stderr.lower()

    code = (
        "import sys, torch; from pathlib import Path; from kernels import get_local_kernel\n"
        "zap = get_local_kernel(Path(sys.argv[1]))\n"
        "x = torch.arange(8, dtype=torch.float32)\n"
        "assert torch.equal(zap.zap(x), x + 1)\n"
        "print(sorted(p.name for p in Path(sys.argv[1]).iterdir()))\n"
    )
    loaded = subprocess.run(
        [str(installed.venv / "bin/python"), "-c", code, str(project / "result")],
        cwd=tmp_path,
        env=installed.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "cpu" in loaded.stdout


def test_plain_nix_without_the_registry_entry_is_explained(
    installed: Installed, tmp_path: Path
) -> None:
    """What kernelnix tells a user whose own `nix build` fails on the registry name."""
    kernelnix(installed, tmp_path, "init", "--name", "acme/zap", "--backends", "cpu")
    done = subprocess.run(
        ["nix", "eval", ".#packages", "--apply", "builtins.attrNames"],
        cwd=tmp_path / "zap",
        env=installed.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    code = "import sys; from kernelnix.project.nix import explain_nix_error; "
    code += "d = explain_nix_error(sys.stdin.read()); print(d.message, d.fix)"
    explained = subprocess.run(
        [str(installed.venv / "bin/python"), "-c", code],
        input=done.stderr,
        cwd=tmp_path,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "kernelnix nix-library" in explained.stdout
