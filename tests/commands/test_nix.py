"""The Nix side of the CLI before Nix runs: what `kernelnix build` (no --local),
`build-and-copy` and `list-variants --nix` refuse, without writing anything.
The real runs are in e2e/test_nix_flake.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import BUILD_OUTPUTS, EXAMPLES

from kernelnix.cli import main
from kernelnix.project import nix as nixrun


@pytest.fixture
def relu(tmp_path: Path) -> Path:
    project = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", project, ignore=BUILD_OUTPUTS)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return project


@pytest.mark.parametrize(
    "args", [["build"], ["build-and-copy"], ["list-variants", "--nix"], ["build", "--variant", "x"]]
)
def test_untracked_kernel_is_refused_and_left_alone(relu: Path, args: list[str]) -> None:
    before = sorted(p.name for p in relu.iterdir())
    result = CliRunner().invoke(main, [*args, str(relu)])
    assert result.exit_code == 2, result.output
    assert "git does not track build.toml" in result.output
    assert f"git -C {relu} add build.toml" in result.output
    assert sorted(p.name for p in relu.iterdir()) == before


def test_unique_id_is_for_local_builds(relu: Path) -> None:
    result = CliRunner().invoke(main, ["build", str(relu), "--unique-id", "abc"])
    assert result.exit_code == 2
    assert "--unique-id applies to --local builds" in result.output


def test_missing_nix_is_reported(relu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nixrun.shutil, "which", lambda name: None)
    result = CliRunner().invoke(main, ["build", str(relu)])
    assert result.exit_code == 2
    assert "nix is not installed" in result.output and "kernelnix build --local" in result.output
    assert not (relu / "flake.nix").exists()


def test_nix_options_pass_through() -> None:
    options = nixrun.NixOptions(print_build_logs=True, max_jobs=2, cores=4)
    assert options.args() == ["--print-build-logs", "--max-jobs", "2", "--cores", "4"]
    assert nixrun.NixOptions().args() == []
