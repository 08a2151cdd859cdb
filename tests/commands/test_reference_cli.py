"""kernel-builder's command line in kernelnix: `init` without --name (the owner from
the Hub's whoami), `list-variants --arch`, `check-abi`, `check-builds`,
`create-pyproject [TARGET] --unique-id --kernel-sha --kernel-dirty`,
`clean-pyproject`, `devshell`/`testshell` and `build`'s Nix options, each run
through the CLI on copies of the examples, bad input included.

The Nix runs of devshell, testshell, `build -L --max-jobs --cores` and
`build-and-upload --variant` are in e2e/test_nix_flake.py; `upload --output-json`
and `-q` in publish/test_hub.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checks_corpus.corpus import Corpus, build_corpus
from click.testing import CliRunner, Result
from handmade import SYSTEM, copy_example, make_variant, plan_metadata
from hubserver import TOKEN, USER, FakeHub
from kernels._rust import Metadata as LoaderMetadata
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.host.system import current_system
from kernelnix.project.nix import FlakeProject, NixOptions, shell_command

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CPU = f"torch212-cxx11-cpu-{SYSTEM}"
LIBRARY = f"{plan_metadata('relu', CPU)['id']}.abi3.so"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def kernelnix(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


def assert_bad_input(result: Result, *messages: str) -> None:
    """Exit code 2, the messages on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    for message in messages:
        assert message in result.stderr
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ init


def init_with_hub(
    cwd: Path, *args: str, token: str | None = TOKEN
) -> subprocess.CompletedProcess[str]:
    """`kernelnix init` in a fresh process, online to the fake Hub only."""
    with FakeHub() as hub:
        env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url}
        env["HF_HOME"] = str(cwd.parent / "hf-home")  # no stored token
        env.pop("HF_TOKEN", None)
        if token is not None:
            env["HF_TOKEN"] = token
        done = subprocess.run(
            [sys.executable, "-m", "kernelnix", "init", "--backends", "cpu", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
        )
    assert hub.unexpected == []
    return done


def repo_id(project: Path) -> str:
    return str(tomllib.loads((project / "build.toml").read_text())["general"]["hub"]["repo-id"])


def test_init_names_the_current_directory_after_the_hub_user(tmp_path: Path) -> None:
    cwd = tmp_path / "add_one"
    cwd.mkdir()
    done = init_with_hub(cwd)
    assert done.returncode == 0, done.stderr
    assert repo_id(cwd) == f"{USER}/add-one"
    assert (cwd / "add_one_cpu" / "add_one_cpu.cpp").is_file()


def test_init_path_alone_is_the_directory_unless_it_reads_owner_repo(tmp_path: Path) -> None:
    done = init_with_hub(tmp_path, "fast-gelu")
    assert done.returncode == 0, done.stderr
    assert repo_id(tmp_path / "fast-gelu") == f"{USER}/fast-gelu"
    done = init_with_hub(tmp_path, "my-org/relu2")
    assert done.returncode == 0, done.stderr
    assert repo_id(tmp_path / "relu2") == "my-org/relu2"


def test_init_without_a_login_says_how_to_log_in(tmp_path: Path) -> None:
    cwd = tmp_path / "add-one"
    cwd.mkdir()
    done = init_with_hub(cwd, token=None)
    assert done.returncode == 2
    assert "not logged in to the Hugging Face Hub" in done.stderr
    assert "run `hf auth login`, or pass --name <owner>/<repo>" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(cwd.iterdir()) == []


def test_init_offline_asks_for_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    result = kernelnix("init", "--backends", "cpu")
    assert_bad_input(
        result,
        "error: --name: no owner for the kernel: HF_HUB_OFFLINE is set",
        "fix: pass --name <owner>/<repo>",
    )
    assert list(tmp_path.iterdir()) == []


def test_init_with_an_unreachable_hub_asks_for_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    with FakeHub() as hub:
        closed = hub.url  # nothing listens there once the server is gone
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", closed)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.chdir(tmp_path)
    result = kernelnix("init", "some-dir", "--backends", "cpu")
    assert_bad_input(result, "cannot ask the Hub who you are", "fix: pass --name <owner>/<repo>")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------- list-variants


def listed(*args: str) -> list[str]:
    result = kernelnix("list-variants", *args)
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_list_variants_arch_leaves_out_noarch_variants() -> None:
    noarch = str(EXAMPLES / "relu-noarch")
    assert listed(noarch) == ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]
    assert listed(noarch, "--arch") == []
    relu = str(EXAMPLES / "relu")
    assert listed(relu, "--arch") == listed(relu) != []
    result = kernelnix("list-variants", noarch, "--arch", "--json")
    assert json.loads(result.stdout) == {current_system(): {}}


