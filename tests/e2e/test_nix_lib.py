"""The Nix library, evaluated with nix-instantiate (no flakes, no builds):
helpers, the choice between the committed and a computed plan, the host
toolchain's choice of variants, quoting of build.toml values, and that every
Nix file parses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from paths import BUILD_OUTPUTS, EXAMPLES, ROOT

from kernelnix.config import load_config
from kernelnix.core.version import Version
from kernelnix.emit.escape import nix_string
from kernelnix.emit.flake import FlakeSettings, render_flake
from kernelnix.host.record import HOST_FILE, SCHEMA_VERSION
from kernelnix.project.generate import generate, nix_plan
from kernelnix.project.nix import explain_nix_error
from kernelnix.variants.matrix import TOOLCHAINS
from kernelnix.variants.names import VariantName, build_set_key

LIB = ROOT / "nix" / "lib"
HOST_TOOLCHAIN = ROOT / "nix" / "toolchains" / "host"

pytestmark = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="needs Nix")


def nix_eval(expression: str, check: bool = True) -> Any:
    done = subprocess.run(
        # Read-write: a host toolchain without a record builds its probe (IFD).
        [
            "nix-instantiate",
            "--eval",
            "--strict",
            "--json",
            "--read-write-mode",
            "--expr",
            expression,
        ],
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
    shutil.copytree(EXAMPLES / "relu", project, ignore=BUILD_OUTPUTS)
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


def chosen_plan(project: Path, tmp_path: Path) -> tuple[str, str]:
    """The `name` of the plan plan.nix gives, and the warning it printed.

    Without a usable kernelnix-plan.json it computes the plan with `step`
    (a derivation in the real library); here `step` hands back a directory
    whose plan is named "computed", so nothing is built.
    """
    computed = tmp_path / "computed"
    computed.mkdir(exist_ok=True)
    (computed / "kernelnix-plan.json").write_text(json.dumps({"name": "computed"}))
    expression = f"""
      let
        util = import {LIB}/util.nix;
        plans = import {LIB}/plan.nix {{ inherit util; systems = [ "x86_64-linux" ]; }} {{
          path = {nix_path(project)};
          buildSets = null;
          step = args: {{ outPath = {nix_string(str(computed))}; }};
        }};
      in (plans.forSystem "x86_64-linux").name
    """
    done = nix_eval(expression, check=False)
    assert done.returncode == 0, done.stderr
    name: str = json.loads(done.stdout)
    return name, done.stderr


def test_fresh_plan_is_used(relu: Path, tmp_path: Path) -> None:
    assert chosen_plan(relu, tmp_path) == ("relu", "")


def test_stale_plan_is_replaced_with_a_warning(relu: Path, tmp_path: Path) -> None:
    (relu / "build.toml").write_text((relu / "build.toml").read_text() + "\n# edited\n")
    name, warning = chosen_plan(relu, tmp_path)
    assert name == "computed"
    assert "kernelnix-plan.json is stale: build.toml changed" in warning
    assert "`kernelnix generate` then `git add kernelnix-plan.json` skips that" in warning


def test_plan_missing_a_python_file_is_stale(relu: Path, tmp_path: Path) -> None:
    (relu / "torch-ext" / "relu" / "extra.py").write_text("X = 1\n")
    name, warning = chosen_plan(relu, tmp_path)
    assert name == "computed"
    assert "its sources lack torch-ext/relu/extra.py" in warning


def test_missing_source_file_is_named(relu: Path, tmp_path: Path) -> None:
    (relu / "relu_cpu" / "relu_cpu.cpp").unlink()
    assert "its sources relu_cpu/relu_cpu.cpp do not exist" in chosen_plan(relu, tmp_path)[1]


def test_missing_plan_is_computed_silently(relu: Path, tmp_path: Path) -> None:
    (relu / "kernelnix-plan.json").unlink()
    assert chosen_plan(relu, tmp_path) == ("computed", "")


def not_offered(project: Path, system: str = "x86_64-linux") -> dict[str, str | None]:
    """The host toolchain's `notOffered` of every variant of the plan (None: offered)."""
    expression = f"""
      let
        path = {nix_path(project)};
        util = import {LIB}/util.nix;
        plans = import {LIB}/plan.nix {{ inherit util; systems = [ ]; }} {{
          inherit path;
          buildSets = null;
          step = throw "no step";
        }};
        plan = plans.forSystem "{system}";
        tc = import {HOST_TOOLCHAIN} {{ inherit util; kernelnixSrc = "{ROOT}"; }}
          {{ inherit path plan; }};
      in builtins.listToAttrs (map (n: {{
        name = n;
        value = tc.notOffered "{system}" n plan.variants."{system}".${{n}};
      }}) plan.systems."{system}".variants)
    """
    result: dict[str, str | None] = nix_eval(expression)
    return result


