"""Variant digests: the hash of every file a variant ships, kept in its metadata.json.

The files and the encoding are the ones the `kernels` loader checks
(`kernels._rust.Digest.hash_variant` / `validate`): every regular file under
the variant directory except the top-level `metadata.json` and
`metadata.json.sigstore`, anything under a `__pycache__` directory and
`*.pyc` files; keys are `/`-separated relative paths, values the padded
standard base64 of the raw digest. A symbolic link to a file is hashed as
that file; links to directories are not followed.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from kernelnix.checks import discover_variants
from kernelnix.checks.files import hashed_files
from kernelnix.core.fileio import write_atomic
from kernelnix.plan.metadata import Digest, Metadata, VariantMetadata, read_metadata

Algorithm = Literal["sha256", "sha512"]
_CHUNK = 1 << 20


def valid_metadata(variant_dir: Path) -> VariantMetadata:
    """`variant_dir`'s metadata.json, valid; a UserError with every problem."""
    return read_metadata(variant_dir).valid(
        fix="rebuild the variant so that the build writes its metadata.json"
    )


def file_digest(path: Path, algorithm: Algorithm) -> str:
    """The padded standard base64 of the file's hash."""
    digest = hashlib.new(algorithm)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return base64.b64encode(digest.digest()).decode("ascii")


def compute_digest(variant_dir: Path, algorithm: Algorithm = "sha256") -> Digest:
    files = {rel: file_digest(variant_dir / rel, algorithm) for rel in hashed_files(variant_dir)}
    return Digest(algorithm=algorithm, files=files)


def digest_violations(expected: Digest, actual: Digest) -> list[str]:
    """What differs between a recorded digest and the files, the loader's way."""
    if expected.algorithm != actual.algorithm:
        return [f"digest algorithm {expected.algorithm}, but compared with {actual.algorithm}"]
    problems = []
    for path, value in sorted(expected.files.items()):
        if path not in actual.files:
            problems.append(f"{path}: listed in the digest but missing")
        elif actual.files[path] != value:
            problems.append(f"{path}: hash differs from the digest")
    problems += [
        f"{path}: not listed in the digest" for path in sorted(actual.files.keys() - expected.files)
    ]
    return problems


def stale_digest(variant_dir: Path, metadata: Metadata) -> list[str]:
    """Violations of the variant's recorded digest; none when it records no digest."""
    if metadata.digest is None:
        return []
    return digest_violations(
        metadata.digest, compute_digest(variant_dir, metadata.digest.algorithm)
    )


def with_digest(raw: dict[str, Any], digest: Digest) -> dict[str, Any]:
    """`raw` with `digest` set: in place if present, else before `provenance` (reference order)."""
    value = digest.to_data()
    if "digest" in raw or "provenance" not in raw:
        return {**raw, "digest": value}
    result: dict[str, Any] = {}
    for key, item in raw.items():
        if key == "provenance":
            result["digest"] = value
        result[key] = item
    return result


def write_digest(metadata: VariantMetadata, digest: Digest) -> None:
    text = json.dumps(with_digest(metadata.raw, digest), indent=2) + "\n"
    write_atomic(metadata.path, text)


def hash_variants(path: Path) -> list[tuple[Path, Digest]]:
    """Write the SHA-256 digest into every variant's metadata.json under `path`,
    after the source repository's URL where the build provenance names none
    (kernelnix.publish.provenance: a flake cannot know it, git can).

    Every metadata.json is read and validated before the first one is written.
    """
    from kernelnix.publish.provenance import record_source_repository

    found = discover_variants(path)
    for variant in [valid_metadata(variant).path.parent for variant in found]:
        record_source_repository(variant)
    variants = [valid_metadata(variant) for variant in found]
    written = []
    for metadata in variants:
        digest = compute_digest(metadata.path.parent)
        write_digest(metadata, digest)
        written.append((metadata.path.parent, digest))
    return written
