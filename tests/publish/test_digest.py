"""`kernelnix hash`: digests the `kernels` loader computes and verifies itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from handmade import make_variant

from kernelnix.checks.files import hashed_files
from kernelnix.cli import main
from kernelnix.plan.metadata import Digest
from kernelnix.publish.digest import (
    Algorithm,
    compute_digest,
    digest_violations,
    with_digest,
)

kernels_rust = pytest.importorskip("kernels._rust")

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"
LIBRARY = "_relu_cpu_abc1234.abi3.so"
FILES = {
    LIBRARY: b"\x7fELF not really a library",
    "layers/__init__.py": b"class ReLU:\n    pass\n",
    "layers/__pycache__/__init__.cpython-311.pyc": b"bytecode",
    "stale.pyc": b"bytecode",
    "metadata.json.sigstore": b"{}",
    "data/empty": b"",
}


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    make_variant(tmp_path / "build", "relu", CPU, FILES)
    make_variant(tmp_path / "build", "relu", CUDA)
    return tmp_path


def loader_check(variant: Path) -> list[object]:
    """The loader's verdict on `variant`: [] when its digest matches, else its violations."""
    metadata = kernels_rust.Metadata.read_from_file(variant / "metadata.json")
    actual = kernels_rust.Digest.hash_variant(metadata.digest.algorithm, variant)
    try:
        metadata.digest.validate(actual)
    except kernels_rust.DigestValidationError as exc:
        return list(exc.violations)
    return []


@pytest.mark.parametrize(
    ("ours", "theirs"), [("sha256", "SHA256"), ("sha512", "SHA512")], ids=["sha256", "sha512"]
)
def test_digest_equals_the_loaders(project: Path, ours: Algorithm, theirs: str) -> None:
    variant = project / "build" / CPU
    (variant / "link.py").symlink_to("__init__.py")
    expected = kernels_rust.Digest.hash_variant(
        getattr(kernels_rust.DigestAlgorithm, theirs), variant
    )
    assert compute_digest(variant, ours).files == expected.files


def test_hashed_files_skip_metadata_and_bytecode(project: Path) -> None:
    assert hashed_files(project / "build" / CPU) == [
        "__init__.py",
        "_ops.py",
        LIBRARY,
        "data/empty",
        "layers/__init__.py",
    ]


def test_hash_writes_a_digest_the_loader_verifies(project: Path) -> None:
    result = run("hash", str(project))
    assert result.exit_code == 0, result.output
    assert "hashed" in result.output and CPU in result.output and CUDA in result.output
    for variant in (CPU, CUDA):
        assert loader_check(project / "build" / variant) == []


def test_hash_keeps_the_other_fields_and_their_order(project: Path) -> None:
    path = project / "build" / CPU / "metadata.json"
    before = json.loads(path.read_text())
    run("hash", str(project))
    after = json.loads(path.read_text())
    keys = list(before)
    assert list(after) == [
        *keys[: keys.index("provenance")],
        "digest",
        *keys[keys.index("provenance") :],
    ]
    assert {k: v for k, v in after.items() if k != "digest"} == before
    assert after["digest"]["algorithm"] == "sha256"
    assert path.read_text() == json.dumps(after, indent=2) + "\n"


def test_hash_again_is_a_no_op_and_keeps_unknown_keys(project: Path) -> None:
    path = project / "build" / CPU / "metadata.json"
    data = json.loads(path.read_text())
    data["kernels-minver"] = "0.17.2"
    path.write_text(json.dumps(data, indent=2) + "\n")
    run("hash", str(project))
    once = path.read_text()
    run("hash", str(project))
    assert path.read_text() == once
    assert json.loads(once)["kernels-minver"] == "0.17.2"


@pytest.mark.parametrize(
    ("change", "violation", "ours"),
    [
        ("tamper", "HashMismatch", "_ops.py: hash differs from the digest"),
        ("add", "UnknownFile", "extra.py: not listed in the digest"),
        ("remove", "MissingFile", "data/empty: listed in the digest but missing"),
    ],
)
def test_loader_rejects_changed_files(
    project: Path, change: str, violation: str, ours: str
) -> None:
    variant = project / "build" / CPU
    run("hash", str(variant))
    recorded = Digest.validate(json.loads((variant / "metadata.json").read_text())["digest"])
    if change == "tamper":
        (variant / "_ops.py").write_text("# changed\n")
    elif change == "add":
        (variant / "extra.py").write_text("")
    else:
        (variant / "data" / "empty").unlink()
    (found,) = loader_check(variant)
    assert isinstance(found, getattr(kernels_rust.DigestViolation, violation))
    assert found.path == ours.partition(":")[0]
    assert digest_violations(recorded, compute_digest(variant)) == [ours]


def test_changes_the_loader_ignores_keep_the_digest_valid(project: Path) -> None:
    variant = project / "build" / CPU
    run("hash", str(project))
    (variant / "__pycache__").mkdir()
    (variant / "__pycache__" / "_ops.cpython-311.pyc").write_bytes(b"new bytecode")
    (variant / "metadata.json.sigstore").write_text('{"signed": true}')
    assert loader_check(variant) == []


def test_result_is_preferred_over_build(tmp_path: Path) -> None:
    make_variant(tmp_path / "result", "relu", CPU)
    make_variant(tmp_path / "build", "relu", CPU)
    run("hash", str(tmp_path))
    assert "digest" in json.loads((tmp_path / "result" / CPU / "metadata.json").read_text())
    assert "digest" not in json.loads((tmp_path / "build" / CPU / "metadata.json").read_text())


def test_invalid_metadata_writes_nothing(project: Path) -> None:
    good = project / "build" / CPU / "metadata.json"
    before = good.read_text()
    bad = project / "build" / CUDA / "metadata.json"
    bad.write_text(bad.read_text().replace('"version": 1', '"version": "one"'))
    result = CliRunner().invoke(main, ["hash", str(project)])
    assert result.exit_code == 2
    assert f"{CUDA}/metadata.json: version" in result.output
    assert "Traceback" not in result.output
    assert good.read_text() == before


def test_broken_link_is_an_error(project: Path) -> None:
    (project / "build" / CPU / "gone.py").symlink_to("missing.py")
    result = CliRunner().invoke(main, ["hash", str(project)])
    assert result.exit_code == 2
    assert "gone.py: broken symbolic link" in result.output


def test_no_variants_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["hash", str(tmp_path)])
    assert result.exit_code == 2
    assert "no build variants found" in result.output


def test_with_digest_replaces_in_place() -> None:
    digest = Digest(algorithm="sha256", files={"a": "b"})
    raw = {"name": "x", "digest": {"algorithm": "sha512", "files": {}}, "id": "y"}
    assert list(with_digest(raw, digest)) == ["name", "digest", "id"]
    assert with_digest({"name": "x"}, digest) == {"name": "x", "digest": digest.to_data()}
