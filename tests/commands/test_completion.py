"""`kernelnix completion SHELL` (and `completions`): the scripts, click's
completion protocol answering for kernelnix's lazily imported commands, and the
word-list protocol of the elvish and PowerShell scripts (elvish run for real when
installed, PowerShell when `pwsh` is)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from terminal import run_on_terminal

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


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("elvish", "set edit:completion:arg-completer[kernelnix] = {|@words|"),
        ("powershell", "Register-ArgumentCompleter -Native -CommandName kernelnix"),
    ],
)
def test_kernel_builders_name_gives_elvish_and_powershell_scripts(shell: str, marker: str) -> None:
    result = CliRunner().invoke(main, ["completions", shell])
    assert result.exit_code == 0, result.output
    assert marker in result.stdout
    assert f"_KERNELNIX_COMPLETE = {shell}_complete" in result.stdout.replace("'", "")
    assert "_KERNELNIX_COMPLETE_WORDS" in result.stdout


def word_list_completion(shell: str, words: list[str]) -> list[str]:
    """What kernelnix answers the elvish/powershell scripts' protocol call."""
    env = {
        **os.environ,
        "_KERNELNIX_COMPLETE": f"{shell}_complete",
        "_KERNELNIX_COMPLETE_WORDS": "\n".join(words),
    }
    done = subprocess.run([KERNELNIX], env=env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


@needs_script
@pytest.mark.parametrize("shell", ["elvish", "powershell"])
@pytest.mark.parametrize(
    ("words", "answer"),
    [
        (["kernelnix", "check-"], ["plain,check-abi", "plain,check-builds", "plain,check-config"]),
        (["kernelnix", "completions", "p"], ["plain,powershell"]),
        (["kernelnix", "check-abi", "-"], ["plain,-m", "plain,--manylinux"]),
        (["kernelnix", "build", ""], ["dir,"]),
    ],
)
def test_the_word_list_protocol(shell: str, words: list[str], answer: list[str]) -> None:
    found = word_list_completion(shell, words)
    assert found[: len(answer)] == answer


@needs_script
@pytest.mark.skipif(shutil.which("elvish") is None, reason="elvish is not installed")
def test_elvish_completes_with_the_script(tmp_path: Path) -> None:
    script = tmp_path / "kernelnix.elv"
    script.write_text(CliRunner().invoke(main, ["completions", "elvish"]).stdout)
    complete = "$edit:completion:arg-completer[kernelnix] kernelnix"
    # The edit: module exists only in an interactive elvish.
    run_on_terminal(
        ["elvish", "-norc", "-sock", str(tmp_path / "sock"), "-db", str(tmp_path / "db")],
        f"eval (slurp < {script})\n"
        f"{complete} completions e | to-lines > {tmp_path / 'shells'}\n"
        f"{complete} check-abi {tmp_path}/kernelnix. | each {{|c| put $c[stem] }}"
        f" | to-lines > {tmp_path / 'paths'}\n"
        "exit\n",
        {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path), "TERM": "dumb"},
        timeout=60,
    )
    assert (tmp_path / "shells").read_text().splitlines() == ["elvish"]
    assert f"{script}" in (tmp_path / "paths").read_text().splitlines()


@needs_script
@pytest.mark.skipif(shutil.which("pwsh") is None, reason="PowerShell (pwsh) is not installed")
def test_powershell_completes_with_the_script() -> None:
    script = CliRunner().invoke(main, ["completions", "powershell"]).stdout
    line = "kernelnix completions p"
    query = f"(TabExpansion2 -inputScript '{line}' -cursorColumn {len(line)}).CompletionMatches"
    done = subprocess.run(
        [
            "pwsh",
            "-NoProfile",
            "-NonInteractive",
            "-Command",
            f"{script}\n{query} | % CompletionText",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["powershell"]
