"""`kernelnix generate`: flake.nix (golden, escaping, edits kept), the plan for
Nix and the host record. No Nix builds here; see e2e/test_nix_flake.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from paths import BUILD_OUTPUTS, EXAMPLES, GOLDEN, ROOT

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.emit.escape import nix_string
from kernelnix.emit.flake import FlakeSettings, pristine_settings, render_flake
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.record import HOST_FILE, HostRecord, host_record_schema, probe_host
from kernelnix.plan.model import PLAN_FILE
from kernelnix.project.generate import NIX_UNIQUE_ID, generate, nix_plan

TEMPLATE = ROOT / "nix" / "templates" / "default"

HOSTILE = [
    'a"b',
    '${builtins.abort "pwned"}',
    "$${x}",
    "back\\slash\\",
    "new\nline\r\ttab",
    "''${x}'' \\${y}",
    '\\"${',
]

needs_nix = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="needs Nix")


def nix_eval_string(expression: str) -> str:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--json", "--expr", expression],
        capture_output=True,
        text=True,
        check=True,
    )
    value: str = json.loads(done.stdout)
    return value


@pytest.fixture
def relu(tmp_path: Path) -> Path:
    project = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", project, ignore=BUILD_OUTPUTS)
    return project


@needs_nix
@pytest.mark.parametrize("value", HOSTILE)
def test_nix_string_evaluates_to_the_value_itself(value: str) -> None:
    assert nix_eval_string(nix_string(value)) == value


@needs_nix
def test_hostile_url_stays_a_string_in_the_flake(tmp_path: Path) -> None:
    url = 'x"; outputs = abort "pwned"; y = "${abort "pwned"}'
    flake = tmp_path / "flake.nix"
    flake.write_text(render_flake(FlakeSettings(kernelnix_url=url)))
    assert nix_eval_string(f"(import {flake}).inputs.kernelnix.url") == url
    assert pristine_settings(flake.read_text()) == FlakeSettings(kernelnix_url=url)


def test_flake_golden(golden: Callable[[str, str], None]) -> None:
    golden("nix/flake.nix", render_flake(FlakeSettings("git+file:///src/kernelnix", "host")))
    golden("nix/flake-default.nix", render_flake(FlakeSettings()))
    golden(
        "nix/flake-hermetic.nix",
        render_flake(FlakeSettings("git+file:///src/kernelnix", "hermetic")),
    )


def test_unknown_toolchain_is_a_user_error() -> None:
    with pytest.raises(UserError) as raised:
        render_flake(FlakeSettings(toolchain="gcc"))
    assert "unknown toolchain 'gcc'" in raised.value.render()


def test_generate_writes_a_hermetic_flake_and_the_plan_by_default(relu: Path) -> None:
    result = generate(load_config(relu), kernelnix_url="path:/k")
    assert [(w.path.name, w.action) for w in result.written] == [
        ("flake.nix", "wrote"),
        (PLAN_FILE, "wrote"),
    ]
    assert 'toolchain = "hermetic";' in (relu / "flake.nix").read_text()
    assert pristine_settings((relu / "flake.nix").read_text()) == FlakeSettings(
        "path:/k", "hermetic"
    )


def test_generate_writes_flake_plan_and_host_record(relu: Path) -> None:
    result = generate(load_config(relu), kernelnix_url="path:/k", toolchain="host")
    assert [(w.path.name, w.action) for w in result.written] == [
        ("flake.nix", "wrote"),
        (PLAN_FILE, "wrote"),
        (HOST_FILE, "wrote"),
    ]
    plan = json.loads((relu / PLAN_FILE).read_text())
    assert plan["unique-id"] == NIX_UNIQUE_ID and plan["kernel-git"] is None
    assert (
        plan["systems"]["x86_64-linux"]["ci-order"][0]
        == plan["systems"]["x86_64-linux"]["ci-variant"]
    )
    host = json.loads((relu / HOST_FILE).read_text())
    assert host["python"] == sys.executable
    again = generate(load_config(relu))
    assert {w.action for w in again.written} == {"unchanged"}
    assert pristine_settings((relu / "flake.nix").read_text()) == FlakeSettings("path:/k", "host")


def test_plan_for_nix_ignores_git_state(relu: Path) -> None:
    before = nix_plan(load_config(relu))
    subprocess.run(["git", "init", "-q"], cwd=relu, check=True)
    subprocess.run(["git", "add", "-A"], cwd=relu, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
        cwd=relu,
        check=True,
    )
    assert nix_plan(load_config(relu)) == before


def test_edited_flake_is_kept_unless_forced(relu: Path) -> None:
    generate(load_config(relu), host_record=False)
    flake = relu / "flake.nix"
    edited = flake.read_text().replace('toolchain = "hermetic";', 'toolchain = "hermetic"; # mine')
    flake.write_text(edited)
    kept = generate(load_config(relu), kernelnix_url="path:/other", host_record=False)
    assert kept.written[0].action == "kept" and "--force" in kept.written[0].describe()
    assert flake.read_text() == edited
    forced = generate(load_config(relu), force=True, host_record=False)
    assert forced.written[0].action == "wrote"
    assert pristine_settings(flake.read_text()) == FlakeSettings()


def test_flake_written_by_hand_is_kept(relu: Path) -> None:
    (relu / "flake.nix").write_text("{ outputs = _: { }; }\n")
    result = generate(load_config(relu), host_record=False)
    assert result.written[0].action == "kept"


def test_invalid_build_toml_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "build.toml").write_text("[general]\nname = 3\n")
    result = CliRunner().invoke(main, ["generate", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.toml"]


def test_cli_generate_reports_each_file(relu: Path) -> None:
    result = CliRunner().invoke(
        main, ["generate", str(relu), "--kernelnix-url", "path:/k", "--no-host-record"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {relu / 'flake.nix'}",
        f"wrote {relu / PLAN_FILE}",
    ]
    assert not (relu / HOST_FILE).exists()


def test_host_record_lists_what_this_machine_builds(relu: Path) -> None:
    plan = nix_plan(load_config(relu))
    record = probe_host(plan)
    mine = plan.variants[record.system]
    assert sorted(record.variants + list(record.not_buildable)) == sorted(mine)
    assert all(why_not_buildable(mine[name]) is None for name in record.variants)
    assert record.python == sys.executable
    assert record.path[0] == str(Path(sys.executable).parent) and record.path[-1] == "/bin"
    assert HostRecord.model_validate_json(record.to_json()) == record
    jsonschema.validate(json.loads(record.to_json()), host_record_schema())


def test_template_files_are_generated(golden: Callable[[str, str], None]) -> None:
    """The flake template ships its flake.nix and plan pre-generated (--update-golden
    regenerates them, like golden files)."""
    loaded = load_config(TEMPLATE)
    expected = {"flake.nix": render_flake(FlakeSettings()), PLAN_FILE: nix_plan(loaded).to_json()}
    for name, text in expected.items():
        golden(os.path.relpath(TEMPLATE / name, GOLDEN), text)
    assert not (TEMPLATE / HOST_FILE).exists()
