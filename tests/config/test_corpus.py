"""The build.toml corpus under tests/data/configs, run through the real CLI.

`bad/<case>/build.toml`: malformed files. `kernelnix check-config` must exit 2
without a traceback and report every problem (key path and line) at once;
`kernelnix update-build` must exit 2 and leave the directory byte-for-byte alone.

`good/<case>/build.toml`: accepted files of every edition and shape. Their
normalized edition-5 JSON is compared with golden files under
tests/golden/config/good/ (rewritten only by `pytest --update-golden`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit
from click.testing import CliRunner, Result
from paths import TESTS

from kernelnix.cli import main
from kernelnix.config import load_config

DATA = TESTS / "data" / "configs"
BAD_DIR = DATA / "bad"
GOOD_DIR = DATA / "good"

Where = tuple[str | None, int | None]
"""A diagnostic's key path and line (None where it has none)."""


@dataclass(frozen=True)
class Bad:
    errors: tuple[Where, ...]  # every error the file must produce, and no other
    fragment: str  # part of the message users must see


BAD: dict[str, Bad] = {
    # reading and TOML syntax
    "empty-file": Bad((("general", None),), "the [general] table is missing"),
    "binary-garbage": Bad(((None, 2),), "not UTF-8 text (byte 0x80"),
    "non-utf8-latin1": Bad(((None, 2),), "not UTF-8 text (byte 0xe9"),
    "toml-unclosed-table-header": Bad(((None, 1),), "TOML syntax error, column 9"),
    "toml-unquoted-string": Bad(((None, 2),), "TOML syntax error, column 8"),
    "toml-unterminated-string": Bad(((None, 2),), "TOML syntax error"),
    "toml-duplicate-key": Bad(((None, 7),), "TOML syntax error"),
    "toml-duplicate-table": Bad(((None, 11),), "TOML syntax error"),
    "toml-array-missing-comma": Bad(((None, 3),), "TOML syntax error"),
    "toml-missing-value": Bad(((None, 2),), "TOML syntax error"),
    # [general] and editions
    "general-not-a-table": Bad((("general", 1),), "`general` must be a table, not a string"),
    "missing-general": Bad((("general", None),), "the [general] table is missing"),
    "missing-name": Bad((("general.name", 1),), "required key `name` is missing"),
    "missing-backends": Bad((("general.backends", 1),), "required key `backends` is missing"),
    "missing-version-and-license": Bad(
        (("general.version", 1), ("general.license", 1)), "required key `license` is missing"
    ),
    "edition-4": Bad((("general.edition", 4),), "unsupported build.toml edition 4"),
    "edition-6": Bad((("general.edition", 4),), "kernelnix supports edition 5"),
    "edition-string": Bad((("general.edition", 4),), "expected an integer edition, got string"),
    "edition-float": Bad((("general.edition", 4),), "expected an integer edition, got float"),
    "edition-5-features-without-edition": Bad((("general", 1),), "add `edition = 5`"),
    "v4-stable-abi-table": Bad((("general", 1),), "edition-5 features but has no `edition`"),
    "v3-without-license": Bad((("general", 1),), "has no `license`"),
    "pre-edition-torch-noarch-without-version": Bad(
        (("general.version", 1),), "required key `version` is missing"
    ),
    "v4-with-errors": Bad(
        (("torch.stable-abi", 9), ("kernel.relu.depends", 11)), "invalid version 'two'"
    ),
    # names, types, backends
    "name-uppercase": Bad((("general.name", 2),), "invalid kernel name 'Relu'"),
    "name-trailing-dash": Bad((("general.name", 2),), "invalid kernel name 'relu-'"),
    "name-not-a-string": Bad((("general.name", 2),), "expected a kernel name as a string"),
    "unknown-backend": Bad(
        (("general.backends[1]", 6), ("general.backends[2]", 6)), "did you mean 'cpu'?"
    ),
    "backends-not-an-array": Bad((("general.backends", 6),), "expected an array, got string"),
    "wrong-types": Bad(
        (
            ("general.version", 3),
            ("general.license", 5),
            ("general.python-depends", 7),
            ("general.hub.repo-id", 10),
            ("torch.src", 13),
            ("torch.pyext[0]", 14),
        ),
        "expected an integer, got string '1'",
    ),
    "version-float-and-negative": Bad(
        (("general.version", 3), ("general.kernel-depends[0].version", 7)),
        "write a whole number without a decimal point: version = 1",
    ),
    # unknown keys
    "unknown-top-level-table": Bad((("build", 11),), "unknown key `build` in the top level"),
    "unknown-key-general": Bad((("general.licence", 7),), "did you mean `license`?"),
    "unknown-key-torch": Bad((("torch.srcs", 9),), "did you mean `src`?"),
    "unknown-key-kernel": Bad(
        (("kernel.relu.cuda-capability", 15),), "did you mean `cuda-capabilities`?"
    ),
    "unknown-key-nested-cuda-table": Bad(
        (("general.cuda.min-ver", 9),), "valid keys here: python-depends, kernel-depends, minver"
    ),
    "snake-case-key-in-kernel": Bad(
        (("kernel.relu.cuda_capabilities", 15),), "did you mean `cuda-capabilities`?"
    ),
    "snake-case-framework-section": Bad((("tvm_ffi", 11),), "did you mean `tvm-ffi`?"),
    "key-of-another-backend": Bad(
        (("kernel.relu.rocm-archs", 15),), "`rocm-archs` applies only to rocm kernels"
    ),
    "tpu-kernel-depends": Bad(
        (("general.tpu.kernel-depends", 9),), "unknown key `kernel-depends` in [general.tpu]"
    ),
    # framework sections
    "two-framework-sections": Bad((("tvm-ffi", 11),), "[tvm-ffi] conflicts with [torch]"),
    "three-framework-sections": Bad(
        (("torch-noarch", 11), ("tvm-ffi", 13)), "[torch-noarch] conflicts with [torch]"
    ),
    "no-framework-section": Bad(((None, None),), "no framework section"),
    "noarch-kebab-and-snake-keys": Bad(
        (("torch-noarch", 8),), "`cuda-capabilities` and `cuda_capabilities` are the same key"
    ),
    "tvm-ffi-without-src": Bad((("tvm-ffi.src", 8),), "required key `src` is missing in [tvm-ffi]"),
    "stable-abi-unknown-backend": Bad(
        (("torch.stable-abi.tensor", 13),), "unknown backend 'tensor' in the stable-abi table"
    ),
    "stable-abi-wrong-type": Bad(
        (("torch.stable-abi", 10),), "or a table of backend = version, got integer 2"
    ),
    # kernels
    "kernel-without-backend": Bad((("kernel.relu.backend", 11),), "has no `backend` key"),
    "kernel-unknown-backend": Bad((("kernel.relu.backend", 12),), "has backend 'neuron'"),
    "kernel-missing-src-and-depends": Bad(
        (
            ("kernel.relu.src", 11),
            ("kernel.relu.depends", 11),
            ("kernel.relu_metal.depends", 14),
        ),
        "required key `depends` is missing in [kernel.relu_metal]",
    ),
    "kernel-not-a-table": Bad((("kernel.relu", 12),), "expected a table, got string 'cuda'"),
    "unknown-dependency": Bad(
        (("kernel.relu.depends[1]", 13),), "unknown dependency 'cutlass_9_9'"
    ),
    "bad-cuda-capabilities": Bad(
        (
            ("kernel.relu.cuda-capabilities[1]", 17),
            ("kernel.relu.cuda-capabilities[2]", 18),
            ("kernel.relu.cuda-capabilities[3]", 19),
        ),
        "invalid CUDA capability '9.0b'",
    ),
    "float-cuda-capabilities": Bad(
        (("kernel.relu.cuda-capabilities[0]", 15), ("kernel.relu.cuda-capabilities[1]", 15)),
        'quote each element: "8.0"',
    ),
    "bad-rocm-archs": Bad(
        (("kernel.relu.rocm-archs[0]", 15), ("kernel.relu.rocm-archs[2]", 15)),
        "invalid ROCm arch 'GFX90A'",
    ),
    # versions
    "float-versions": Bad(
        (("general.cuda.minver", 9), ("general.cuda.maxver", 10), ("torch.minver", 14)),
        'quote it: minver = "12.10"',
    ),
    "float-stable-abi-and-cuda-minver": Bad(
        (("torch.stable-abi.cuda", 10), ("kernel.relu.cuda-minver", 16)),
        'quote it: cuda = "2.10"',
    ),
    "bad-version-strings": Bad(
        (("general.cuda.minver", 9), ("general.cuda.maxver", 10)), "empty version string"
    ),
    "versions-not-major-minor": Bad(
        (
            ("general.cuda.minver", 9),
            ("general.cuda.maxver", 10),
            ("torch.maxver", 14),
            ("torch.stable-abi", 15),
            ("kernel.relu.cuda-minver", 21),
        ),
        "invalid version '12.8.1': expected major.minor",
    ),
    # git URLs
    "git-url-bad-scheme": Bad((("general.upstream", 7),), "unsupported scheme 'ftp'"),
    "git-url-without-scheme": Bad((("general.source", 7),), "invalid git URL"),
    "git-url-scp-absolute-path": Bad((("general.upstream", 7),), "invalid git URL"),
    # kernel-depends
    "kernel-depends-version-and-revision": Bad(
        (("general.kernel-depends[0]", 7),), "`version` and `revision` are mutually exclusive"
    ),
    "kernel-depends-neither-version-nor-revision": Bad(
        (("general.cuda.kernel-depends[1]", 11),), "either `version`"
    ),
    "kernel-depends-bad-values": Bad(
        (
            ("general.kernel-depends[0].version", 8),
            ("general.kernel-depends[1].version", 9),
            ("general.kernel-depends[2].repo-id", 10),
            ("general.kernel-depends[2].repo", 10),
        ),
        "did you mean `repo-id`?",
    ),
    # everything at once
    "many-errors-across-sections": Bad(
        (
            ("general.name", 2),
            ("general.backends[1]", 6),
            ("general.upstream", 7),
            ("general.cuda.minver", 10),
            ("torch.bogus", 14),
            ("kernel.relu.depends", 16),
            ("kernel.relu.cuda-capabilities[0]", 19),
            ("kernel.relu_cpu.depends[1]", 23),
            ("kernel.relu_cpu.cuda-flags", 25),
        ),
        "unsupported scheme 'svn'",
    ),
}

