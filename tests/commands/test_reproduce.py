"""`kernelnix reproduce --built`: its report and exit status (0 identical, 1 differs,
2 bad input) on a hand-made relu variant with a real ELF library."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from checks_corpus.corpus import build_corpus
from click.testing import CliRunner, Result
from handmade import copy_example, variant_with_library
from hubserver import repository_files, serving_downloads
from huggingface_hub import constants

from kernelnix.checks.elf import read_sections
from kernelnix.cli import main

pytestmark = pytest.mark.slow  # the corpus is compiled with gcc

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(source, rebuilt bundle, reference bundle: a copy of the rebuilt one)."""
    source = copy_example("relu", tmp_path)
    rebuilt = tmp_path / "rebuilt"
    variant_with_library(rebuilt, "relu", VARIANT, build_corpus().path("clean_c"))
    reference = tmp_path / "reference"
    shutil.copytree(rebuilt, reference)
    return source, rebuilt, reference


def reproduce(source: Path, built: Path, against: str, *options: str) -> Result:
    args = ["reproduce", str(source), "--built", str(built), "--against", against, *options]
    return CliRunner().invoke(main, args)


def test_identical_exits_0(trees: tuple[Path, Path, Path]) -> None:
    source, rebuilt, reference = trees
    result = reproduce(source, rebuilt, str(reference))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"{VARIANT}: identical"
    assert result.stdout.splitlines()[-1] == "1 of 1 variants identical"


def test_a_changed_library_exits_1_naming_the_file_and_section(
    trees: tuple[Path, Path, Path],
) -> None:
    source, rebuilt, reference = trees
    (so,) = (reference / VARIANT).glob("*.so")
    dynstr = next(s for s in read_sections(so) if s.name == ".dynstr")
    data = bytearray(so.read_bytes())
    data[dynstr.offset + 1] ^= 1
    so.write_bytes(bytes(data))
    result = reproduce(source, rebuilt, str(reference))
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[:2] == [
        f"{VARIANT}: differs",
        f"  {so.name}: ELF sections differ: .dynstr (at byte 1 of the section)",
    ]


def test_a_variant_left_out_by_the_rebuild_exits_1(trees: tuple[Path, Path, Path]) -> None:
    source, rebuilt, reference = trees
    shutil.copytree(reference / VARIANT, reference / "torch214-cxx11-cpu-x86_64-linux")
    result = reproduce(source, rebuilt, str(reference))
    assert result.exit_code == 1, result.output
    assert "torch214-cxx11-cpu-x86_64-linux: only in the reference" in result.stdout
    # Compared alone, the rebuilt variant is identical.
    result = reproduce(source, rebuilt, str(reference), "--variant", VARIANT)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("against", "error: no-such-dir: no such directory"),
        ("source", "no such directory"),
        ("revision", "--revision applies to a Hub repository, not to a directory"),
        ("variant", "no variant torch299-cxx11-cpu-x86_64-linux in the rebuild nor in the"),
        ("built", "no such directory"),
    ],
)
def test_bad_input_exits_2_with_one_error_and_its_fix(
    trees: tuple[Path, Path, Path], tmp_path: Path, change: str, message: str
) -> None:
    source, rebuilt, reference = trees
    against, options = str(reference), []
    if change == "against":
        against = "no-such-dir"
    elif change == "source":
        source = tmp_path / "missing"
    elif change == "revision":
        options = ["--revision", "v1"]
    elif change == "variant":
        options = ["--variant", "torch299-cxx11-cpu-x86_64-linux"]
    else:
        rebuilt = tmp_path / "missing"
    result = reproduce(source, rebuilt, against, *options)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.count("error:") == 1 and "fix:" in result.stderr
    assert "Traceback" not in result.output


