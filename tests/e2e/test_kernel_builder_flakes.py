"""kernel-builder's flakes, written the way kernels-community writes them, built
by kernelnix with only their input URL changed and no `kernelnix generate` run.

The kernels in tests/data/kernel_builder carry kernel-builder's flake.nix
(`kernel-builder.lib.genKernelFlakeOutputs { inherit self; path = ./.; }`):
a CPU kernel (with a CARD.md template), a noarch kernel, and a CPU + CUDA
kernel whose flake passes `pythonCheckInputs` and `torchVersions`. Each is
evaluated (`.#backendCi`), built (`.#bundle`, `.#ci`) with the host toolchain
and tested (`nix run .#ci-test`) with real Nix; the plan is computed during
evaluation (import from derivation), as docs/flake.md describes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from nix_projects import (
    UPSTREAM_INPUT,
    clone_worktree,
    git,
    kernel_builder_project,
    nix,
    nix_environment,
)
from paths import TESTS

from kernelnix.config import load_config
from kernelnix.core.version import Version
from kernelnix.host.system import current_system
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.variants.names import VariantName

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

KERNELS = TESTS / "data" / "kernel_builder"
SYSTEM = current_system()
# The Torch of the Python the host toolchain finds (the tests' own): without a host
# record, the flake probes this machine and builds its variants.
INSTALLED_TORCH = Version.parse(".".join(torch.__version__.split("+")[0].split(".")[:2]))


def cpu_variant(version: Version = INSTALLED_TORCH) -> str:
    return VariantName("arch", "cpu", None, version, SYSTEM).render()


def noarch_arch_name(kernel: str, variant: str) -> str:
    """kernel-builder's arch variant name of a noarch variant: that of the build set
    it is built from (the plan's: bundle first, then the newest Torch)."""
    plan = build_plan(load_config(KERNELS / kernel), PlanOptions(systems=(SYSTEM,)))
    found = plan.variants[SYSTEM][variant]
    version = Version.parse(found.backend_version) if found.backend_version else None
    return VariantName("arch", found.backend, version, Version.parse(found.torch), SYSTEM).render()


# What the host toolchain builds of each kernel here without a host record (the CPU
# variant of this machine's Torch; noarch variants of every backend), and the names
# kernel-builder gives: `variants` (the Hub's) and `archVariants`.
EXPECTED = {
    "fused-add": ([cpu_variant()], [cpu_variant()]),
    "gelu-tanh": (
        ["torch-cpu", "torch-cuda"],
        [noarch_arch_name("gelu-tanh", "torch-cpu"), noarch_arch_name("gelu-tanh", "torch-cuda")],
    ),
    "silu-and-mul": ([cpu_variant(Version.parse("2.13"))], [cpu_variant(Version.parse("2.13"))]),
}
# The backends `.#backendCi` names for each.
BACKEND_CI = {"fused-add": ["cpu"], "gelu-tanh": ["cpu", "cuda"], "silu-and-mul": ["cpu"]}


@dataclass(frozen=True)
class Flake:
    url: str
    env: dict[str, str]


@dataclass(frozen=True)
class Built:
    name: str
    project: Path
    env: dict[str, str]
    bundle: Path


@pytest.fixture(scope="session")
def kernelnix_flake(tmp_path_factory: pytest.TempPathFactory) -> Flake:
    url = clone_worktree(tmp_path_factory.mktemp("kernelnix"))
    return Flake(url, nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", url))


def kernel_project(name: str, dest: Path, kernelnix_url: str) -> Path:
    """A copy of the kernel whose flake's input points at kernelnix, staged in git."""
    return kernel_builder_project(KERNELS / name, dest, kernelnix_url)


@pytest.fixture(scope="session")
def build(
    tmp_path_factory: pytest.TempPathFactory, kernelnix_flake: Flake
) -> Callable[[str], Built]:
    """`build(name)`: the kernel's project with its bundle built, once per session."""
    done: dict[str, Built] = {}

    def built(name: str) -> Built:
        if name not in done:
            dest = tmp_path_factory.mktemp("kb") / name
            project = kernel_project(name, dest, kernelnix_flake.url)
            nix(project, kernelnix_flake.env, "build", ".#bundle")
            done[name] = Built(name, project, kernelnix_flake.env, (project / "result").resolve())
        return done[name]

    return built


ALL = pytest.mark.parametrize("name", sorted(EXPECTED))


def eval_json(built: Built, installable: str, *args: str) -> object:
    return json.loads(nix(built.project, built.env, "eval", "--json", installable, *args).stdout)


def test_the_kernels_carry_kernel_builders_flake() -> None:
    for name in EXPECTED:
        text = (KERNELS / name / "flake.nix").read_text()
        assert UPSTREAM_INPUT in text
        assert "kernel-builder.lib.genKernelFlakeOutputs {" in text
        assert not (KERNELS / name / "kernelnix-plan.json").exists()


@ALL
def test_backend_ci_lists_what_the_host_builds(build: Callable[[str], Built], name: str) -> None:
    built = build(name)
    names = eval_json(built, ".#backendCi", "--apply", "builtins.attrNames")
    assert names == BACKEND_CI[name]
    assert not (built.project / "kernelnix-plan.json").exists()


@ALL
def test_variant_lists_have_kernel_builders_shape(build: Callable[[str], Built], name: str) -> None:
    built = build(name)
    variants, arch_variants = EXPECTED[built.name]
    assert eval_json(built, ".#variants") == variants
    assert eval_json(built, ".#archVariants") == arch_variants
    # ciTests and the shells: kernel-builder's arch keys, and kernelnix's variant names.
    keys = sorted(set(variants) | set(arch_variants))
    assert eval_json(built, ".#ciTests", "--apply", "builtins.attrNames") == keys
    for shells in ("devShells", "testShells"):
        installable = f".#devShells.{SYSTEM}.{shells}"
        assert eval_json(built, installable, "--apply", "builtins.attrNames") == keys


@ALL
def test_bundle_and_ci_hold_the_variant(
    build: Callable[[str], Built], name: str, tmp_path: Path
) -> None:
    built = build(name)
    variants, _ = EXPECTED[built.name]
    card = ["CARD.md"] if (built.project / "CARD.md").exists() else []
    assert sorted(p.name for p in built.bundle.iterdir()) == sorted(variants + card)
    cpu = [v for v in variants if "cuda" not in v]
    for installable, held in (
        (".#ci", variants),
        (".#backendCi.cpu", cpu),
        (".#backendBundle.cpu", cpu),
    ):
        link = tmp_path / installable.replace(".#", "").replace(".", "-")
        nix(built.project, built.env, "build", installable, "-o", str(link))
        assert sorted(p.name for p in link.iterdir()) == sorted(held + card), installable
        metadata = f"{variants[0]}/metadata.json"
        assert (link / metadata).read_bytes() == (built.bundle / metadata).read_bytes()


@ALL
def test_ci_test_passes(build: Callable[[str], Built], name: str) -> None:
    built = build(name)
    done = nix(built.project, built.env, "run", ".#ci-test")
    assert " passed" in done.stdout, done.stdout
    assert "failed" not in done.stdout, done.stdout


def test_the_bundle_has_the_rendered_card(build: Callable[[str], Built]) -> None:
    built = build("fused-add")
    card = (built.bundle / "CARD.md").read_text()
    assert "# kernelnix-tests/fused-add" in card
    assert "Functions: `fused_add`." in card
    assert "{{" not in card


def test_the_plan_follows_torch_versions(build: Callable[[str], Built]) -> None:
    built = build("silu-and-mul")
    plan_file = nix(
        built.project,
        built.env,
        "eval",
        "--raw",
        f".#{cpu_variant(Version.parse('2.13'))}.planFile",
    ).stdout
    plan = json.loads(Path(plan_file).read_text())
    assert plan["systems"]["x86_64-linux"]["variants"] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
    ]
    assert plan["systems"]["aarch64-darwin"]["variants"] == ["torch213-cpu-aarch64-darwin"]


def test_the_kernels_command_runs(build: Callable[[str], Built]) -> None:
    built = build("gelu-tanh")
    done = nix(built.project, built.env, "run", ".#kernels", "--", "--help")
    assert "usage:" in done.stdout


def test_a_committed_plan_is_the_same_plan(build: Callable[[str], Built], tmp_path: Path) -> None:
    """`kernelnix generate` keeps kernel-builder's flake.nix and commits the plan
    the flake would compute: the variant is the same derivation."""
    built = build("fused-add")
    variant = EXPECTED[built.name][0][0]
    attribute = f".#{variant}"

    def variant_and_plan(project: Path) -> tuple[str, str]:
        drv = nix(project, built.env, "eval", "--raw", f"{attribute}.drvPath").stdout
        plan = nix(project, built.env, "eval", "--raw", f"{attribute}.planFile").stdout
        return drv, plan

    computed = variant_and_plan(built.project)
    copy = tmp_path / "copy"
    shutil.copytree(built.project, copy, symlinks=True)
    flake = (copy / "flake.nix").read_text()
    done = subprocess.run(
        ["kernelnix", "generate", str(copy), "--no-host-record"],
        capture_output=True,
        text=True,
        env=built.env,
    )
    assert done.returncode == 0, done.stderr
    assert "kept" in done.stdout and (copy / "flake.nix").read_text() == flake
    git(copy, "add", "-A")
    assert variant_and_plan(copy) == computed


def flake_error(kernelnix_flake: Flake, tmp_path: Path, call: str) -> str:
    project = kernel_project("gelu-tanh", tmp_path / "gelu-tanh", kernelnix_flake.url)
    flake = project / "flake.nix"
    flake.write_text(
        flake.read_text().replace(
            "kernel-builder.lib.genKernelFlakeOutputs {\n      inherit self;", call
        )
    )
    git(project, "add", "-A")
    done = nix(project, kernelnix_flake.env, "eval", "--json", ".#variants", check=False)
    return f"{done.returncode}\n{done.stdout}\n{done.stderr}"


def test_old_name_works_with_a_warning(kernelnix_flake: Flake, tmp_path: Path) -> None:
    out = flake_error(
        kernelnix_flake, tmp_path, "kernel-builder.lib.genFlakeOutputs {\n      inherit self;"
    )
    assert out.startswith("0\n") and '["torch-cpu","torch-cuda"]' in out, out
    assert "lib.genFlakeOutputs is deprecated; call lib.genKernelFlakeOutputs" in out


def test_legacy_rev_without_self_works_with_a_warning(
    kernelnix_flake: Flake, tmp_path: Path
) -> None:
    """The legacy huggingface/kernel-builder's flakes pass `rev` (and only warned)."""
    out = flake_error(
        kernelnix_flake, tmp_path, 'kernel-builder.lib.genKernelFlakeOutputs {\n      rev = "abc";'
    )
    assert out.startswith("0\n") and '["torch-cpu","torch-cuda"]' in out, out
    assert "the `rev` argument of genKernelFlakeOutputs is deprecated" in out
    assert "inherit self;" in out


def test_do_get_kernel_check_false_skips_the_import(kernelnix_flake: Flake, tmp_path: Path) -> None:
    """A kernel that cannot be imported at build time (kernel-builder's one
    use of doGetKernelCheck = false) fails the build, unless the flake says so."""
    project = kernel_project("gelu-tanh", tmp_path / "gelu-tanh", kernelnix_flake.url)
    init = project / "torch-ext" / "gelu_tanh" / "__init__.py"
    init.write_text(init.read_text() + '\nraise ImportError("needs a device at import")\n')
    git(project, "add", "-A")
    env = kernelnix_flake.env
    failed = nix(project, env, "build", ".#torch-cpu", check=False)
    assert failed.returncode != 0
    assert "needs a device at import" in failed.stderr
    flake = project / "flake.nix"
    flake.write_text(
        flake.read_text().replace("path = ./.;", "path = ./.;\n      doGetKernelCheck = false;")
    )
    git(project, "add", "-A")
    nix(project, env, "build", ".#torch-cpu")
    assert (project / "result" / "torch-cpu" / "__init__.py").is_file()


def test_ci_test_names_a_module_the_tests_miss(kernelnix_flake: Flake, tmp_path: Path) -> None:
    project = kernel_project("gelu-tanh", tmp_path / "gelu-tanh", kernelnix_flake.url)
    (project / "tests" / "test_missing.py").write_text("import kernelnix_absent_module\n")
    git(project, "add", "-A")
    done = nix(project, kernelnix_flake.env, "run", ".#ci-test", check=False)
    assert done.returncode != 0
    assert (
        "ci-test: the tests import 'kernelnix_absent_module', which " in done.stdout
        and "lacks; install it into the host Python" in done.stdout
    ), done.stdout
