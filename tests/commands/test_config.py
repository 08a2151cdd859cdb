"""`kernelnix check-config`: the examples, output formats and exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from paths import ROOT

from kernelnix.cli import main
from kernelnix.config import load_config

EXAMPLES = sorted(p.parent.name for p in (ROOT / "examples").glob("*/build.toml"))

EDITION5 = """\
[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def assert_clean_exit(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def write(directory: Path, text: str) -> Path:
    """A kernel project: build.toml and the sources EDITION5 names."""
    for source in ("build.toml", "torch-ext/torch_binding.cpp", "relu_cuda/relu.cu"):
        (directory / source).parent.mkdir(parents=True, exist_ok=True)
        (directory / source).write_text(text if source == "build.toml" else "// source\n")
    return directory


# ------------------------------------------------------------------ examples


def test_there_are_examples() -> None:
    assert "relu" in EXAMPLES


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_json_matches_golden(
    example: str,
    runner: CliRunner,
    monkeypatch: pytest.MonkeyPatch,
    golden: Callable[[str, str], None],
) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(main, ["check-config", f"examples/{example}", "--json"])
    assert_clean_exit(result, 0)
    data = json.loads(result.stdout)
    assert data["general"]["edition"] == 5
    assert data["general"]["name"] == load_config(ROOT / "examples" / example).config.general.name
    golden(f"config/examples/{example}.json", result.stdout)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_checks_clean(
    example: str, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT / "examples" / example)
    loaded = load_config(Path("."))
    result = runner.invoke(main, ["check-config"])  # the directory defaults to "."
    assert_clean_exit(result, 0)
    assert result.stdout.startswith(f"build.toml: ok: {loaded.config.general.name} v")
    # A legacy example loads with the upgrade warning, every other one without any.
    assert result.stderr.count("warning: ") == len(loaded.warnings)
    if loaded.shape != "5":
        assert "kernelnix update-build" in result.stderr


# ------------------------------------------------------------- output forms


def test_summary_line(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5)
    result = runner.invoke(main, ["check-config", "k"])
    assert_clean_exit(result, 0)
    assert result.stdout == (
        "k/build.toml: ok: relu v1, framework torch, backends cpu, cuda, 1 kernel section(s)\n"
    )
    assert result.stderr == ""


def test_json_is_the_normalized_edition5_config(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5.replace("edition = 5\n", ""))  # a v4 file
    result = runner.invoke(main, ["check-config", "k", "--json"])
    assert_clean_exit(result, 0)
    data = json.loads(result.stdout)  # stdout is JSON only; the warning is on stderr
    assert data == load_config(tmp_path / "k").config.to_json()
    assert data["general"]["edition"] == 5
    assert data["kernel"]["relu"]["backend"] == "cuda"
    assert data["kernel"]["relu"]["cuda-flags"] == []  # build.toml's kebab-case key names
    assert result.stderr.startswith("warning: k/build.toml: build.toml uses the pre-edition v4")


def test_warnings_go_to_stderr_with_key_and_line(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5.replace('["cpu", "cuda"]', '["cpu"]'))
    result = runner.invoke(main, ["check-config", "k"])
    assert_clean_exit(result, 0)
    assert "warning: k/build.toml:12: kernel.relu.backend: kernel 'relu' is for backend" in (
        result.stderr
    )
    assert "  fix: add 'cuda' to general.backends" in result.stderr


def test_errors_as_json_and_text(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5.replace("version = 1", 'version = "one"'))
    result = runner.invoke(main, ["check-config", "k", "--json"])
    assert_clean_exit(result, 2)
    assert json.loads(result.stdout) == [
        {
            "message": "expected an integer, got string 'one'",
            "file": "k/build.toml",
            "key": "general.version",
            "line": 3,
            "severity": "error",
        }
    ]
    assert result.stderr == (
        "error: k/build.toml:3: general.version: expected an integer, got string 'one'\n"
        "1 error in k/build.toml\n"
    )


def test_missing_directory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(main, ["check-config", "nowhere"])
    assert_clean_exit(result, 2)
    assert "error: nowhere/build.toml: no build.toml in nowhere" in result.stderr
    assert "kernelnix init" in result.stderr


def test_directory_without_build_toml(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    result = runner.invoke(main, ["check-config", "empty"])
    assert_clean_exit(result, 2)
    assert "no build.toml in empty" in result.stderr


def test_build_toml_that_is_a_directory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k" / "build.toml").mkdir(parents=True)
    result = runner.invoke(main, ["check-config", "k"])
    assert_clean_exit(result, 2)
    assert "error: k/build.toml: cannot read build.toml" in result.stderr


def test_a_file_instead_of_a_directory_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5)
    result = runner.invoke(main, ["check-config", "k/build.toml"])
    assert_clean_exit(result, 2)
    assert "is a file" in result.stderr


def test_help_shows_an_example(runner: CliRunner) -> None:
    result = runner.invoke(main, ["check-config", "--help"])
    assert_clean_exit(result, 0)
    assert "kernelnix check-config examples/relu --json" in result.stdout


# ------------------------------------------------------------ real processes


def commands() -> list[list[str]]:
    found = [[sys.executable, "-m", "kernelnix"]]
    script = shutil.which("kernelnix")
    if script is not None:
        found.append([script])
    return found


@pytest.mark.parametrize("command", commands(), ids=lambda c: Path(c[-1]).name)
def test_real_process_on_an_example(command: list[str]) -> None:
    proc = subprocess.run(
        [*command, "check-config", str(ROOT / "examples" / "relu"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["general"]["name"] == "relu"


@pytest.mark.parametrize("command", commands(), ids=lambda c: Path(c[-1]).name)
def test_real_process_on_bad_input(command: list[str], tmp_path: Path) -> None:
    write(tmp_path, EDITION5.replace("[torch]", "[torchh]"))
    proc = subprocess.run(
        [*command, "check-config", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{tmp_path / 'build.toml'}:8: torchh: unknown key `torchh`" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------- the whole gate: what later stages reject


def check(runner: CliRunner, directory: Path) -> list[dict[str, object]]:
    """check-config's diagnostics as JSON (errors and warnings), and exit code 2."""
    result = runner.invoke(main, ["check-config", str(directory), "--json"])
    assert_clean_exit(result, 2)
    return json.loads(result.stdout)


def errors_of(diagnostics: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(d.get("key"), d.get("line")) for d in diagnostics if d["severity"] == "error"]


def test_every_later_problem_is_reported_at_once_with_key_and_line(
    runner: CliRunner, tmp_path: Path
) -> None:
    text = (
        EDITION5.replace(
            'license = "Apache-2.0"\n', 'license = "Apache-2.0"\npython-depends = ["numpyy"]\n'
        )
        .replace('["cpu", "cuda"]\n', '["cpu", "cuda"]\n[general.hub]\nrepo-id = "a--b/c"\n')
        .replace(
            'src = ["relu_cuda/relu.cu"]',
            'src = ["relu_cuda/relu.cu", "gone.cu"]\ncuda-flags = ["-DX=${HOME}", "-O3\\n-g"]',
        )
    )
    diagnostics = check(runner, write(tmp_path, text))
    assert errors_of(diagnostics) == [
        ("general.python-depends[0]", 6),
        ("general.hub.repo-id", 9),
        ("kernel.relu.src[1]", 17),
        ("kernel.relu.cuda-flags[0]", 18),
        ("kernel.relu.cuda-flags[1]", 18),
    ]
    messages = "\n".join(str(d["message"]) for d in diagnostics)
    assert "'gone.cu' does not exist (entry 1 of `src`)" in messages
    assert "unknown dependency 'numpyy'" in messages
    assert "the Hub refuses the repository id 'a--b/c'" in messages
    assert "'${'" in messages and "control character" in messages


@pytest.mark.parametrize(
    ("bounds", "key", "fragment"),
    [
        ('[torch]\nminver = "2.40"\n', "torch.minver", "the Torch bounds 2.40..any match no"),
        ('[torch]\nmaxver = "1.0"\n', "torch.maxver", "the Torch bounds any..1.0 match no"),
        ('[general.cuda]\nminver = "99.0"\n', "general.cuda.minver", "the CUDA bounds 99.0"),
    ],
)
def test_bounds_that_match_no_build_set_are_errors(
    runner: CliRunner, tmp_path: Path, bounds: str, key: str, fragment: str
) -> None:
    table, line = bounds.split("\n", 1)
    text = (
        EDITION5.replace(f"{table}\n", f"{table}\n{line}")
        if table in EDITION5
        else (EDITION5 + "\n" + bounds)
    )
    diagnostics = check(runner, write(tmp_path, text))
    assert key in [k for k, _ in errors_of(diagnostics)]
    assert any(fragment in str(d["message"]) for d in diagnostics), diagnostics


def test_a_config_without_any_variant_is_an_error(runner: CliRunner, tmp_path: Path) -> None:
    text = EDITION5.replace('["cpu", "cuda"]', '["cuda"]') + '[general.cuda]\nmaxver = "1.0"\n'
    diagnostics = check(runner, write(tmp_path, text))
    keys = [k for k, _ in errors_of(diagnostics)]
    assert "general.backends" in keys and "general.cuda.maxver" in keys
    assert any("yields no build variant" in str(d["message"]) for d in diagnostics)


def test_archs_a_toolkit_drops_are_named_in_a_warning(runner: CliRunner, tmp_path: Path) -> None:
    text = EDITION5 + 'cuda-capabilities = ["7.0", "9.0"]\n'
    result = runner.invoke(main, ["check-config", str(write(tmp_path, text))])
    assert_clean_exit(result, 0)
    assert "kernel.relu.cuda-capabilities[0]: arch '7.0' is not built with CUDA 13.0" in (
        result.stderr
    )
    assert "'9.0'" not in result.stderr


def test_a_v3_file_warns_that_kernel_builder_refuses_it(runner: CliRunner) -> None:
    result = runner.invoke(
        main, ["check-config", str(ROOT / "tests/data/configs/good/v3-with-license")]
    )
    assert_clean_exit(result, 0)
    assert "pre-edition v3 format" in result.stderr
    assert "kernel-builder refuses this format" in result.stderr
    assert "kernelnix update-build" in result.stderr


# ------------------------------------------------------------- CUDA capabilities


def test_capabilities_10_3_and_12_1_are_accepted(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kernels #783: 10.3 and 12.1 for CUDA >= 12.9; CUDA 12.6 leaves them out, saying so."""
    monkeypatch.chdir(tmp_path)
    text = EDITION5 + 'cuda-capabilities = ["9.0", "10.3", "12.1"]\n'
    write(tmp_path / "k", text)
    result = runner.invoke(main, ["check-config", "k"])
    assert_clean_exit(result, 0)
    assert "arch '10.3' is not built with CUDA 12.6," in result.stderr
    assert "error" not in result.stderr


def test_an_unknown_capability_is_rejected_with_the_valid_ones(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k", EDITION5 + 'cuda-capabilities = ["9.0", "10.4"]\n')
    result = runner.invoke(main, ["check-config", "k"])
    assert_clean_exit(result, 2)
    assert (
        "error: k/build.toml:15: kernel.relu.cuda-capabilities[1]: '10.4' is not a CUDA "
        "capability that any CUDA version of the matrix builds; valid capabilities: 7.0, 7.2, "
        "7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.1, 10.3, 11.0, 12.0, 12.1"
    ) in result.stderr
