"""`kernelnix completion SHELL`: the scripts, and click's completion protocol
answering for kernelnix's lazily imported commands."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from kernelnix.cli import main

KERNELNIX = shutil.which("kernelnix") or "kernelnix"
needs_script = pytest.mark.skipif(
    shutil.which("kernelnix") is None, reason="the kernelnix script is not on PATH"
)


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _kernelnix_completion kernelnix"),
        ("zsh", "#compdef kernelnix"),
        ("fish", "complete --no-files --command kernelnix"),
    ],
)
def test_each_shell_gets_its_script(shell: str, marker: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert marker in result.stdout
    assert "_KERNELNIX_COMPLETE" in result.stdout


def test_an_unknown_shell_is_bad_input() -> None:
    result = CliRunner().invoke(main, ["completion", "tcsh"])
    assert result.exit_code == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish', 'elvish', 'powershell'" in result.output


@needs_script
def test_the_completion_protocol_offers_list_variants() -> None:
    env = {**os.environ, "_KERNELNIX_COMPLETE": "bash_complete"}
    done = subprocess.run(
        [KERNELNIX],
        env={**env, "COMP_WORDS": "kernelnix li", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["plain,list-variants"]


@needs_script
@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("kernelnix li", ["list-variants"]),
        ("kernelnix list-variants --a", ["--all-systems", "--arch"]),
        ("kernelnix completion ''", ["bash", "zsh", "fish", "elvish", "powershell"]),
    ],
)
def test_bash_completes_with_the_script(words: str, offered: list[str]) -> None:
    script = (
        'source <("$KERNELNIX" completion bash)\n'
        f"COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n"
        '_kernelnix_completion "$KERNELNIX"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "KERNELNIX": KERNELNIX},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == offered
