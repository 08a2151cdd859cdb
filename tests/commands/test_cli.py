"""What every command shares: an "Examples:" block in --help, a lazy import entry,
a row in the README; and the commands that list or check print JSON with --json,
for bad input too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from handmade import make_variant
from paths import ROOT

from kernelnix.cli import COMMAND_MODULES, main
from kernelnix.host.system import current_system

COMMANDS = main.list_commands(click.Context(main))
JSON_COMMANDS = ["list-variants", "check-config", "check", "check-abi", "check-builds"]


def test_every_command_is_imported_lazily() -> None:
    assert sorted(COMMAND_MODULES) == COMMANDS


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_examples_of_the_command(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    examples = result.stdout.split("Examples:\n", 1)[1].split("\n\n", 1)[0]
    assert f"kernelnix {name}" in examples, result.stdout


def test_the_group_help_shows_examples() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Examples:\n    kernelnix " in result.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_the_readme_lists_the_command(name: str) -> None:
    assert re.search(rf"`(kernelnix )?{name}[` ]", (ROOT / "README.md").read_text())


def test_list_variants_json_details_each_variant() -> None:
    result = CliRunner().invoke(
        main, ["list-variants", str(ROOT / "examples" / "relu-noarch"), "--json"]
    )
    assert result.exit_code == 0, result.output
    ((system, variants),) = json.loads(result.stdout).items()
    assert system == current_system()
    assert variants["torch-cpu"]["kind"] == "noarch"
    assert {v["backend"] for v in variants.values()} == {"cpu", "cuda", "rocm", "xpu"}


def test_check_json_reports_a_good_variant(tmp_path: Path) -> None:
    make_variant(tmp_path / "build", "relu-noarch", "torch-cpu")
    result = CliRunner().invoke(main, ["check", str(tmp_path), "--no-import", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert [v["variant"] for v in report["variants"]] == ["torch-cpu"]


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_bad_input_is_json_too(name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [name, str(tmp_path), "--json"])
    assert result.exit_code == 2, result.output
    (diagnostic,) = json.loads(result.stdout)
    assert diagnostic["severity"] == "error"
    assert diagnostic["fix"]
    assert "Traceback" not in result.output
