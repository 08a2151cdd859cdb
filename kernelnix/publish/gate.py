"""What `upload` publishes is gated on the checks' verdict, not on who built it.

Every variant is checked under the publishing policy (the default, `kernel`),
whichever toolchain built it, and its provenance is reported. A variant that
fails the checks, whose metadata.json does not validate or the `kernels` loader
cannot parse, whose recorded digest is stale, or that is a development build
(`--cuda-archs`) is refused, with every violation and its fix. Variants built
from a dirty git tree pass with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kernelnix.checks import DEFAULT_POLICY, CheckOptions, CheckReport, run_checks
from kernelnix.checks.runner import discover_variants
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.plan.metadata import VariantMetadata
from kernelnix.publish.digest import stale_digest, valid_metadata

PUBLISHING_REASON = (
    "the publishing policy: what the Hub serves must load on every supported machine"
)


@dataclass(frozen=True)
class CheckedVariant:
    """A variant that passed the checks, with what they ran and its provenance."""

    metadata: VariantMetadata
    report: CheckReport

    @property
    def path(self) -> Path:
        return self.metadata.path.parent

    @property
    def toolchain(self) -> str | None:
        """The toolchain that built it; None when not built by kernelnix."""
        return self.metadata.model.own.toolchain if self.metadata.model.own else None

    @property
    def built_policy(self) -> str | None:
        """The policy its build held it to, as metadata.json records it."""
        return self.metadata.model.own.policy if self.metadata.model.own else None

    def describe(self) -> str:
        settings = self.report.settings
        built = (
            f"built with the {self.toolchain} toolchain"
            + (f", which checked it under {self.built_policy}" if self.built_policy else "")
            if self.toolchain
            else "no kernelnix provenance"
        )
        imported = "imported through kernels" if settings.get("import") else "import not checked"
        return (
            f"{self.path.name}: ok under policy {settings['policy']}, "
            f"{len(self.report.files_checked)} files, {imported}; {built}"
        )


def publishing_checks(options: CheckOptions) -> CheckOptions:
    """`options` (python ABI, import check, ...) under the publishing policy."""
    return replace(
        options,
        policy=DEFAULT_POLICY,
        policy_reason=PUBLISHING_REASON,
        follow_record=False,
        redistributable=True,
    )


def _check_failures(report: CheckReport) -> list[Diagnostic]:
    return [
        Diagnostic(
            f"{v.rule}: {v.describe()} (policy {report.settings['policy']})",
            file=display_path(report.variant_dir / v.file),
            fix=v.fix,
        )
        for v in report.errors
    ]


def _stale_digest(metadata: VariantMetadata) -> list[Diagnostic]:
    return [
        Diagnostic(
            f"digest: {problem}",
            file=display_path(metadata.path),
            fix="rehash after the last change (kernelnix hash), or rebuild the variant",
        )
        for problem in stale_digest(metadata.path.parent, metadata.model)
    ]


def _loader_objection(metadata: VariantMetadata) -> list[Diagnostic]:
    """What the `kernels` loader's own parser says; nothing when it is not installed."""
    try:
        from kernels._rust import Metadata as LoaderMetadata  # type: ignore[import-untyped]
    except ImportError:
        return []
    try:
        LoaderMetadata.read_from_file(metadata.path)
    except ValueError as exc:
        return [
            Diagnostic(
                f"the kernels loader cannot parse it: {exc}",
                file=display_path(metadata.path),
                fix="rebuild the variant so that the build writes its metadata.json",
            )
        ]
    return []


def _development_build(metadata: VariantMetadata) -> list[Diagnostic]:
    own = metadata.model.own
    if own is None or not own.development_archs:
        return []
    return [
        Diagnostic(
            f"a development build for CUDA archs {', '.join(own.development_archs)} only "
            "(--cuda-archs): it lacks the other archs the variant is published with",
            file=display_path(metadata.path),
            key="provenance.kernelnix.development-archs",
            fix="rebuild without --cuda-archs",
        )
    ]


def _refusals(report: CheckReport, metadata: VariantMetadata) -> list[Diagnostic]:
    """Why a checked variant must not be published; [] when it may."""
    return [
        *_check_failures(report),
        *_stale_digest(metadata),
        *_loader_objection(metadata),
        *_development_build(metadata),
    ]


def _dirty_warning(metadata: VariantMetadata) -> Diagnostic | None:
    provenance = metadata.model.provenance
    if provenance is None:
        return None
    if not ((provenance.kernel and provenance.kernel.dirty) or provenance.kernel_builder.dirty):
        return None
    return Diagnostic(
        "built from a git tree with uncommitted changes (provenance: dirty)",
        file=display_path(metadata.path),
        fix="commit the changes and rebuild before publishing",
        severity="warning",
    )


def checked_variants(
    source: Path, options: CheckOptions, *, exact: bool = False
) -> tuple[list[CheckedVariant], list[Diagnostic]]:
    """The variants under `source`, each checked under the publishing policy, and the
    dirty-tree warnings. `exact`: `source` is the build itself (its variants are its
    sub-directories, or itself), never a project holding result/ or build/.

    UserError listing every refusal when a variant may not be published.
    """
    checks = publishing_checks(options)
    found: list[tuple[VariantMetadata, CheckReport]] = []
    problems: list[Diagnostic] = []
    for variant in discover_variants(source, exact=exact):
        try:
            metadata = valid_metadata(variant)
        except UserError as exc:
            problems += exc.diagnostics
            continue
        report = run_checks(variant, checks)
        problems += _refusals(report, metadata)
        found.append((metadata, report))
    if problems:
        raise UserError(problems)
    warnings = [w for w in (_dirty_warning(m) for m, _ in found) if w is not None]
    return [CheckedVariant(metadata, report) for metadata, report in found], warnings
