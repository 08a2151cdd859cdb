"""kernelnix.publish.provenance: the SLSA statement `kernelnix bundle` writes into a
variant's metadata.json (hand-made relu-noarch variants, facts as the flake writes
them), what the real loader and `kernelnix check` make of it, and the source
repository `kernelnix hash` adds from git."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from handmade import make_variant

from kernelnix.checks import CheckOptions, run_checks
from kernelnix.publish.digest import hash_variants
from kernelnix.publish.provenance import BuildFacts, record_provenance, record_source_repository

kernels_rust = pytest.importorskip("kernels._rust")

VARIANT = "torch-cpu"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DRV = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-relu-noarch-torch-cpu.drv"
WHEEL = b"not really a wheel"


def facts(source_uri: str | None = None, dirty: bool = False) -> BuildFacts:
    sri = "sha256-" + base64.b64encode(hashlib.sha256(WHEEL).digest()).decode()
    return BuildFacts.from_json(
        json.dumps(
            {
                "nix": "2.8.0",
                "kernelnix": {
                    "name": "kernelnix",
                    "uri": "git+file:///src/kernelnix?rev=" + COMMIT,
                    "digest": {"gitCommit": COMMIT},
                },
                "kernelnix-version": "0.1.0",
                "toolchain": "hermetic",
                "toolchain-lock": {
                    "name": "kernelnix/data/toolchain-lock.json",
                    "digest": {"sha256": "00" * 32},
                },
                "source": {"uri": source_uri, "digest": {"gitCommit": COMMIT}, "dirty": dirty},
                "variants": {
                    VARIANT: {
                        "derivation": DRV,
                        "wheels": [{"name": "w.whl", "url": "https://pypi/w.whl", "hash": sri}],
                        "archives": [
                            {"name": "a.tar.gz", "url": "https://gh/a.tar.gz", "hash": sri}
                        ],
                    }
                },
            }
        )
    )


@pytest.fixture
def variant(tmp_path: Path) -> Path:
    made = make_variant(tmp_path / "build", "relu-noarch", VARIANT)
    record_provenance(made, facts())
    return made


def statement(variant: Path) -> Any:
    metadata = json.loads((variant / "metadata.json").read_text())
    slsa = metadata["provenance"]["slsa"]
    return slsa


def test_the_statement_names_the_files_the_inputs_and_the_derivation(variant: Path) -> None:
    slsa = statement(variant)
    assert slsa["_type"] == "https://in-toto.io/Statement/v1"
    assert slsa["predicateType"] == "https://slsa.dev/provenance/v1"
    subject = {entry["name"]: entry["digest"]["sha256"] for entry in slsa["subject"]}
    assert subject == {
        name: hashlib.sha256((variant / name).read_bytes()).hexdigest()
        for name in ("__init__.py", "_ops.py")
    }
    predicate = slsa["predicate"]
    assert predicate["runDetails"] == {
        "builder": {"id": "urn:kernelnix:nix", "version": {"nix": "2.8.0", "kernelnix": "0.1.0"}},
        "metadata": {"invocationId": DRV},
    }
    definition = predicate["buildDefinition"]
    assert definition["externalParameters"] == {
        "source": {"digest": {"gitCommit": COMMIT}, "dirty": False},
        "variant": VARIANT,
        "toolchain": "hermetic",
    }
    wheel, archive = definition["resolvedDependencies"][-2:]
    assert wheel == {
        "name": "w.whl",
        "uri": "https://pypi/w.whl",
        "digest": {"sha256": hashlib.sha256(WHEEL).hexdigest()},
    }
    # A release archive's hash is of its unpacked tree, not of the file at its URL.
    assert archive == {
        "name": "a.tar.gz",
        "uri": "https://gh/a.tar.gz",
        "digest": {"nixNarSha256": hashlib.sha256(WHEEL).hexdigest()},
    }


def test_the_loader_reads_it_and_the_checks_pass(variant: Path) -> None:
    kernels_rust.Metadata.read_from_file(str(variant / "metadata.json"))
    report = run_checks(variant, CheckOptions(import_check=False))
    assert report.violations == [], report.render()


def test_a_file_changed_after_the_build_is_named(variant: Path) -> None:
    with (variant / "_ops.py").open("a") as handle:
        handle.write("# changed\n")
    (variant / "extra.py").write_text("")
    report = run_checks(variant, CheckOptions(import_check=False))
    found = sorted(v.found for v in report.violations if v.rule == "provenance")
    assert found == [
        "_ops.py: its sha256 differs from the file's",
        "extra.py is not in it",
    ]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_hash_records_the_checkout_s_repository(variant: Path, tmp_path: Path) -> None:
    """A bundle copied into the kernel's build/: `kernelnix hash` adds the git remote
    as the source's repository, once, and the loader's digest after it."""
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin", "https://example.invalid/org/relu.git")
    hash_variants(tmp_path / "build")
    source = statement(variant)["predicate"]["buildDefinition"]["externalParameters"]["source"]
    assert source["uri"] == "https://example.invalid/org/relu.git"
    assert not record_source_repository(variant)  # already named: kept
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["digest"]["algorithm"] == "sha256"


def test_outside_git_the_repository_stays_unknown(variant: Path) -> None:
    assert not record_source_repository(variant)
    source = statement(variant)["predicate"]["buildDefinition"]["externalParameters"]["source"]
    assert "uri" not in source
