"""kernelnix.publish.reproduce: a relu variant (hand-made, with a real ELF library of
the checks corpus) compared with copies changed one way each; its digest checked
as the real `kernels` loader checks it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from checks_corpus.corpus import build_corpus
from handmade import copy_example, variant_with_library
from hubserver import FakeHub, repository_files, serving_downloads
from kernels._rust import Digest as LoaderDigest
from kernels._rust import DigestAlgorithm, DigestValidationError, Metadata

from kernelnix.checks.elf import read_sections
from kernelnix.core.diagnostics import UserError
from kernelnix.publish.digest import hash_variants
from kernelnix.publish.reproduce import VariantVerdict, compare_bundles, reproduce, variants_of

pytestmark = pytest.mark.slow  # the corpus is compiled with gcc

VARIANT = "torch213-cxx11-cpu-x86_64-linux"
OTHER = "torch212-cxx11-cpu-x86_64-linux"


@pytest.fixture
def bundles(tmp_path: Path) -> tuple[Path, Path]:
    """(rebuilt, reference): one relu variant, and an identical copy of it."""
    rebuilt = tmp_path / "rebuilt"
    variant_with_library(rebuilt, "relu", VARIANT, build_corpus().path("clean_c"))
    reference = tmp_path / "reference"
    shutil.copytree(rebuilt, reference)
    return rebuilt, reference


def library(bundle: Path) -> Path:
    (found,) = (bundle / VARIANT).glob("*.so")
    return found


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def compared(rebuilt: Path, reference: Path) -> list[VariantVerdict]:
    return compare_bundles(variants_of(rebuilt), dict(variants_of(reference)))


def test_a_copy_is_identical(bundles: tuple[Path, Path]) -> None:
    (verdict,) = compared(*bundles)
    assert (verdict.name, verdict.state, verdict.differences) == (VARIANT, "identical", ())
    assert verdict.notes == ("the reference records no digest (`kernelnix hash`)",)


def test_a_changed_byte_of_the_library_names_the_file_and_its_section(
    bundles: tuple[Path, Path],
) -> None:
    rebuilt, reference = bundles
    text = next(s for s in read_sections(library(reference)) if s.name == ".text")
    flip(library(reference), text.offset + 3)
    (verdict,) = compared(rebuilt, reference)
    assert verdict.state == "differs"
    assert verdict.differences == (
        f"{library(reference).name}: ELF sections differ: .text (at byte 3 of the section)",
    )


def test_a_changed_elf_header_is_outside_every_section(bundles: tuple[Path, Path]) -> None:
    rebuilt, reference = bundles
    flip(library(reference), 9)  # e_ident's padding
    (verdict,) = compared(rebuilt, reference)
    assert verdict.differences == (
        f"{library(reference).name}: ELF file: every section is the same; the headers or "
        "padding between sections differ, first at offset 9 (0x9)",
    )


def test_a_changed_python_file_gives_the_first_differing_offset(
    bundles: tuple[Path, Path],
) -> None:
    rebuilt, reference = bundles
    init = reference / VARIANT / "__init__.py"
    flip(init, 7)
    (verdict,) = compared(rebuilt, reference)
    size = init.stat().st_size
    assert verdict.differences == (
        f"__init__.py: first difference at offset 7 (0x7; {size} bytes)",
    )
    init.write_bytes((rebuilt / VARIANT / "__init__.py").read_bytes() + b"# more\n")
    (verdict,) = compared(rebuilt, reference)
    assert verdict.differences == (
        f"__init__.py: one file ends at offset {size} (sizes {size} and {size + 7} bytes)",
    )


def test_files_and_variants_on_one_side_only(bundles: tuple[Path, Path]) -> None:
    rebuilt, reference = bundles
    (reference / VARIANT / "extra.py").write_text("")
    (rebuilt / VARIANT / "_ops.py").unlink()
    shutil.copytree(reference / VARIANT, reference / OTHER)
    shutil.copytree(rebuilt / VARIANT, rebuilt / "torch214-cxx11-cpu-x86_64-linux")
    verdicts = {v.name: v for v in compared(rebuilt, reference)}
    assert verdicts[VARIANT].differences == (
        "_ops.py: only in the reference",
        "extra.py: only in the reference",
    )
    assert verdicts[OTHER].state == "only in the reference"
    assert verdicts["torch214-cxx11-cpu-x86_64-linux"].state == "only rebuilt"


def test_metadata_is_compared_as_json_without_the_digest(bundles: tuple[Path, Path]) -> None:
    rebuilt, reference = bundles
    hash_variants(reference)
    (verdict,) = compared(rebuilt, reference)
    assert verdict.state == "identical"
    assert verdict.notes[0].startswith("the rebuilt files match the reference's sha256 digest")
    metadata = reference / VARIANT / "metadata.json"
    data = json.loads(metadata.read_text())
    metadata.write_text(json.dumps({**data, "license": "MIT"}, indent=4))
    (verdict,) = compared(rebuilt, reference)
    assert verdict.differences == ("metadata.json: differs in `license`",)


def loader_accepts(variant: Path, metadata: Path) -> bool:
    """Whether `kernels` accepts `variant`'s files under `metadata`'s digest (verify_variant's
    digest step, without the signature)."""
    recorded = Metadata.from_bytes(metadata.read_bytes()).digest
    assert recorded is not None
    try:
        recorded.validate(LoaderDigest.hash_variant(DigestAlgorithm.SHA256, variant))
    except DigestValidationError:
        return False
    return True


def test_the_digest_verdict_is_the_loaders(bundles: tuple[Path, Path]) -> None:
    rebuilt, reference = bundles
    hash_variants(reference)
    published = reference / VARIANT / "metadata.json"
    assert loader_accepts(rebuilt / VARIANT, published)
    # A rebuilt file that differs: the digest says so, and so does the loader.
    flip(rebuilt / VARIANT / "_ops.py", 0)
    (verdict,) = compared(rebuilt, reference)
    assert not loader_accepts(rebuilt / VARIANT, published)
    assert verdict.differences == (
        "_ops.py: first difference at offset 0 (0x0; "
        f"{(rebuilt / VARIANT / '_ops.py').stat().st_size} bytes)",
        "digest: _ops.py: hash differs from the digest (rebuilt files against the "
        "reference's digest)",
    )


def test_a_stale_reference_digest_is_a_difference(bundles: tuple[Path, Path]) -> None:
    rebuilt, reference = bundles
    hash_variants(reference)
    (reference / VARIANT / "_ops.py").write_text("# changed after hashing\n")
    (verdict,) = compared(rebuilt, reference)
    assert (
        "digest: _ops.py: hash differs from the digest (the reference's own files: its "
        "digest is stale)" in verdict.differences
    )


# ------------------------------------------------------- against the Hub

REPO = "kernelnix-tests/relu"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    """The fake Hub on 127.0.0.1, the only address huggingface_hub may reach, and
    a download cache of this test's own."""
    with serving_downloads(monkeypatch, tmp_path / "hub-cache") as server:
        yield server


@pytest.mark.parametrize(
    ("repo", "revision", "message"),
    [
        (REPO, "v9", "the kernel repository kernelnix-tests/relu has no revision 'v9'"),
        ("kernelnix-tests/none", None, "kernelnix-tests/none is neither a directory nor a kernel"),
    ],
)
def test_a_repository_or_revision_that_does_not_exist_is_bad_input(
    bundles: tuple[Path, Path],
    hub: FakeHub,
    tmp_path: Path,
    repo: str,
    revision: str | None,
    message: str,
) -> None:
    rebuilt, reference = bundles
    hub.seed("kernel", REPO, {"main": {}, "v1": repository_files(reference)})
    with pytest.raises(UserError) as raised:
        reproduce(copy_example("relu", tmp_path), repo, revision=revision, built=rebuilt)
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.message.startswith(message) and diagnostic.fix