MULTI_ERROR = [case for case, bad in BAD.items() if len(bad.errors) > 1]


@dataclass(frozen=True)
class Good:
    shape: str  # the shape the file is written in: "5", "v4" or "v3"
    warnings: tuple[Where, ...] = ()


GOOD: dict[str, Good] = {
    "edition5-full": Good("5"),
    "v4-string-stable-abi": Good("v4", ((None, None),)),
    "v4-tvm-ffi": Good("v4", ((None, None),)),
    "noarch-snake-case": Good("5"),
    "noarch-kebab-case": Good("5"),
    "noarch-empty": Good("5"),
    "tvm-ffi-edition5": Good("5"),
    "multi-kernel-all-backends": Good("5"),
    "scp-git-url": Good("5"),
    "url-without-path": Good("5"),
    "stable-abi-string-edition5": Good("5"),
    "stable-abi-table-extra-backend": Good("5", (("torch.stable-abi.xpu", 11),)),
    "kernel-for-unlisted-backend": Good("5", (("kernel.relu_metal.backend", 18),)),
    "v3-with-license": Good("v3", ((None, None),)),
    "v3-torch": Good("v3", ((None, None),)),
    "dotted-and-inline-tables": Good("5"),
    "crlf-and-bom": Good("5"),
}


def case_dirs(root: Path) -> set[str]:
    return {path.parent.name for path in root.glob("*/build.toml")}


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (hidden ones too) with its bytes."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def order(where: Where) -> tuple[str, int]:
    return (where[0] or "", where[1] or 0)


