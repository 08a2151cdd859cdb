"""The Nix library, evaluated with nix-instantiate (no flakes, no builds):
helpers, the stale-plan check, the host toolchain's choice of variants,
quoting of build.toml values, and that every Nix file parses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from paths import EXAMPLES, ROOT

from kernelnix.compile.project import generate
from kernelnix.config import load_config
from kernelnix.emit.escape import nix_string
from kernelnix.emit.flake import FlakeSettings, render_flake
from kernelnix.host.record import HOST_FILE, SCHEMA_VERSION
from kernelnix.variants.matrix import TOOLCHAINS

LIB = ROOT / "nix" / "lib"
HOST_TOOLCHAIN = ROOT / "nix" / "toolchains" / "host"

pytestmark = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="needs Nix")


def nix_eval(expression: str, check: bool = True) -> Any:
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expression],
        capture_output=True,
        text=True,
    )
    if not check:
        return done
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def nix_path(path: Path) -> str:
    """A Nix path value for any absolute path (pytest's names are no path literals)."""
    return f"(/. + {nix_string(str(path))})"


@pytest.fixture
def relu(tmp_path: Path) -> Path:
    project = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", project)
    generate(load_config(project), host_record=False)
    return project


def test_every_nix_file_parses(tmp_path: Path) -> None:
    rendered = tmp_path / "flake.nix"
    rendered.write_text(render_flake(FlakeSettings()))
    files = [*ROOT.glob("nix/**/*.nix"), ROOT / "flake.nix"]
    for path in [*files, rendered]:
        done = subprocess.run(
            ["nix-instantiate", "--parse", str(path)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{path}: {done.stderr}"
    assert len(files) >= 12


def test_each_system_and_parent_dirs() -> None:
    util = f"(import {LIB}/util.nix)"
    assert nix_eval(
        f'{util}.eachSystem [ "a" "b" ] (s: {{ packages.x = s; variants = [ s ]; }})'
    ) == {"packages": {"a": {"x": "a"}, "b": {"x": "b"}}, "variants": {"a": ["a"], "b": ["b"]}}
    assert nix_eval(f'{util}.parentDirs "a/b/c.h"') == ["a", "a/b"]
    assert nix_eval(f'{util}.parentDirs "build.toml"') == []


@pytest.mark.parametrize("value", ["it's", "$(touch /tmp/kernelnix-pwned)", "a\nb'\\'", "`x` $y"])
def test_shell_quote_is_one_literal_word(value: str) -> None:
    quoted = nix_eval(f"(import {LIB}/util.nix).shellQuote {nix_string(value)}")
    done = subprocess.run(
        ["sh", "-c", f"printf %s {quoted}"], capture_output=True, text=True, check=True
    )
    assert done.stdout == value


def plan_error(project: Path) -> str:
    expression = f"""
      (import {LIB}/plan.nix {{ util = import {LIB}/util.nix; path = {nix_path(project)}; }}).name
    """
    done = nix_eval(expression, check=False)
    assert done.returncode != 0
    stderr: str = done.stderr
    return stderr


def test_stale_plan_is_refused_with_the_fix(relu: Path) -> None:
    (relu / "build.toml").write_text((relu / "build.toml").read_text() + "\n# edited\n")
    message = plan_error(relu)
    assert "kernelnix-plan.json is stale: build.toml changed" in message
    assert "run `kernelnix generate`" in message


def test_plan_missing_a_python_file_is_stale(relu: Path) -> None:
    (relu / "torch-ext" / "relu" / "extra.py").write_text("X = 1\n")
    assert "its sources lack torch-ext/relu/extra.py" in plan_error(relu)


def test_missing_source_file_is_named(relu: Path) -> None:
    (relu / "relu_cpu" / "relu_cpu.cpp").unlink()
    assert "the plan's sources relu_cpu/relu_cpu.cpp do not exist" in plan_error(relu)


def test_missing_plan_is_refused_with_the_fix(relu: Path) -> None:
    (relu / "kernelnix-plan.json").unlink()
    assert "kernelnix-plan.json is missing" in plan_error(relu)


def offered(project: Path, system: str = "x86_64-linux") -> list[str]:
    expression = f"""
      let
        path = {nix_path(project)};
        util = import {LIB}/util.nix;
        plan = import {LIB}/plan.nix {{ inherit util path; }};
        tc = import {HOST_TOOLCHAIN} {{ inherit util; kernelnixSrc = "/kernelnix"; }}
          {{ inherit path plan; }};
      in builtins.filter (n: tc.offers "{system}" n plan.variants."{system}".${{n}})
        plan.systems."{system}".variants
    """
    result: list[str] = nix_eval(expression)
    return result


def write_record(project: Path, variants: list[str], system: str = "x86_64-linux") -> None:
    record = {
        "schema-version": SCHEMA_VERSION,
        "system": system,
        "python": "/usr/bin/python3",
        "path": ["/usr/bin", "/bin"],
        "variants": variants,
        "not-buildable": {},
    }
    (project / HOST_FILE).write_text(json.dumps(record))


def test_host_offers_the_variants_of_the_record(relu: Path) -> None:
    cuda = ["torch212-cxx11-cpu-x86_64-linux", "torch212-cxx11-cu126-x86_64-linux"]
    write_record(relu, cuda)
    assert offered(relu) == cuda
    assert offered(relu, "aarch64-linux") == []
    write_record(relu, [])
    assert offered(relu) == []


def test_host_without_record_guesses_newest_cpu(tmp_path: Path, relu: Path) -> None:
    assert offered(relu) == ["torch213-cxx11-cpu-x86_64-linux"]
    assert offered(relu, "aarch64-darwin") == ["torch213-cpu-aarch64-darwin"]
    for example, expected in [
        ("relu-stable-abi", ["torch-stable-abi212-cpu-x86_64-linux"]),
        ("relu-noarch", ["torch-cpu"]),
    ]:
        project = tmp_path / example
        shutil.copytree(EXAMPLES / example, project)
        generate(load_config(project), host_record=False)
        assert offered(project) == expected, example


def test_hostile_repo_id_reaches_ci_test_as_one_word(relu: Path, tmp_path: Path) -> None:
    repo_id = "org/x'$(touch " + str(tmp_path / "pwned") + ')\'"${builtins.abort "x"}'
    toml = relu / "build.toml"
    toml.write_text(toml.read_text().replace('"kernelnix-examples/relu"', json.dumps(repo_id)))
    generate(load_config(relu), host_record=False)
    write_record(relu, ["torch213-cxx11-cpu-x86_64-linux"])
    expression = f"""
      let
        flake = (import {LIB} {{ root = {nix_path(ROOT)}; }}).kernelFlake {{
          self = {{ outPath = {nix_path(relu)}; }};
        }};
      in flake.packages.x86_64-linux.ci-test.text
    """
    text: str = nix_eval(expression)
    export = next(line for line in text.splitlines() if line.startswith("export LOCAL_KERNELS="))
    done = subprocess.run(
        ["sh", "-c", f'{export}; printf %s "$LOCAL_KERNELS"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith(repo_id + "=/nix/store/")
    assert not (tmp_path / "pwned").exists()


def test_hermetic_toolchain_explains_what_is_missing(relu: Path) -> None:
    expression = f"""
      (import {LIB} {{ root = {nix_path(ROOT)}; }}).kernelFlake {{
        self = {{ outPath = {nix_path(relu)}; }};
        toolchain = "hermetic";
      }}
    """
    done = nix_eval(f"({expression}).variants", check=False)
    assert 'toolchain "hermetic" needs a nixpkgs input' in done.stderr


def test_the_library_has_exactly_the_toolchains_kernelnix_offers(relu: Path) -> None:
    """One list of names (matrix.json): a directory each under nix/toolchains/,
    each accepted by kernelFlake, any other name refused with the list."""
    directories = sorted(p.name for p in (ROOT / "nix" / "toolchains").iterdir() if p.is_dir())
    assert directories == sorted(TOOLCHAINS)
    # A nixpkgs input that does not exist: listing variants never imports it.
    library = f"import {LIB} {{ root = {nix_path(ROOT)}; inputs.nixpkgs = /nonexistent; }}"
    assert nix_eval(f"({library}).toolchainNames") == list(TOOLCHAINS)
    kernel = f"{{ outPath = {nix_path(relu)}; }}"
    flake = f"({library}).kernelFlake {{ self = {kernel}; toolchain = t; }}"
    for name in TOOLCHAINS:
        variants = nix_eval(f"let t = {nix_string(name)}; in ({flake}).variants")
        assert variants["x86_64-linux"], name
    done = nix_eval(f'let t = "cross"; in ({flake}).variants', check=False)
    names = ", ".join(sorted(TOOLCHAINS))
    assert f'unknown toolchain "cross"; use one of: {names}' in done.stderr
