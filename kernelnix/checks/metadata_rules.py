"""metadata.json: present, readable, and consistent with the variant's name.

`metadata_readable`, `metadata_fields` and `metadata_matches_variant` cover what
the other checks rely on (`name`, `id`, `backend.type`); `metadata_model`
reports what kernelnix.plan.metadata's reader found wrong with the whole file;
`metadata_provenance` holds the build provenance of a bundle's variant to its files.
"""

from __future__ import annotations

import hashlib
import keyword
from collections.abc import Iterable
from pathlib import Path

from kernelnix.checks.context import VariantContext
from kernelnix.checks.files import hashed_files
from kernelnix.checks.report import VARIANT_FILE, Violation

METADATA = "metadata.json"


def metadata_readable(ctx: VariantContext) -> Iterable[Violation]:
    """metadata.json exists and is a JSON object."""
    if ctx.metadata_error is None:
        return
    yield Violation(
        rule="metadata",
        file=METADATA,
        subject=METADATA,
        found=ctx.metadata_error,
        limit="a JSON object with name, id, version, license, python-depends and backend",
        fix="let the build write metadata.json (kernelnix build), do not edit it by hand",
    )


def metadata_fields(ctx: VariantContext) -> Iterable[Violation]:
    """The keys the loader and the other rules depend on have usable values."""
    if ctx.metadata is None:
        return
    kernel_id = ctx.metadata.get("id")
    if not isinstance(kernel_id, str) or not kernel_id:
        yield _field_violation("id", "missing or not a string", "the kernel's ops id")
    elif not kernel_id.isidentifier() or keyword.iskeyword(kernel_id):
        yield _field_violation(
            "id",
            f"{kernel_id!r} is not a Python identifier",
            "a module name: the loader imports the kernel as sys.modules[id]",
        )
    if not isinstance(ctx.metadata.get("name"), str):
        yield _field_violation("name", "missing or not a string", "the kernel name")
    if ctx.backend is None or not isinstance(ctx.metadata.get("backend"), dict):
        yield _field_violation("backend.type", "missing", "cpu, cuda, metal, rocm, xpu, ...")


def _field_violation(key: str, found: str, limit: str) -> Violation:
    return Violation(
        rule="metadata",
        file=METADATA,
        subject=key,
        found=found,
        limit=limit,
        fix="regenerate metadata.json with the build",
    )


def metadata_matches_variant(ctx: VariantContext) -> Iterable[Violation]:
    """The directory name parses like the loader parses it and agrees with metadata.json."""
    if ctx.name is None:
        yield Violation(
            rule="variant-name",
            file=VARIANT_FILE,
            subject=ctx.variant_dir.name,
            found=f"not a variant name the loader understands ({ctx.name_error})",
            limit="torch<V>[-cxx11]-<backend>-<cpu>-<os>, torch-stable-abi<V>-…, "
            "tvm-ffi<V>-…, or torch-<backend>",
            fix="keep the directory name the build gave the variant; the loader silently "
            "skips directories it cannot parse",
        )
        return
    declared = (ctx.metadata or {}).get("backend")
    declared_type = declared.get("type") if isinstance(declared, dict) else None
    named = ctx.name.backend
    if not isinstance(declared_type, str) or named == "universal":
        return
    if declared_type != named:
        yield Violation(
            rule="variant-name",
            file=METADATA,
            subject="backend.type",
            found=f"{declared_type!r}, but the directory name says {named!r}",
            limit="the backend in the variant name",
            fix="rebuild the variant; a mismatch means files of two builds were mixed",
        )


def metadata_model(ctx: VariantContext) -> Iterable[Violation]:
    """metadata.json against kernelnix's metadata model, read as the loader reads it
    (kernelnix.plan.metadata.read_metadata)."""
    for problem in ctx.metadata_read.problems:
        yield Violation(
            rule="metadata",
            file=METADATA,
            subject=problem.key or METADATA,
            found=problem.message,
            limit="the metadata.json schema of the kernels loader",
            fix="regenerate metadata.json with the build, do not edit it by hand",
        )


def metadata_provenance(ctx: VariantContext) -> Iterable[Violation]:
    """The build provenance a bundle records (`provenance.slsa`, SLSA v1): its
    subject is the variant's files with their sha256, it names this variant, and
    its source commit is the one the build recorded."""
    model = ctx.metadata_read.model
    slsa = model.provenance.slsa if model is not None and model.provenance else None
    if model is None or slsa is None:
        return
    key = "provenance.slsa"

    def violation(subject: str, found: str, limit: str) -> Violation:
        return Violation(
            rule="provenance",
            file=METADATA,
            subject=f"{key}.{subject}",
            found=found,
            limit=limit,
            fix="build the bundle again through the kernel's flake; do not edit the files "
            "or the provenance of a built variant",
        )

    recorded = {entry.name or "": entry.digest.get("sha256") for entry in slsa.subject}
    files = hashed_files(ctx.variant_dir)
    for missing in sorted(set(files) - recorded.keys()):
        yield violation("subject", f"{missing} is not in it", "every file the loader hashes")
    for extra in sorted(recorded.keys() - set(files)):
        yield violation("subject", f"{extra} names no file of the variant", "the variant's files")
    for name in sorted(recorded.keys() & set(files)):
        if recorded[name] != file_sha256(ctx.variant_dir / name):
            yield violation(
                "subject", f"{name}: its sha256 differs from the file's", "the built file's sha256"
            )
    parameters = slsa.predicate.build_definition.external_parameters
    if parameters.variant != ctx.variant_dir.name:
        yield violation(
            "predicate.buildDefinition.externalParameters.variant",
            f"{parameters.variant!r}, but the directory is {ctx.variant_dir.name!r}",
            "the variant's name",
        )
    kernel = model.provenance.kernel if model.provenance else None
    commit = parameters.source.digest.get("gitCommit")
    if kernel is not None and commit is not None and commit.lower() != kernel.commit.lower():
        yield violation(
            "predicate.buildDefinition.externalParameters.source",
            f"commit {commit}, but provenance.kernel.commit is {kernel.commit}",
            "the commit the variant was built from",
        )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
