"""Run the rules over one variant directory or a whole build tree."""

from __future__ import annotations

from pathlib import Path

from kernelnix.checks.context import CheckOptions, load_context
from kernelnix.checks.import_check import without_explained_failures
from kernelnix.checks.policy import UnknownPolicyError, check_policy_name
from kernelnix.checks.report import CheckReport
from kernelnix.checks.rules import variant_rules
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.core.version import Version
from kernelnix.variants.names import parse_variant_name

METADATA = "metadata.json"


def validate_options(options: CheckOptions) -> None:
    """Reject bad input up front (exit 2), with every problem at once."""
    problems: list[Diagnostic] = []
    try:
        check_policy_name(options.policy)
    except UnknownPolicyError as exc:
        problems.append(Diagnostic(str(exc), key="policy", fix="pass one of the listed names"))
    try:
        Version.parse(options.python_abi)
    except ValueError as exc:
        problems.append(
            Diagnostic(
                f"invalid Python ABI version: {exc}",
                key="python-abi",
                fix="pass a version such as 3.9",
            )
        )
    if problems:
        raise UserError(problems)


def run_checks(variant_dir: Path, options: CheckOptions | None = None) -> CheckReport:
    """Check one variant directory (the build's post-build hook calls this)."""
    options = options or CheckOptions()
    validate_options(options)
    if not variant_dir.is_dir():
        raise UserError.single(
            "not a directory",
            file=display_path(variant_dir),
            fix="pass a variant directory (one holding metadata.json)",
        )
    ctx = load_context(variant_dir, options)
    found = [violation for rule in variant_rules() for violation in rule(ctx)]
    violations = without_explained_failures(found)
    return CheckReport(
        variant_dir=variant_dir,
        settings=ctx.settings(),
        violations=violations,
        notes=ctx.notes,
        files_checked=ctx.listing.files,
    )


def discover_variants(path: Path, *, exact: bool = False) -> list[Path]:
    """Variant directories under `path`, found the way the reference finds them.

    `path` itself when it holds metadata.json; else the first of `path/result`,
    `path/build`, `path` with sub-directories holding metadata.json (with
    `exact`, `path` only: it is a build tree, not a project). Sibling
    directories named like variants but lacking metadata.json are included, so
    that their missing metadata is reported rather than skipped.
    """
    if not path.is_dir():
        raise UserError.single(
            "no such directory",
            file=display_path(path),
            fix="pass a variant directory or a build tree (a directory of variants)",
        )
    if (path / METADATA).is_file():
        return [path]
    for base in (path,) if exact else (path / "result", path / "build", path):
        if not base.is_dir():
            continue
        subdirs = sorted(d for d in base.iterdir() if d.is_dir())
        found = [d for d in subdirs if (d / METADATA).is_file()]
        if found:
            return [d for d in subdirs if d in found or _named_like_variant(d.name)]
    raise UserError.single(
        "no build variants found (no sub-directory with a metadata.json in "
        "result/, build/ or the directory itself)",
        file=display_path(path),
        fix="build the kernel first, or pass the variant directory itself",
    )


def _named_like_variant(name: str) -> bool:
    try:
        parse_variant_name(name)
    except ValueError:
        return False
    return True


def check_tree(path: Path, options: CheckOptions | None = None) -> list[CheckReport]:
    """Check every variant under `path` (or `path` itself when it is a variant)."""
    options = options or CheckOptions()
    validate_options(options)
    return [run_checks(variant, options) for variant in discover_variants(path)]
