"""End to end with real Nix and the host toolchain: the examples' flakes build,
load through `kernels`, run their kernels_ci tests, copy, rebuild nothing when
nothing changed, and the flake template builds right after `nix flake init`.

Each example is built once per session (the `built` fixture); tests that change
a project work on a copy, which reuses the same store paths.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from fresh_python import run_python
from nix_projects import clone_worktree, git, kernelnix_clone, make_project, nix, nix_environment
from paths import EXAMPLES
from terminal import run_on_terminal

from kernelnix.host.system import current_system

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

SYSTEM = current_system()


@dataclass(frozen=True)
class Flake:
    url: str
    env: dict[str, str]


@dataclass(frozen=True)
class Built:
    project: Path
    env: dict[str, str]
    bundle: Path
    variants: list[str]
    ci_variant: str


@pytest.fixture(scope="session")
def kernelnix_flake(tmp_path_factory: pytest.TempPathFactory) -> Flake:
    url = clone_worktree(tmp_path_factory.mktemp("kernelnix"))
    env = nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", url)
    return Flake(url, env)


# multi-kernel's bundle is about 2 minutes more: `pytest --heavy`.
@pytest.fixture(
    scope="session", params=["relu", pytest.param("multi-kernel", marks=pytest.mark.heavy)]
)
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, kernelnix_flake: Flake
) -> Built:
    example = EXAMPLES / request.param
    if not example.is_dir():
        pytest.skip(f"no example {request.param}")
    env = kernelnix_flake.env
    project = make_project(
        example, tmp_path_factory.mktemp("built") / example.name, kernelnix_flake.url, env
    )
    nix(project, env, "build", ".#bundle")
    variants = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    ci_variant = next(v for v in plan["systems"][SYSTEM]["ci-order"] if v in variants)
    return Built(project, env, (project / "result").resolve(), variants, ci_variant)


def copy_project(built: Built, dest: Path) -> Path:
    shutil.copytree(built.project, dest, symlinks=True)
    return dest


def test_bundle_holds_the_variants_and_loads_with_kernels(built: Built) -> None:
    plan = json.loads((built.project / "kernelnix-plan.json").read_text())
    bundled = [v for v in plan["systems"][SYSTEM]["bundle"] if v in built.variants]
    assert sorted(p.name for p in built.bundle.iterdir()) == sorted(bundled)
    assert bundled, "the host toolchain should build the CPU variant here"
    script = (
        "import sys, json; from pathlib import Path; from kernels import get_local_kernel\n"
        "kernel = get_local_kernel(Path(sys.argv[1]))\n"
        "print(json.dumps(sorted(n for n in dir(kernel) if not n.startswith('_'))))\n"
    )
    names = json.loads(run_python(script, str(built.bundle)))
    assert "ops" in names or names, names
    # Linux variants are built for publishing (the glibc 2.27 target); noarch ones too.
    for name in bundled:
        metadata = json.loads((built.bundle / name / "metadata.json").read_text())
        assert metadata["provenance"]["kernelnix"]["redistributable"] is True, name
        assert metadata["provenance"]["kernelnix"]["policy"] == "kernel", name


def test_relu_computes_through_kernels(built: Built) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    script = (
        "import sys, torch; from pathlib import Path; from kernels import get_local_kernel\n"
        "relu = get_local_kernel(Path(sys.argv[1]))\n"
        "print(relu.relu(torch.tensor([-1.0, 2.0])).tolist())\n"
    )
    assert run_python(script, str(built.bundle)).strip() == "[0.0, 2.0]"


def test_nothing_rebuilds_without_a_change(built: Built, tmp_path: Path) -> None:
    dry = nix(built.project, built.env, "build", "--dry-run", ".#bundle")
    assert "will be built" not in dry.stderr, dry.stderr
    nix(built.project, built.env, "build", ".#bundle", "-o", str(tmp_path / "again"))
    assert (tmp_path / "again").resolve() == built.bundle
    # A file outside the plan's sources changes nothing either.
    copy = copy_project(built, tmp_path / "copy")
    (copy / "README.md").write_text("edited\n")
    (copy / "notes.txt").write_text("new\n")
    git(copy, "add", "-A")
    dry = nix(copy, built.env, "build", "--dry-run", ".#bundle")
    assert "will be built" not in dry.stderr, dry.stderr


def test_metadata_records_the_commit_nix_builds(built: Built, tmp_path: Path) -> None:
    """The plan records the commit of `generate`; a later commit must show instead."""
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    git(copy, "commit", "-q", "-m", "first")
    (copy / "README.md").write_text("a later commit\n")
    git(copy, "commit", "-q", "-am", "second")
    head = git(copy, "rev-parse", "HEAD").strip()
    variant = built.ci_variant
    nix(copy, built.env, "build", f".#{variant}", "-o", str(tmp_path / "out"))
    metadata = json.loads((tmp_path / "out" / variant / "metadata.json").read_text())
    assert metadata["provenance"]["kernel"] == {"commit": head, "dirty": False}
    assert metadata["id"].endswith(f"_{head[:7]}")


def test_a_dirty_tree_keeps_its_unique_id_while_it_is_edited(
    kernelnix_flake: Flake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unique part of the op namespace (each variant's `uniqueId`): the sources' hash
    before any commit, the short commit of a clean tree, and for a dirty tree one id per
    HEAD commit, which edits leave alone (so a rebuild does not compile the bindings that
    expand it again): `dirtyShortRev`, or on Nix older than 2.15 the commit's time."""
    env = kernelnix_flake.env
    project = make_project(EXAMPLES / "relu", tmp_path / "relu", kernelnix_flake.url, env)
    variant = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)[0]
    source = project / "relu_cuda" / "relu.cu"

    def unique_id() -> str:
        return nix(project, env, "eval", "--raw", f".#{variant}.uniqueId").stdout

    def edit(line: str) -> str:
        source.write_text(source.read_text() + f"// {line}\n")
        git(project, "add", "-A")
        return unique_id()

    uncommitted = unique_id()
    assert uncommitted.endswith("_dirty")
    assert edit("an edit before the first commit") not in {uncommitted, ""}

    dirty_ids = []
    # Committed a second apart: the commit's time, in UTC, is Nix 2.8's dirty id.
    for commit, second in (("first", "00"), ("second", "01")):
        monkeypatch.setenv("GIT_COMMITTER_DATE", f"2026-11-27T01:00:{second}Z")
        git(project, "commit", "-qm", commit)
        short = git(project, "rev-parse", "--short=7", "HEAD").strip()
        assert unique_id() == short
        dirty = edit(f"a first edit of the {commit} commit")
        assert dirty in {f"{short}_dirty", f"202611270100{second}_dirty"}
        assert edit(f"a second edit of the {commit} commit") == dirty
        dirty_ids.append(dirty)
    assert dirty_ids[0] != dirty_ids[1]


