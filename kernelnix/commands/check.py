"""Post-build checks on a variant or a build tree: `kernelnix check` (every rule),
and kernel-builder's `check-abi` (the shared-library rules) and `check-builds`
(the metadata.json rules)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from kernelnix.checks.context import DEFAULT_PYTHON_ABI, CheckOptions, load_context
from kernelnix.checks.policy import DEFAULT_POLICY
from kernelnix.checks.report import CheckReport, render_reports, reports_json
from kernelnix.checks.rules import BINARY_RULES, METADATA_RULES, VariantRule
from kernelnix.checks.runner import check_tree, discover_variants, validate_options
from kernelnix.cli import DIR_ARGUMENT, F, command, reports_user_errors
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.version import Version

EXIT_VIOLATIONS = 1
# kernel-builder's check-abi default.
DEFAULT_MANYLINUX = "manylinux_2_28"


def _version_option(value: str | None, key: str) -> Version | None:
    if value is None:
        return None
    try:
        return Version.parse(value)
    except ValueError as exc:
        raise UserError(
            [
                Diagnostic(
                    f"invalid version {value!r}: {exc}",
                    key=key,
                    fix="pass a dotted version such as 2.10",
                )
            ]
        ) from exc


def abi_options(func: F) -> F:
    """The binary rules' settings, shared by check and check-abi."""
    options = [
        click.option(
            "-p",
            "--python-abi",
            default=DEFAULT_PYTHON_ABI,
            show_default=True,
            metavar="V",
            help="Oldest Python whose stable ABI (abi3) the libraries must stick to.",
        ),
        click.option(
            "--torch-stable-abi",
            "stable_abi",
            default=None,
            metavar="V",
            help="Torch stable-ABI target (default: from torch-stable-abi<V>-… names).",
        ),
        click.option(
            "--macos",
            default=None,
            metavar="V",
            help="Highest allowed minimum macOS (default: 26.0 for Metal, else 15.0).",
        ),
        click.option(
            "--redistributable/--local",
            default=None,
            help="--local allows build-machine RPATHs (host-toolchain builds). "
            "Default: --redistributable, or what the build recorded (check).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _options(
    policy: str | None,
    python_abi: str,
    stable_abi: str | None,
    macos: str | None,
    redistributable: bool | None,
    import_check: bool = False,
) -> CheckOptions:
    """Without --policy and --redistributable/--local, each variant is checked the
    way its build checked it (the policy metadata.json records), else by default."""
    return CheckOptions(
        policy=policy or DEFAULT_POLICY,
        policy_reason="chosen on the command line" if policy else "the default policy",
        follow_record=policy is None and redistributable is None,
        python_abi=python_abi,
        stable_abi=_version_option(stable_abi, "torch-stable-abi"),
        macos_min=_version_option(macos, "macos"),
        redistributable=True if redistributable is None else redistributable,
        import_check=import_check,
    )


def _print_reports(reports: list[CheckReport], as_json: bool) -> None:
    """The reports on stdout; exit code 1 when a variant has violations."""
    if as_json:
        click.echo(json.dumps(reports_json(reports), indent=2))
    else:
        click.echo(render_reports(reports))
    if not all(report.ok for report in reports):
        sys.exit(EXIT_VIOLATIONS)


def _report(variant: Path, options: CheckOptions, rules: list[VariantRule]) -> CheckReport:
    ctx = load_context(variant, options)
    return CheckReport(
        variant_dir=variant,
        settings=ctx.settings(),
        violations=[violation for rule in rules for violation in rule(ctx)],
        notes=ctx.notes,
        files_checked=ctx.listing.files,
    )


def check_rules(path: Path, options: CheckOptions, rules: list[VariantRule]) -> list[CheckReport]:
    """Only `rules`, on every variant under `path` (found as `kernelnix check` finds them)."""
    validate_options(options)
    return [_report(variant, options, rules) for variant in discover_variants(path)]


@command("check")
@click.argument("path", required=False, default=".", type=click.Path(path_type=Path))
@click.option(
    "--policy",
    default=None,
    metavar="NAME",
    help="Symbol-version/library policy: kernel, or a manylinux_* level. Default: the "
    "one the build recorded in metadata.json (the build's own verdict), else kernel.",
)
@abi_options
@click.option(
    "--no-import",
    "no_import",
    is_flag=True,
    help="Skip importing each variant through the kernels loader.",
)
@click.option(
    "--local-kernels",
    envvar="LOCAL_KERNELS",
    metavar="REPO=DIR[:REPO=DIR...]",
    help="Where the import finds the variants' kernel dependencies, as the loader reads "
    "LOCAL_KERNELS (default: $LOCAL_KERNELS; `nix develop .#test` sets it).",
)
@reports_user_errors
def check(
    policy: str | None,
    path: Path,
    no_import: bool,
    local_kernels: str | None,
    as_json: bool,
    **abi: Any,
) -> None:
    """Layout, metadata, Python sources (imports, op namespaces), shared
    libraries (symbol versions, needed libraries, search paths, Python and
    Torch stable ABI, macOS deployment target) and an import through the
    `kernels` loader. Each variant is held to the policy its build recorded
    (the same verdict the build gave) unless --policy says otherwise; the
    report names the policy and why. Exit code 1 when a variant has
    violations, 2 for bad input.

    \b
    Examples:
      kernelnix check build/
      kernelnix check --policy manylinux_2_28 --json result/torch213-cxx11-cpu-x86_64-linux
    """
    options = _options(policy, import_check=not no_import, **abi)
    reports = check_tree(path, replace(options, local_kernels=local_kernels or None))
    _print_reports(reports, as_json)


@command("check-abi")
@DIR_ARGUMENT
@click.option(
    "-m",
    "--manylinux",
    default=DEFAULT_MANYLINUX,
    show_default=True,
    metavar="NAME",
    help="The manylinux level (policy) of Linux libraries; `kernel` for kernelnix's own.",
)
@abi_options
@reports_user_errors
def check_abi(directory: Path, manylinux: str, as_json: bool, **abi: Any) -> None:
    """Variants are found as `kernelnix check` finds them (result/, build/, the
    directory itself); only the shared-library rules run. Exit code 1 when a
    library has violations, 2 for bad input.

    \b
    Examples:
      kernelnix check-abi examples/relu
      kernelnix check-abi -m manylinux_2_34 -p 3.10 --local build/
    """
    reports = check_rules(directory, _options(manylinux, **abi), BINARY_RULES)
    _print_reports(reports, as_json)


@command("check-builds")
@DIR_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@reports_user_errors
def check_builds(directory: Path, as_json: bool) -> None:
    """Exit code 1 when a variant's metadata is missing or invalid, 2 when there
    are no variants.

    \b
    Examples:
      kernelnix check-builds examples/relu
      kernelnix check-builds --json result
    """
    reports = check_rules(directory, CheckOptions(import_check=False), METADATA_RULES)
    _print_reports(reports, as_json)
