"""metadata.json: present, readable, and consistent with the variant's name.

`metadata_readable`, `metadata_fields` and `metadata_matches_variant` cover what
the other checks rely on (`name`, `id`, `backend.type`); `metadata_model`
reports what kernelnix.plan.metadata's reader found wrong with the whole file.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable

from kernelnix.checks.context import VariantContext
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