def test_ci_tests_pass_against_the_built_variant(built: Built) -> None:
    ci_test = nix(built.project, built.env, "eval", "--raw", ".#ci-test.drvPath").stdout
    per_variant = f".#ciTests.{built.ci_variant}"
    assert (
        nix(built.project, built.env, "eval", "--raw", f"{per_variant}.drvPath").stdout == ci_test
    )
    done = nix(built.project, built.env, "run", per_variant, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout or "no kernels_ci tests selected" in done.stdout


def test_ci_test_fails_on_a_failing_test(built: Built, tmp_path: Path) -> None:
    copy = copy_project(built, tmp_path / "copy")
    (copy / "tests").mkdir(exist_ok=True)
    (copy / "tests" / "test_planted_failure.py").write_text(
        "import pytest\n\n\n@pytest.mark.kernels_ci\ndef test_planted_failure():\n"
        "    assert 1 == 2\n"
    )
    git(copy, "add", "-A")
    done = nix(copy, built.env, "run", ".#ci-test", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_planted_failure" in done.stdout


def test_ci_test_without_tests_passes(built: Built, tmp_path: Path) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    shutil.rmtree(copy / "tests")
    git(copy, "add", "-A")
    assert "will be built" not in nix(copy, built.env, "build", "--dry-run", ".#bundle").stderr
    done = nix(copy, built.env, "run", ".#ci-test")
    assert "no tests/ directory; nothing to run" in done.stdout


def test_build_and_copy(built: Built, tmp_path: Path) -> None:
    copy = copy_project(built, tmp_path / "copy")
    nix(copy, built.env, "run", ".#build-and-copy")
    copied = sorted(p.name for p in (copy / "build").iterdir())
    assert copied == sorted(p.name for p in built.bundle.iterdir())
    metadata = copy / "build" / copied[0] / "metadata.json"
    assert os.access(metadata, os.W_OK)


def test_build_and_upload(built: Built, tmp_path: Path) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    # Checked under the publishing policy, which the host build against the glibc
    # 2.27 target passes (tests/e2e/test_publish.py: hostGlibc = true is refused).
    done = nix(copy, built.env, "run", ".#build-and-upload", "--", "--dry-run")
    assert "checked under the publishing policy (kernel):" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("dry run: nothing was sent to")
    assert (copy / "build" / built.ci_variant / "metadata.json").is_file()
    toml = copy / "build.toml"
    toml.write_text(toml.read_text().replace('repo-id = "kernelnix-examples/relu"', ""))
    subprocess.run(["kernelnix", "generate", str(copy)], check=True, env=built.env)
    git(copy, "add", "-A")
    done = nix(copy, built.env, "eval", "--raw", ".#build-and-upload.drvPath", check=False)
    assert done.returncode != 0
    assert "build-and-upload needs the Hub repo: set `repo-id`" in done.stderr


def test_stale_plan_is_computed_again_with_a_warning(built: Built, tmp_path: Path) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    (copy / "build.toml").write_text((copy / "build.toml").read_text() + "\n# edited\n")
    git(copy, "add", "-A")
    done = nix(copy, built.env, "eval", "--json", ".#variants")
    assert json.loads(done.stdout) == built.variants
    assert "kernelnix-plan.json is stale: build.toml changed" in done.stderr
    assert "`kernelnix generate` then `git add kernelnix-plan.json` skips that" in done.stderr


def test_test_shell_loads_the_built_kernel(built: Built) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    load = (
        "import os; from pathlib import Path; from kernels import get_local_kernel; "
        "print(get_local_kernel(Path(os.environ['KERNEL_PATH'])).__file__)"
    )
    done = nix(
        built.project,
        built.env,
        "develop",
        ".#test",
        "-c",
        "sh",
        "-c",
        f'"$KERNELNIX_PYTHON" -c "{load}" && echo "$PYTHONPATH" "$LOCAL_KERNELS"',
    )
    file, python_path, local_kernels = done.stdout.split()
    assert file.startswith("/nix/store/") and f"/{built.ci_variant}/" in file
    assert python_path.startswith("/nix/store/") and python_path.endswith(built.ci_variant)
    assert local_kernels.startswith("kernelnix-examples/relu=/nix/store/")


def test_kernelnix_commands_run_nix(built: Built) -> None:
    if built.project.name != "relu":
        pytest.skip("relu only")
    listed = subprocess.run(
        ["kernelnix", "list-variants", "--nix", str(built.project)],
        capture_output=True,
        text=True,
        env=built.env,
        check=True,
    )
    assert listed.stdout.split() == built.variants
    assert "+ nix " in listed.stderr and "eval --json" in listed.stderr
    built_cli = subprocess.run(
        ["kernelnix", "build", str(built.project), "--variant", built.ci_variant,
         "-L", "--max-jobs", "1", "--cores", "2"],
        capture_output=True,
        text=True,
        env=built.env,
    )  # fmt: skip
    assert built_cli.returncode == 0, built_cli.stderr
    assert (
        "+ nix " in built_cli.stderr and f"{built.project}#{built.ci_variant}" in built_cli.stderr
    )
    assert "--print-build-logs --max-jobs 1 --cores 2" in built_cli.stderr
    assert (built.project / "result" / built.ci_variant / "metadata.json").is_file()


def run_kernelnix(built: Built, *args: str, input: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kernelnix", *args], input=input, capture_output=True, text=True, env=built.env
    )


def test_dev_and_test_shells_through_kernelnix(built: Built, tmp_path: Path) -> None:
    """kernel-builder's devshell/testshell: `nix develop` on the flake's shells, on a
    terminal (bash reads the shell's environment only when interactive)."""
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    show = 'echo "shown: $KERNELNIX_VARIANT ${PYTHONPATH##*/}"; exit\n'
    expected = f"shown: {built.ci_variant} {built.ci_variant}"
    code, output = run_on_terminal(["kernelnix", "testshell", str(copy)], show, built.env)
    assert code == 0, output
    assert f"{copy}#test" in output and expected in output
    code, output = run_on_terminal(
        ["kernelnix", "devshell", "--variant", built.ci_variant, str(copy)], show, built.env
    )
    assert code == 0, output
    assert f"{copy}#devShells.{built.ci_variant}" in output
    assert f"shown: {built.ci_variant} " in output
    unknown = run_kernelnix(built, "testshell", "--variant", "torch-bogus", str(copy))
    assert unknown.returncode == 2
    assert "the flake does not build variant 'torch-bogus'" in unknown.stderr
    assert f"pick one of: {', '.join(built.variants)}" in unknown.stderr


def test_build_and_upload_one_variant(built: Built, tmp_path: Path) -> None:
    """`build-and-upload --variant` builds that variant alone into result/ and uploads
    it (a dry run here): built against the glibc 2.27 target, it passes the
    publishing policy."""
    if built.project.name != "relu":
        pytest.skip("relu only")
    copy = copy_project(built, tmp_path / "copy")
    args = ["build-and-upload", "--variant", built.ci_variant, "--dry-run", "--no-import"]
    done = run_kernelnix(built, *args, str(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  {built.ci_variant}: ok under policy kernel" in done.stdout
    assert "1 variant(s) for kernelnix-examples/relu" in done.stdout
    assert [p.name for p in (copy / "result").iterdir()] == [built.ci_variant]


def test_kernelnix_flake_package_runs_kernelnix(kernelnix_flake: Flake, tmp_path: Path) -> None:
    done = nix(
        tmp_path, kernelnix_flake.env, "run", f"{kernelnix_flake.url}#kernelnix", "--", "--version"
    )
    assert "kernelnix" in done.stdout


def test_flake_template_builds_after_init(tmp_path: Path) -> None:
    """The template builds with the default toolchain, the hermetic one, in the
    sandbox: every CPU variant of the locked wheels (a clone of kernelnix whose
    lock keeps Torch 2.13's CPU build set), and its ci-test passes."""
    url, env = kernelnix_clone(tmp_path, ("2.13-cpu",))
    project = tmp_path / "new-kernel"
    project.mkdir()
    git(project, "init", "-q")
    nix(project, env, "flake", "init", "-t", f"{url}#default")
    git(project, "add", "-A")
    nix(project, env, "build", "--option", "sandbox", "true")
    variants = [p.name for p in (project / "result").iterdir()]
    assert variants == [f"torch213-cxx11-cpu-{SYSTEM}"]
    done = nix(project, env, "run", ".#ci-test", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