# ------------------------------------------------ check-abi, check-builds


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build_corpus()


def rules(report: dict[str, Any]) -> set[str]:
    """The rules a variant's JSON report names."""
    return {v["rule"] for file in report["files"] for v in file["violations"]}


def variant_with(build: Path, library: Path, name: str = CPU) -> Path:
    """A variant of the relu example whose op library is `library`."""
    return make_variant(build, "relu", name, files={LIBRARY: library.read_bytes()})


def test_check_abi_holds_libraries_to_the_manylinux_level(tmp_path: Path, corpus: Corpus) -> None:
    variant_with(tmp_path / "build", corpus.path("glibc_234"))
    too_new = kernelnix("check-abi", str(tmp_path))
    assert too_new.exit_code == 1, too_new.output
    assert "[policy manylinux_2_28" in too_new.stdout
    assert "GLIBC_2.34" in too_new.stdout
    newer = kernelnix("check-abi", "-m", "manylinux_2_34", str(tmp_path))
    assert newer.exit_code == 0, newer.output
    assert f"ok    {CPU}: no violations" in newer.stdout


def test_check_abi_checks_the_python_stable_abi(tmp_path: Path, corpus: Corpus) -> None:
    variant_with(tmp_path / "build", corpus.path("py_nonabi3"))
    result = kernelnix("check-abi", "-p", "3.9", "--json", str(tmp_path))
    assert result.exit_code == 1, result.output
    (report,) = json.loads(result.stdout)["variants"]
    assert rules(report) == {"python-abi"}
    assert report["settings"]["python-abi"] == "3.9"


def test_check_abi_runs_only_the_binary_rules(tmp_path: Path, corpus: Corpus) -> None:
    variant = variant_with(tmp_path / "build", corpus.path("clean_c"))
    (variant / "metadata.json").write_text("{ not json")
    assert kernelnix("check-abi", str(tmp_path)).exit_code == 0
    assert kernelnix("check", "--no-import", str(tmp_path)).exit_code == 1


def test_check_builds_parses_each_metadata(tmp_path: Path) -> None:
    build = tmp_path / "build"
    make_variant(build, "relu", CPU)
    make_variant(build, "relu", f"torch212-cxx11-cu126-{SYSTEM}")
    good = kernelnix("check-builds", str(tmp_path))
    assert good.exit_code == 0, good.output
    assert "2 variants checked: 2 ok, 0 failed" in good.stdout
    (build / CPU / "metadata.json").write_text('{"name": "relu"}')
    bad = kernelnix("check-builds", "--json", str(tmp_path))
    assert bad.exit_code == 1
    failed = [v for v in json.loads(bad.stdout)["variants"] if not v["ok"]]
    assert [v["variant"] for v in failed] == [CPU]
    assert rules(failed[0]) == {"metadata"}