def location(file: str, key: str | None, line: int | None) -> str:
    """How a diagnostic's place reads on stderr: `file:line: key: `."""
    place = file if line is None else f"{file}:{line}"
    return f"{place}: {key}: " if key else f"{place}: "


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def case_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], str]:
    """Copy a corpus case into the cwd (a temp dir); returns its relative name."""
    monkeypatch.chdir(tmp_path)

    def copy(source: Path) -> str:
        shutil.copytree(source, tmp_path / source.name)
        return source.name

    return copy


def assert_clean_exit(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ the corpus


def test_every_case_directory_has_an_expectation() -> None:
    assert case_dirs(BAD_DIR) == set(BAD)
    assert case_dirs(GOOD_DIR) == set(GOOD)


def test_the_corpus_is_big_and_varied_enough() -> None:
    assert len(BAD) >= 40
    assert len(MULTI_ERROR) >= 5
    assert len(GOOD) >= 10
    assert {good.shape for good in GOOD.values()} == {"5", "v4", "v3"}


def test_binary_cases_really_are_not_utf8() -> None:
    for case in ("binary-garbage", "non-utf8-latin1"):
        with pytest.raises(UnicodeDecodeError):
            (BAD_DIR / case / "build.toml").read_bytes().decode("utf-8")


# -------------------------------------------------------------------- bad cases


@pytest.mark.parametrize("case", sorted(BAD))
def test_check_config_reports_every_error(
    case: str, runner: CliRunner, case_copy: Callable[[Path], str]
) -> None:
    name = case_copy(BAD_DIR / case)
    expected = BAD[case]
    file = f"{name}/build.toml"

    result = runner.invoke(main, ["check-config", name])
    assert_clean_exit(result, 2)
    assert result.stdout == ""
    for key, line in expected.errors:
        assert f"error: {location(file, key, line)}" in result.stderr, (key, line, result.stderr)
    assert expected.fragment in result.stderr
    count = len(expected.errors)
    assert result.stderr.rstrip().endswith(f"{count} error{'s' if count > 1 else ''} in {file}")

    # The same diagnostics as JSON: exactly the expected errors, no more.
    as_json = runner.invoke(main, ["check-config", name, "--json"])
    assert_clean_exit(as_json, 2)
    diagnostics = json.loads(as_json.stdout)
    errors = [d for d in diagnostics if d["severity"] == "error"]
    found = [(d.get("key"), d.get("line")) for d in errors]
    assert sorted(found, key=order) == sorted(expected.errors, key=order)
    assert all(d["file"] == file for d in errors)
    assert all(d["message"] for d in errors)


@pytest.mark.parametrize("case", sorted(BAD))
def test_update_build_refuses_and_writes_nothing(
    case: str, runner: CliRunner, case_copy: Callable[[Path], str]
) -> None:
    name = case_copy(BAD_DIR / case)
    before = snapshot(Path(name))
    assert before == {"build.toml": (BAD_DIR / case / "build.toml").read_bytes()}
    for args in (["update-build", name], ["update-build", "--dry-run", name]):
        result = runner.invoke(main, args)
        assert_clean_exit(result, 2)
        assert "error: " in result.stderr
        assert snapshot(Path(name)) == before
    assert snapshot(Path(".")) == {f"{name}/{k}": v for k, v in before.items()}


SUBPROCESS_CASES = ["binary-garbage", "many-errors-across-sections", "toml-duplicate-key"]


def kernelnix_commands() -> list[list[str]]:
    commands = [[sys.executable, "-m", "kernelnix"]]
    script = shutil.which("kernelnix")
    if script is not None:
        commands.append([script])
    return commands


@pytest.mark.parametrize("command", kernelnix_commands(), ids=lambda c: Path(c[-1]).name)
@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_real_cli_process_on_bad_input(case: str, command: list[str], tmp_path: Path) -> None:
    directory = tmp_path / case
    shutil.copytree(BAD_DIR / case, directory)
    before = snapshot(tmp_path)
    for sub in (["check-config"], ["update-build"]):
        proc = subprocess.run(
            [*command, *sub, str(directory)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        for key, line in BAD[case].errors:
            assert location(str(directory / "build.toml"), key, line) in proc.stderr
        assert BAD[case].fragment in proc.stderr
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------- good cases


@pytest.mark.parametrize("case", sorted(GOOD))
def test_good_case_loads(
    case: str,
    runner: CliRunner,
    case_copy: Callable[[Path], str],
    golden: Callable[[str, str], None],
) -> None:
    name = case_copy(GOOD_DIR / case)
    expected = GOOD[case]
    loaded = load_config(Path(name))
    assert loaded.shape == expected.shape
    assert [(w.key, w.line) for w in loaded.warnings] == list(expected.warnings)
    assert all(w.severity == "warning" for w in loaded.warnings)
    if expected.shape != "5":
        assert "kernelnix update-build" in (loaded.warnings[0].fix or "")

    result = runner.invoke(main, ["check-config", name])
    assert_clean_exit(result, 0)
    assert result.stdout.startswith(f"{name}/build.toml: ok: {loaded.config.general.name} v")
    assert result.stderr.count("warning: ") == len(expected.warnings)

    as_json = runner.invoke(main, ["check-config", name, "--json"])
    assert_clean_exit(as_json, 0)
    golden(f"config/good/{case}.json", as_json.stdout)


@pytest.mark.parametrize("case", sorted(GOOD))
def test_normalized_config_round_trips_as_edition5(
    case: str, case_copy: Callable[[Path], str]
) -> None:
    """The normalized JSON, written back as TOML, is an edition-5 file that means the same."""
    name = case_copy(GOOD_DIR / case)
    config = load_config(Path(name)).config
    data = config.to_json()
    general = data["general"]
    assert isinstance(general, dict) and general["edition"] == 5
    again = Path("again")
    again.mkdir()
    (again / "build.toml").write_text(tomlkit.dumps(data))
    reloaded = load_config(again)
    assert reloaded.shape == "5"
    assert reloaded.config == config