def offered(project: Path, system: str = "x86_64-linux") -> list[str]:
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    reasons = not_offered(project, system)
    return [n for n in plan["systems"][system]["variants"] if reasons[n] is None]


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
    assert set(not_offered(relu, "aarch64-linux").values()) == {"this machine is x86_64-linux"}
    write_record(relu, [])
    assert offered(relu) == []
    # The record's reason is the toolchain's.
    record = json.loads((relu / HOST_FILE).read_text())
    record["not-buildable"] = {"torch213-cxx11-cu130-x86_64-linux": "no CUDA Torch here"}
    (relu / HOST_FILE).write_text(json.dumps(record))
    reasons = not_offered(relu)
    no_tag = (
        ", and kernelnix-host.json records no Python tag to choose locked wheels by; "
        "run `kernelnix generate`"
    )
    assert reasons["torch213-cxx11-cu130-x86_64-linux"] == "no CUDA Torch here" + no_tag
    assert reasons["torch213-cxx11-cpu-x86_64-linux"] == "this machine cannot build it" + no_tag


LOCK = ROOT / "kernelnix" / "data" / "wheel-lock.json"


def locked_variants(project: Path, tag: str) -> list[str]:
    """The project's x86_64-linux variants whose build set the lock has for `tag`."""
    locked = json.loads(LOCK.read_text())["host"]["environments"]["x86_64-linux"].get(tag, {})
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    variants = plan["variants"]["x86_64-linux"]
    return [
        name
        for name in plan["systems"]["x86_64-linux"]["variants"]
        if variants[name]["kind"] in ("arch", "stable-abi")
        and build_set_key(
            variants[name]["torch"], variants[name]["backend"], variants[name]["backend-version"]
        )
        in locked
    ]


def test_host_offers_the_variants_of_locked_wheels(relu: Path) -> None:
    """A record naming a Python tag: every variant whose build set the lock has
    for that tag is offered whatever the record says; the others keep the
    record's reason and gain the lock's."""
    write_record(relu, [])
    record = json.loads((relu / HOST_FILE).read_text())
    record["python-tag"] = "cp311"
    record["not-buildable"] = {"torch212-cxx11-cu126-x86_64-linux": "no CUDA Torch here"}
    (relu / HOST_FILE).write_text(json.dumps(record))
    lock = json.loads(LOCK.read_text())["host"]
    expected = locked_variants(relu, "cp311")
    assert "torch214-cxx11-cu130-x86_64-linux" in expected
    assert "torch215-cxx11-cu132-x86_64-linux" in expected
    assert offered(relu) == expected
    reason = not_offered(relu)["torch212-cxx11-cu126-x86_64-linux"]
    assert (
        reason
        == "no CUDA Torch here, and " + (lock["missing"]["x86_64-linux"]["cp311"]["2.12-cuda-12.6"])
    )


