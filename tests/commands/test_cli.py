"""What every command shares: an "Examples:" block in --help, a lazy import entry and
a summary (`kernelnix --help` imports no command), a row in the README; and the
commands that list or check print JSON with --json, for bad input too."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from handmade import make_variant
from paths import ROOT

from kernelnix.cli import COMMANDS, LazyGroup, main
from kernelnix.host.system import current_system

NAMES = main.list_commands(click.Context(main))
JSON_COMMANDS = ["list-variants", "check-config", "check", "check-abi", "check-builds"]


def test_every_command_is_imported_lazily() -> None:
    assert sorted(COMMANDS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_help_shows_examples_of_the_command(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    examples = result.stdout.split("Examples:\n", 1)[1].split("\n\n", 1)[0]
    assert f"kernelnix {name}" in examples, result.stdout


@pytest.mark.parametrize("name", NAMES)
def test_each_summary_is_the_first_sentence_of_the_commands_help_and_written_once(
    name: str,
) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None and command.help is not None
    summary = click.Command(name, help=COMMANDS[name].summary)
    for limit in (45, 80, 1000):
        assert summary.get_short_help_str(limit) == command.get_short_help_str(limit)
    # The command's own docstring holds the details only.
    assert " ".join(command.help.split()).count(COMMANDS[name].summary) == 1


def test_the_group_help_lists_the_commands_as_click_would(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = CliRunner().invoke(main, ["--help"]).stdout
    # click's own listing asks every command (imported) for its short help.
    monkeypatch.setattr(LazyGroup, "format_commands", click.Group.format_commands)
    assert ours == CliRunner().invoke(main, ["--help"]).stdout


def imported_by(*args: str) -> set[str]:
    """The modules a fresh `kernelnix ARGS` process has imported when it is done."""
    script = (
        "import sys\n"
        "from kernelnix.cli import main\n"
        f"main({list(args)!r}, standalone_mode=False)\n"
        "print('\\n'.join(sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("args", [["--help"], ["completion", "bash"]], ids=" ".join)
def test_help_and_completion_import_no_command_nor_pydantic(args: list[str]) -> None:
    modules = imported_by(*args)
    assert "kernelnix.cli" in modules
    # The plugin loader's stand-in is kernelnix's own module (cli._skip_plugin_loader).
    assert not {m for m in modules if m.split(".")[0] == "pydantic"} - {"pydantic.plugin._loader"}
    assert "pydantic.plugin" not in modules
    assert not {m for m in modules if m.startswith("kernelnix.commands.")} - {
        "kernelnix.commands.completion"
    }


@pytest.mark.parametrize(
    "args",
    [["check-config", "EXAMPLE"], ["plan", "EXAMPLE", "-o", "PLAN", "--unique-id", "0000000"]],
    ids=lambda args: args[0],
)
def test_check_config_and_plan_import_no_template_engine_nor_hub_client(
    args: list[str], tmp_path: Path
) -> None:
    """What these commands do not use costs their start-up nothing (docs/performance.md)."""
    plan = str(tmp_path / "plan.json")
    modules = imported_by(
        *[{"EXAMPLE": str(ROOT / "examples" / "relu"), "PLAN": plan}.get(a, a) for a in args]
    )
    assert "kernelnix.config.load" in modules
    assert not {m.split(".")[0] for m in modules} & {"jinja2", "tomlkit", "huggingface_hub"}
    # pydantic's plugin loader imports it to look for plugins, and every plugin is off.
    assert "importlib.metadata" not in modules


def test_pydantic_plugins_a_user_enables_are_still_looked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "some-plugin")
    modules = imported_by("check-config", str(ROOT / "examples" / "relu"))
    assert {"pydantic.plugin._loader", "importlib.metadata"} <= modules


def test_a_command_name_completes_from_the_summaries() -> None:
    ctx = click.Context(main)
    found = main.shell_complete(ctx, "check-")
    assert [(i.value, i.help) for i in found] == [
        (name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str())
        for name in ("check-abi", "check-builds", "check-config")
    ]


def test_the_group_help_shows_examples() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Examples:\n    kernelnix " in result.stdout


@pytest.mark.parametrize("name", NAMES)
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