def test_check_builds_reads_metadata_from_the_hub_as_the_loader_does(tmp_path: Path) -> None:
    """Hub kernels built before kernel-builder renamed it carry `sha` for `commit`, and
    keys kernelnix does not know; the loader accepts both, and so does check-builds."""
    metadata = plan_metadata("relu", CPU)
    metadata["provenance"] = {
        "kernel-builder": {"version": "0.9.0", "sha": "a" * 40, "dirty": False},
        "kernel": {"sha": "b" * 40, "dirty": False},
    }
    metadata["kernels-minver"] = "0.12.0"
    LoaderMetadata.from_bytes(json.dumps(metadata).encode())
    make_variant(tmp_path / "build", "relu", CPU, metadata=metadata)
    done = kernelnix("check-builds", str(tmp_path))
    assert done.exit_code == 0, done.output
    assert f"ok    {CPU}: no violations" in done.stdout
    metadata["provenance"]["kernel"]["commit"] = "b" * 40  # both names: the loader refuses
    with pytest.raises(ValueError, match="duplicate field"):
        LoaderMetadata.from_bytes(json.dumps(metadata).encode())
    (tmp_path / "build" / CPU / "metadata.json").write_text(json.dumps(metadata))
    refused = kernelnix("check-builds", str(tmp_path))
    assert refused.exit_code == 1, refused.output
    assert "provenance.kernel" in refused.stdout and "`sha` is the older name" in refused.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check-abi", "-m", "manylinux_1"], "unknown policy"),
        (["check-abi", "--torch-stable-abi", "two"], "invalid version 'two'"),
        (["check-abi"], "no build variants found"),
        (["check-builds"], "no build variants found"),
    ],
)
def test_check_commands_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    assert_bad_input(kernelnix(*args, str(tmp_path)), message)


# ------------------------------------------- create-pyproject, clean-pyproject


def test_create_pyproject_into_a_target(tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    kernel = copy_example("relu-noarch", tmp_path)
    target = tmp_path / "dev"
    target.mkdir()
    args = [str(kernel), str(target), "--unique-id", "dev", "--kernel-sha", COMMIT]
    result = kernelnix("create-pyproject", *args, "--kernel-dirty")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == ["pyproject.toml", "setup.py"]
    golden("pyproject/target-pyproject.toml", (target / "pyproject.toml").read_text())
    golden("pyproject/target-setup.py.txt", (target / "setup.py").read_text())
    assert not (kernel / "setup.py").exists()


def test_create_pyproject_defaults(tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    kernel = copy_example("relu", tmp_path)
    assert kernelnix("create-pyproject", str(kernel)).exit_code == 0
    golden("pyproject/relu-pyproject.toml", (kernel / "pyproject.toml").read_text())
    setup = (kernel / "setup.py").read_text()  # else as target-setup.py.txt
    assert "KERNEL = (Path(__file__).resolve().parent / '.').resolve()\n" in setup
    assert "UNIQUE_ID = None\nKERNEL_GIT = None\n" in setup


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel-dirty"], "--kernel-dirty marks the commit of --kernel-sha, which is missing"),
        (["--kernel-sha", "abc1234"], "expected a full git object id"),
        (["--kernel-sha", COMMIT.upper()], "expected a full git object id"),
        (["--unique-id", "Dev!"], "invalid unique id 'Dev!'"),
        (["missing-target"], "missing-target: no such directory"),
    ],
)
def test_create_pyproject_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    kernel = copy_example("relu", tmp_path)
    before = sorted(p.name for p in kernel.iterdir())
    assert_bad_input(kernelnix("create-pyproject", str(kernel), *args), message)
    assert sorted(p.name for p in kernel.iterdir()) == before


@pytest.mark.slow
def test_a_wheel_builds_from_a_target_with_the_recorded_ids(tmp_path: Path) -> None:
    kernel = copy_example("relu-noarch", tmp_path)
    target = tmp_path / "dev"
    target.mkdir()
    args = ["--unique-id", "dev", "--kernel-sha", COMMIT, "--kernel-dirty"]
    assert kernelnix("create-pyproject", str(kernel), str(target), *args).exit_code == 0
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "-w", tmp_path / "dist", target],
        check=True, capture_output=True,
    )  # fmt: skip
    assert len(list((tmp_path / "dist").glob("relu_noarch-1-*.whl"))) == 1
    built = kernel / "build" / "torch-cpu"
    metadata = json.loads((built / "metadata.json").read_text())
    assert metadata["provenance"]["kernel"] == {"commit": COMMIT, "dirty": True}
    assert '_OPS_NAME = f"_relu_noarch_{_get_backend()}_dev"' in (built / "_ops.py").read_text()