def test_host_without_record_probes_this_machine(tmp_path: Path, relu: Path) -> None:
    """`kernelnix host-record` runs in a derivation: the CPU variants of those
    `kernelnix generate` would record (for relu, the one of this machine's Torch)."""
    installed = subprocess.run(
        ["python3", "-c", "import torch; print(''.join(torch.__version__.split('.')[:2]))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # Besides, every variant of locked wheels (test_host_offers_the_variants_of_locked_wheels).
    cpu = [v for v in offered(relu) if "-cpu-" in v]
    assert f"torch{installed}-cxx11-cpu-x86_64-linux" in cpu
    assert "torch214-cxx11-cu130-x86_64-linux" in offered(relu)
    for example in ("relu-stable-abi", "relu-noarch", "multi-kernel"):
        project = tmp_path / example
        shutil.copytree(EXAMPLES / example, project, ignore=BUILD_OUTPUTS)
        generate(load_config(project), toolchain="host", host_record=True)
        kinds = {
            name: variant["kind"]
            for name, variant in json.loads((project / "kernelnix-plan.json").read_text())[
                "variants"
            ]["x86_64-linux"].items()
        }
        record = json.loads((project / HOST_FILE).read_text())
        recorded = [v for v in record["variants"] if "cpu" in v or kinds[v] == "noarch"]
        locked = locked_variants(project, record["python-tag"])
        (project / HOST_FILE).unlink()
        assert offered(project) == [v for v in kinds if v in recorded or v in locked], example


def test_noarch_variants_are_offered_on_every_system(tmp_path: Path) -> None:
    """Python files and metadata: no record, and no probe, decides them."""
    project = tmp_path / "relu-noarch"
    shutil.copytree(EXAMPLES / "relu-noarch", project, ignore=BUILD_OUTPUTS)
    generate(load_config(project), host_record=False)
    write_record(project, [], system="aarch64-darwin")
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    for system in ("x86_64-linux", "aarch64-linux"):
        variants = plan["systems"][system]["variants"]
        assert variants and all(name.startswith("torch-") for name in variants)
        assert offered(project, system) == variants


def test_a_bundle_of_no_variant_fails_with_each_reason(relu: Path) -> None:
    record = {"torch213-cxx11-cu130-x86_64-linux": "no CUDA Torch here"}
    write_record(relu, [])
    data = json.loads((relu / HOST_FILE).read_text())
    (relu / HOST_FILE).write_text(json.dumps({**data, "not-buildable": record}))
    flake = f"""(import {LIB} {{ root = {nix_path(ROOT)}; }}).kernelFlake {{
        self = {{ outPath = {nix_path(relu)}; }};
        toolchain = "host";
      }}"""
    for output in ("bundle", "ci"):
        done = nix_eval(f"({flake}).packages.x86_64-linux.{output}.drvPath", check=False)
        assert done.returncode != 0
        assert (
            f"the host toolchain offers no variant of relu for the {output} on x86_64-linux:"
            in done.stderr
        )
        assert "torch213-cxx11-cu130-x86_64-linux: no CUDA Torch here" in done.stderr
        assert "torch213-cxx11-cpu-x86_64-linux: this machine cannot build it" in done.stderr
        explained = explain_nix_error(done.stderr)
        assert explained is not None and "the bundle would be empty" in explained.message


def test_a_bundle_of_no_variant_on_the_system_names_where_it_builds(tmp_path: Path) -> None:
    """A Metal-only kernel (like kernels-community's mlx-rmsnorm) on Linux: the plan has
    no variant here, so the error names the systems and backends it has."""
    project = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", project, ignore=BUILD_OUTPUTS)
    toml = project / "build.toml"
    text = toml.read_text().replace('["cpu", "cuda", "rocm", "xpu", "metal"]', '["metal"]')
    toml.write_text(text[: text.index("[kernel.relu]")] + text[text.index("[kernel.relu_metal]") :])
    generate(load_config(project), host_record=False)
    flake = f"""(import {LIB} {{ root = {nix_path(ROOT)}; }}).kernelFlake {{
        self = {{ outPath = {nix_path(project)}; }};
        toolchain = "host";
      }}"""
    done = nix_eval(f"({flake}).packages.x86_64-linux.bundle.drvPath", check=False)
    assert done.returncode != 0
    assert (
        "the host toolchain offers no variant of relu for the bundle on x86_64-linux:"
        " relu builds only for aarch64-darwin (metal); build it on such a machine"
    ) in done.stderr
    assert explain_nix_error(done.stderr) is not None


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
          toolchain = "host";
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


def test_hermetic_toolchain_lists_its_variants_from_data_alone(relu: Path) -> None:
    """No nixpkgs and nothing built: which variants the hermetic toolchain offers
    comes from the plan and the wheel lock (tests/e2e/test_hermetic.py builds them)."""
    expression = f"""
      (import {LIB} {{ root = {nix_path(ROOT)}; }}).kernelFlake {{
        self = {{ outPath = {nix_path(relu)}; }};
        toolchain = "hermetic";
      }}
    """
    variants = nix_eval(f"({expression}).packages.x86_64-linux.variants")
    assert "torch213-cxx11-cu130-x86_64-linux" in variants
    reasons = nix_eval(f"({expression}).notOffered.x86_64-linux")
    assert "is not locked" in reasons["torch213-cxx11-cu126-x86_64-linux"]


def test_the_library_has_exactly_the_toolchains_kernelnix_offers(relu: Path) -> None:
    """One list of names (matrix.json): a directory each under nix/toolchains/,
    each accepted by kernelFlake, any other name refused with the list."""
    directories = sorted(p.name for p in (ROOT / "nix" / "toolchains").iterdir() if p.is_dir())
    assert directories == sorted(TOOLCHAINS)
    library = f"import {LIB} {{ root = {nix_path(ROOT)}; }}"
    assert nix_eval(f"({library}).toolchainNames") == list(TOOLCHAINS)
    kernel = f"{{ outPath = {nix_path(relu)}; }}"
    flake = f"({library}).kernelFlake {{ self = {kernel}; toolchain = t; }}"
    for name in TOOLCHAINS:
        variants = nix_eval(
            f"let t = {nix_string(name)}; in ({flake}).packages.x86_64-linux.variants"
        )
        assert variants, name
    done = nix_eval(f'let t = "cross"; in ({flake}).packages.x86_64-linux.variants', check=False)
    names = ", ".join(sorted(TOOLCHAINS))
    assert f'unknown toolchain "cross"; use one of: {names}' in done.stderr


def test_arch_variant_names_match_the_python_grammar(tmp_path: Path) -> None:
    """util.archVariantName (kernel-builder's keys of ciTests and the shells)
    gives, for every variant of every example on every system, the Torch name
    kernelnix.variants.names gives the variant's build set."""
    cases: dict[str, dict[str, Any]] = {}
    expected: dict[str, str] = {}
    for example in sorted(p for p in EXAMPLES.iterdir() if (p / "build.toml").is_file()):
        plan = json.loads(nix_plan(load_config(example)).to_json())
        for system, variants in plan["variants"].items():
            for name, v in variants.items():
                key = f"{example.name} {name}"
                cases[key] = {"name": name, "variant": v}
                version = Version.parse(v["backend-version"]) if v["backend-version"] else None
                torch = Version.parse(v["torch"])
                arch = VariantName("arch", v["backend"], version, torch, system).render()
                expected[key] = name if v["kind"] == "tvm-ffi" else arch
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    found = nix_eval(
        f"""
          let util = import {LIB}/util.nix;
          in builtins.mapAttrs (key: case: util.archVariantName case.name case.variant)
            (builtins.fromJSON (builtins.readFile {nix_path(tmp_path / "cases.json")}))
        """
    )
    assert found == expected
    kinds = {case["variant"]["kind"] for case in cases.values()}
    assert {"arch", "noarch", "stable-abi"} <= kinds