def test_offline_without_the_repository_in_the_cache_exits_2(
    trees: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, rebuilt, _ = trees
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    result = reproduce(source, rebuilt, "kernelnix-tests/relu")
    assert result.exit_code == 2, result.output
    assert (
        "HF_HUB_OFFLINE is set and the Hugging Face cache holds no snapshot of "
        "kernelnix-tests/relu at v1 or main with the variants compared" in result.stderr
    )
    assert "fix: unset HF_HUB_OFFLINE to download it" in result.stderr


def test_a_missing_repository_stops_it_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --built: the reference is resolved on the Hub first, so a repository that
    does not exist is one error and no Nix command runs."""
    source = copy_example("relu", tmp_path)
    with serving_downloads(monkeypatch, tmp_path / "hub-cache"):
        args = ["reproduce", str(source), "--against", "no-such-org/no-such-repo"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "no-such-org/no-such-repo is neither a directory nor a kernel repository" in (
        result.stderr
    )
    assert "+ nix" not in result.stderr and "Traceback" not in result.output
    assert not (source / "flake.nix").exists()  # nothing generated either


def test_a_hub_that_does_not_answer_stops_it_before_anything_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = copy_example("relu", tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    result = CliRunner().invoke(main, ["reproduce", str(source), "--against", "org/relu"])
    assert result.exit_code == 2, result.output
    assert f"cannot read org/relu from {endpoint}: " in result.stderr
    assert "fix: check the network and HF_ENDPOINT" in result.stderr
    assert "+ nix" not in result.stderr and "Traceback" not in result.output


def closed_endpoint(monkeypatch: pytest.MonkeyPatch) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    return endpoint


@pytest.mark.parametrize(
    ("seeded", "message"),
    [
        (None, "no-such-org/no-such-repo is neither a directory nor a kernel repository"),
        ("no provenance", "records no build provenance (provenance.slsa)"),
        ("unreachable source", "cannot fetch the kernel's source file:///nonexistent/relu.git"),
    ],
)
def test_a_published_kernel_that_cannot_be_rebuilt_is_one_error_before_any_build(
    trees: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    seeded: str | None,
    message: str,
) -> None:
    """`reproduce OWNER/NAME`: a repository that does not exist, a variant whose
    metadata names no source (built before provenance, or not through a flake),
    and a source repository that cannot be fetched each stop it with one error."""
    _, _, reference = trees
    repo = "no-such-org/no-such-repo" if seeded is None else "org/relu"
    if seeded == "unreachable source":
        metadata = reference / VARIANT / "metadata.json"
        data = json.loads(metadata.read_text())
        data["provenance"]["slsa"] = {
            "subject": [],
            "predicate": {
                "buildDefinition": {
                    "externalParameters": {
                        "source": {
                            "uri": "file:///nonexistent/relu.git",
                            "digest": {"gitCommit": "0" * 40},
                            "dirty": False,
                        },
                        "variant": VARIANT,
                        "toolchain": "hermetic",
                    },
                    "resolvedDependencies": [],
                },
                "runDetails": {
                    "builder": {"version": {}},
                    "metadata": {
                        "invocationId": "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-x.drv"
                    },
                },
            },
        }
        metadata.write_text(json.dumps(data))
    with serving_downloads(monkeypatch, tmp_path / "hub-cache") as hub:
        if seeded is not None:
            hub.seed("kernel", repo, {"main": {}, "v1": repository_files(reference)})
        result = CliRunner().invoke(main, ["reproduce", repo])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.count("error:") == 1 and "fix:" in result.stderr
    assert "+ nix" not in result.stderr and "Traceback" not in result.output


def test_a_published_kernel_on_a_hub_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = closed_endpoint(monkeypatch)
    result = CliRunner().invoke(main, ["reproduce", "org/relu"])
    assert result.exit_code == 2, result.output
    assert f"cannot read org/relu from {endpoint}: " in result.stderr
    assert "+ nix" not in result.stderr and "Traceback" not in result.output


def test_without_against_a_directory_is_bad_input(trees: tuple[Path, Path, Path]) -> None:
    source, _, _ = trees
    result = CliRunner().invoke(main, ["reproduce", str(source)])
    assert result.exit_code == 2, result.output
    assert "--against is missing" in result.stderr
