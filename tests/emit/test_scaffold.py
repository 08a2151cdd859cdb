"""`kernelnix init`: the scaffold, its names, and that it checks, plans, builds and passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from paths import ROOT

from kernelnix.cli import main
from kernelnix.emit.card import DEFAULT_TEMPLATE
from kernelnix.emit.scaffold import KernelNames, resolve_target, scaffold_files

NAMES = KernelNames("my-org", "add_one")
SOURCES = {
    "cpu": ["add_one_cpu/add_one_cpu.cpp"],
    "cuda": ["add_one_cuda/add_one.cu"],
    "rocm": ["add_one_cuda/add_one.cu"],
    "metal": ["add_one_metal/add_one.metal", "add_one_metal/add_one.mm"],
    "xpu": ["add_one_xpu/add_one.cpp"],
}
COMMON = [
    ".gitattributes",
    ".gitignore",
    "CARD.md",
    "benchmarks/benchmark.py",
    "build.toml",
    "example.py",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/test_add_one.py",
    "torch-ext/add_one/__init__.py",
    "torch-ext/torch_binding.cpp",
    "torch-ext/torch_binding.h",
]
FLAKE_FILES = ["flake.nix", "kernelnix-plan.json"]


def kernelnix(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_template(golden: Callable[[str, str], None]) -> None:
    files = scaffold_files(
        NAMES, ["cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu"], "MIT"
    )
    assert sorted(files) == sorted({*COMMON, *(s for paths in SOURCES.values() for s in paths)})
    for path, text in files.items():  # `.golden`: no stray conftest.py, test or .gitignore
        golden(f"init/all/{path}.golden", text)


@pytest.mark.parametrize("backends", [["cpu"], ["cuda"], ["rocm"], ["metal", "xpu"]])
def test_sources_follow_the_backends(backends: list[str]) -> None:
    files = scaffold_files(NAMES, backends, "Apache-2.0")
    sources = sorted({s for backend in backends for s in SOURCES[backend]})
    assert sorted(files) == sorted([*COMMON, *sources])


def test_build_toml_for_cpu_and_cuda(golden: Callable[[str, str], None]) -> None:
    golden(
        "init/cpu-cuda/build.toml.golden",
        scaffold_files(NAMES, ["cpu", "cuda"], "Apache-2.0")["build.toml"],
    )


def test_the_card_is_the_default_template() -> None:
    assert scaffold_files(NAMES, ["cpu"], "MIT")["CARD.md"] == DEFAULT_TEMPLATE.read_text()


def test_init_writes_checks_plans_and_stages(cwd: Path) -> None:
    result = kernelnix("init", "--name", "my-org/add_one", "--backends", "cpu", "cuda")
    assert result.exit_code == 0, result.output
    assert "Initialized my-org/add-one in add-one" in result.output
    project = cwd / "add-one"
    staged = subprocess.run(
        ["git", "-C", str(project), "diff", "--cached", "--name-only"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    expected = [*COMMON, *SOURCES["cpu"], *SOURCES["cuda"], *FLAKE_FILES]
    assert set(expected) <= set(staged)
    assert set(staged) - set(expected) <= {"kernelnix-host.json"}
    check = kernelnix("check-config", str(project))
    assert check.exit_code == 0, check.output
    assert "backends cpu, cuda, 2 kernel section(s)" in check.output
    plan = kernelnix("plan", str(project), "-o", str(cwd / "plan.json"))
    assert plan.exit_code == 0, plan.output


def test_all_backends_check_and_plan(cwd: Path) -> None:
    assert kernelnix("init", "my-org/everything", "--backends", "all").exit_code == 0
    check = kernelnix("check-config", "everything")
    assert check.exit_code == 0, check.output
    assert "backends cann, cpu, cuda, metal, neuron, rocm, tpu, xpu, 5 kernel" in check.output
    plan = kernelnix("plan", "everything", "-o", str(cwd / "plan.json"))
    assert plan.exit_code == 0, plan.output


def test_a_path_after_the_backends_is_the_path(cwd: Path) -> None:
    result = kernelnix("init", "--backends", "cpu", "XPU", "elsewhere", "--name", "o/k-1")
    assert result.exit_code == 0, result.output
    assert (
        'backends = [\n    "cpu",\n    "xpu",\n]' in (cwd / "elsewhere" / "build.toml").read_text()
    )


def _no_hub() -> str:
    raise AssertionError("the names are given: the Hub is not asked")


@pytest.mark.parametrize(
    ("path", "name", "directory", "repo_id", "module"),
    [
        (None, "org/my_kernel", "my-kernel", "org/my-kernel", "my_kernel"),
        ("here", "org/relu2", "here", "org/relu2", "relu2"),
        ("org/fast-gelu", None, "fast-gelu", "org/fast-gelu", "fast_gelu"),
    ],
)
def test_names(
    path: str | None, name: str | None, directory: str, repo_id: str, module: str
) -> None:
    names, target = resolve_target(path, name, Path("/work"), hub_user=_no_hub)
    assert (target, names.repo_id, names.module) == (Path("/work") / directory, repo_id, module)


def test_class_name() -> None:
    assert KernelNames("o", "fast_gelu-v2").class_name == "FastGeluV2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["some-dir"], "HF_HUB_OFFLINE is set, so the Hub cannot tell who you are"),
        ([], "HF_HUB_OFFLINE is set, so the Hub cannot tell who you are"),
        (["--name", "no-owner"], "invalid --name 'no-owner': expected <owner>/<repo>"),
        (["--name", "o/Upper"], "invalid kernel name 'Upper'"),
        (["--name", "o/kk", "--backends", "gpu"], "unknown backend(s): gpu"),
    ],
)
def test_bad_input(cwd: Path, args: list[str], message: str) -> None:
    result = kernelnix("init", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert list(cwd.iterdir()) == []


def test_nothing_is_written_over_existing_files(cwd: Path) -> None:
    project = cwd / "add-one"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_add_one.py").write_text("mine\n")
    (project / "notes.txt").write_text("kept\n")
    result = kernelnix("init", "--name", "my-org/add_one", "--backends", "cpu")
    assert result.exit_code == 2
    assert "add-one/tests/test_add_one.py: already exists; nothing was written" in result.output
    assert sorted(p.name for p in project.rglob("*")) == ["notes.txt", "test_add_one.py", "tests"]

    result = kernelnix("init", "--name", "my-org/add_one", "--backends", "cpu", "--overwrite")
    assert result.exit_code == 0, result.output
    assert (project / "tests" / "test_add_one.py").read_text() != "mine\n"
    assert (project / "notes.txt").read_text() == "kept\n"


def test_fill_card_renders_the_scaffolds_card(cwd: Path) -> None:
    kernelnix("init", "--name", "my-org/add_one", "--backends", "cpu")
    result = kernelnix("fill-card", "add-one")
    assert result.exit_code == 0, result.output
    assert 'get_kernel("my-org/add-one", version=1)' in result.output
    assert "- `add_one`" in result.output
    assert "kernels benchmark my-org/add-one --version 1" in result.output


def _build_command_exists() -> bool:
    try:
        import kernelnix.compile.local  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _build_command_exists(), reason="kernelnix build --local is not there yet")
def test_the_cpu_kernel_builds_and_passes_its_tests(cwd: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("kernels")
    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    assert kernelnix("init", "--name", "my-org/add_one", "--backends", "cpu", "cuda").exit_code == 0
    project = cwd / "add-one"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNEL_PATH": ""}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    build = run("-m", "kernelnix", "build", "--local", ".")
    assert build.returncode == 0, build.stdout + build.stderr
    assert "built build/torch" in build.stdout
    tests = run("-m", "pytest", "-q", "-m", "kernels_ci", "-p", "no:cacheprovider", "tests")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout
    example = run("example.py")
    assert example.returncode == 0, example.stderr
    assert "tensor([1., 2., 3., 4., 5., 6., 7., 8.])" in example.stdout