@pytest.fixture(params=["relu-noarch", "relu"])
def developed(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An example after create-pyproject --unique-id dev and an in-place build
    (relu compiles its CPU variant)."""
    kernel = copy_example(request.param, tmp_path)
    assert kernelnix("create-pyproject", str(kernel), "--unique-id", "dev").exit_code == 0
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=kernel, check=True, capture_output=True,
    )  # fmt: skip
    return kernel


def package_files(kernel: Path) -> list[str]:
    package = kernel / "torch-ext" / kernel.name.replace("-", "_")
    return sorted(p.name for p in package.iterdir() if p.is_file())


@pytest.mark.slow
def test_clean_pyproject_deletes_what_create_pyproject_and_the_build_wrote(
    developed: Path,
) -> None:
    built = ["_ops.py"] + (["_relu_cpu_dev.abi3.so"] if developed.name == "relu" else [])
    assert set(built) <= set(package_files(developed))
    dry = kernelnix("clean-pyproject", "-d", str(developed))
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.count("would delete ") == 2 + len(built)
    refused = kernelnix("clean-pyproject", str(developed), input="n\n")
    assert refused.exit_code == 1 and "Aborted" in refused.output
    assert (developed / "setup.py").is_file() and set(built) <= set(package_files(developed))

    (developed / "setup.py").write_text("# my own setup.py\n")
    other = kernelnix("clean-pyproject", "-f", "--ops-id", "other", str(developed))
    assert other.exit_code == 0, other.output
    assert "setup.py: not written by kernelnix" in other.stderr
    assert "deleted 1 file(s)" in other.stdout  # pyproject.toml; the build is of id dev
    assert (developed / "setup.py").is_file() and not (developed / "pyproject.toml").exists()
    assert set(built) <= set(package_files(developed))

    done = kernelnix("clean-pyproject", "--ops-id", "dev", str(developed), input="y\n")
    assert done.exit_code == 0, done.output
    assert f"deleted {len(built)} file(s)" in done.stdout
    assert not set(built) & set(package_files(developed))
    assert (developed / "setup.py").read_text() == "# my own setup.py\n"


def test_clean_pyproject_with_nothing_to_clean(tmp_path: Path) -> None:
    kernel = copy_example("relu", tmp_path)
    result = kernelnix("clean-pyproject", "-f", str(kernel))
    assert result.exit_code == 0, result.output
    assert result.stdout == "nothing to clean\n"
    assert_bad_input(kernelnix("clean-pyproject", str(kernel), "--ops-id", "A-"), "--ops-id")


# ------------------------------------------------ devshell, testshell, build


@pytest.mark.parametrize(
    ("shell", "variant", "attribute"),
    [
        ("devshell", None, "default"),
        ("devshell", CPU, f"devShells.{CPU}"),
        ("testshell", None, "test"),
        ("testshell", CPU, f"testShells.{CPU}"),
    ],
)
def test_shell_command_lines(shell: str, variant: str | None, attribute: str) -> None:
    options = NixOptions(print_build_logs=True, max_jobs=2, cores=0)
    argv = shell_command(FlakeProject(Path("/k")), shell, variant, options)
    assert argv[1:] == [
        "--extra-experimental-features",
        "nix-command flakes",
        "develop",
        f"/k#{attribute}",
        "--print-build-logs",
        "--max-jobs",
        "2",
        "--cores",
        "0",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "--local", "-L"], "-L, --max-jobs and --cores are passed to Nix"),
        (["build", "--local", "--cores", "2"], "a --local build runs no Nix"),
        (["build", "-j", "2", "--cores", "4"], "-j 2 and --cores 4 disagree"),
        (["build", "--max-jobs", "-1"], "Invalid value for '--max-jobs'"),
        (["devshell", "--cores", "x"], "Invalid value for '--cores'"),
        (["build-and-upload", "--output-json", "no/such/dir.json"], "no directory no/such"),
    ],
)
def test_nix_options_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    kernel = copy_example("relu", tmp_path)
    before = sorted(p.name for p in kernel.iterdir())
    assert_bad_input(kernelnix(*args, str(kernel)), message)
    assert sorted(p.name for p in kernel.iterdir()) == before
