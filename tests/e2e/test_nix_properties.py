"""Property tests on what Nix reads: for projects drawn by strategies.valid_projects
(hostile kernel names, flags, file names, Hub repo and branch), every .nix file
`kernelnix generate` writes parses, and once Nix evaluates the kernel's flake
those values are data that equal the input, never code. A hostile
`general.name` (it names derivations) is refused before anything is written.

Bounded: a few dozen parses and a handful of flake evaluations.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nix_projects import clone_worktree, git, nix, nix_environment
from paths import ROOT
from strategies import INJECTIONS, Project, argument, valid_projects

from kernelnix.cli import main
from kernelnix.emit.escape import nix_string
from kernelnix.emit.flake import DEFAULT_KERNELNIX_URL
from kernelnix.host.system import current_system
from kernelnix.plan.model import PLAN_FILE
from kernelnix.variants.matrix import TOOLCHAINS

LIB = ROOT / "nix" / "lib"
SYSTEM = current_system()

pytestmark = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="needs Nix")

FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
PARSES = settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES)
EVALUATIONS = settings(max_examples=10, deadline=None, suppress_health_check=FIXTURES)


def generated(directory: Path, project: Project, *options: str) -> None:
    project.write(directory)
    result = CliRunner().invoke(main, ["generate", str(directory), "--no-host-record", *options])
    assert result.exit_code == 0, result.output


def nix_instantiate(*args: str) -> str:
    done = subprocess.run(["nix-instantiate", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@PARSES
@given(project=valid_projects(), url=argument, toolchain=st.sampled_from(TOOLCHAINS))
def test_every_generated_nix_file_parses(
    tmp_path_factory: pytest.TempPathFactory, project: Project, url: str, toolchain: str
) -> None:
    directory = tmp_path_factory.mktemp("parse")
    generated(directory, project, f"--kernelnix-url={url}", f"--toolchain={toolchain}")
    nix_files = [p for p in directory.rglob("*.nix") if p.is_file()]
    assert nix_files == [directory / "flake.nix"]
    nix_instantiate("--parse", str(nix_files[0]))
    inputs = json.loads(
        nix_instantiate("--eval", "--strict", "--json", "--expr", f"(import {nix_files[0]}).inputs")
    )
    assert inputs["kernelnix"]["url"] == (url or DEFAULT_KERNELNIX_URL)


@pytest.mark.parametrize("name", [f"k{value}" for value in INJECTIONS])
def test_a_hostile_kernel_name_is_refused_before_nix_sees_it(tmp_path: Path, name: str) -> None:
    project = Project(
        {"general": {"name": name, "version": 1, "edition": 5, "backends": ["cpu"]}}, ()
    )
    project.write(tmp_path)
    result = CliRunner().invoke(main, ["generate", str(tmp_path), "--no-host-record"])
    assert result.exit_code == 2 and "general.name" in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.toml"]


@pytest.fixture(scope="module")
def nix_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """kernelnix as a flake (a committed copy of this tree) and an offline Nix env."""
    url = clone_worktree(tmp_path_factory.mktemp("kernelnix"))
    return url, nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", url)


def store_files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def plan_as_nix_reads_it(directory: Path) -> Any:
    expression = f"""
      let
        util = import {LIB}/util.nix;
        plans = import {LIB}/plan.nix {{ inherit util; systems = [ ]; }} {{
          path = /. + {nix_string(str(directory))};
          buildSets = null;
          step = throw "the committed plan is used";
        }};
        plan = plans.forSystem "{SYSTEM}";
      in {{ inherit (plan) name python-name sources hub kernels framework-sources variants; }}
    """
    return json.loads(nix_instantiate("--eval", "--strict", "--json", "--expr", expression))


@EVALUATIONS
@given(project=valid_projects())
def test_hostile_values_stay_data_in_the_flake(
    tmp_path_factory: pytest.TempPathFactory,
    nix_env: tuple[str, dict[str, str]],
    project: Project,
) -> None:
    url, env = nix_env
    directory = tmp_path_factory.mktemp("flake")
    # The host toolchain, as the Nix library's other tests: its variants are those of
    # this machine, whatever the wheel lock holds.
    generated(directory, project, f"--kernelnix-url={url}", "--toolchain=host")
    git(directory, "init", "-q")
    git(directory, "add", "-A")
    plan = json.loads((directory / PLAN_FILE).read_text())

    # The plan as Nix reads it is the plan kernelnix wrote, and that holds
    # build.toml's values unchanged.
    seen = plan_as_nix_reads_it(directory)
    assert seen == {key: plan[key] for key in seen}
    for name, section in project.document["kernel"].items():
        for key in ("backend", "depends", "src", "cxx-flags"):
            assert seen["kernels"][name][key] == section[key], (name, key)
    torch = seen["framework-sources"]
    assert torch["cxx-flags"] == project.document["torch"]["cxx-flags"]
    hub = project.document["general"].get("hub", {})
    assert {k: seen["hub"][k] for k in hub} == hub

    # The flake's variants: named after the kernel, their sources copied
    # byte for byte under the hostile names.
    variants = json.loads(nix(directory, env, "eval", "--json", ".#variants").stdout)
    assert variants and set(variants) <= set(plan["systems"][SYSTEM]["variants"])
    apply = (
        f"packages: map (name: {{ inherit (packages.${{name}}) name src planFile; }}) "
        f"(builtins.fromJSON {nix_string(json.dumps(variants))})"
    )
    derivations = json.loads(
        nix(directory, env, "eval", "--json", f".#packages.{SYSTEM}", "--apply", apply).stdout
    )
    expected = {name: (directory / name).read_bytes() for name in plan["sources"]}
    for variant, derivation in zip(variants, derivations, strict=True):
        assert derivation["name"] == f"{plan['python-name']}-{variant}"
        assert store_files(Path(derivation["src"])) == expected
        assert Path(derivation["planFile"]).read_bytes() == (directory / PLAN_FILE).read_bytes()
    assert set(project.files) <= set(plan["sources"])
