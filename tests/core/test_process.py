"""Every long command shows what it runs underneath: `+ <command>` on stderr
before compiles (the build step), Nix, and git in `init`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelnix.cli import main
from kernelnix.compile import BuildError
from kernelnix.compile.variant import run_command
from kernelnix.core.process import run_shown, shown
from kernelnix.project import nix as nixrun


def test_the_command_is_shown_quoted_with_its_program_by_name() -> None:
    assert shown(["/usr/bin/git", "-C", "a dir", "add", "-A"]) == "+ git -C 'a dir' add -A"


def test_run_shown_prints_before_it_runs(capfd: pytest.CaptureFixture[str]) -> None:
    done = run_shown([sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE)
    assert done.returncode == 0 and done.stdout == "1\n"
    assert capfd.readouterr().err == f"+ {Path(sys.executable).name} -c 'print(1)'\n"


def test_build_steps_are_shown_and_a_failure_is_a_build_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    run_command(["true"])
    with pytest.raises(BuildError, match="false exited with status 1"):
        run_command(["false"])
    assert capfd.readouterr().err == "+ true\n+ false\n"


@pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed")
def test_nix_commands_are_shown(capfd: pytest.CaptureFixture[str]) -> None:
    assert nixrun.run(nixrun.nix_command("--version"), capture=True).startswith("nix (Nix)")
    assert capfd.readouterr().err == (
        "+ nix --extra-experimental-features 'nix-command flakes' --version\n"
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_init_shows_its_git_commands(tmp_path: Path) -> None:
    project = tmp_path / "add-one"
    result = CliRunner().invoke(main, ["init", str(project), "--name", "o/add-one"])
    assert result.exit_code == 0, result.output
    shown_lines = [line for line in result.stderr.splitlines() if line.startswith("+ ")]
    assert shown_lines == [f"+ git -C {project} init --quiet", f"+ git -C {project} add -A"]
