"""`kernelnix check [PATH]`: run the post-build checks on a variant or a build tree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kernelnix.checks.context import DEFAULT_PYTHON_ABI, CheckOptions
from kernelnix.checks.policy import DEFAULT_POLICY
from kernelnix.checks.report import render_reports, reports_json
from kernelnix.checks.runner import check_tree
from kernelnix.cli import main, reports_user_errors
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.version import Version

EXIT_VIOLATIONS = 1


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


@click.command("check")
@click.argument("path", required=False, default=".", type=click.Path(path_type=Path))
@click.option(
    "--policy",
    default=DEFAULT_POLICY,
    show_default=True,
    metavar="NAME",
    help="Symbol-version/library policy: kernel, or a manylinux_* level.",
)
@click.option(
    "--python-abi",
    default=DEFAULT_PYTHON_ABI,
    show_default=True,
    metavar="V",
    help="Oldest Python whose stable ABI (abi3) the libraries must stick to.",
)
@click.option(
    "--torch-stable-abi",
    "stable_abi",
    default=None,
    metavar="V",
    help="Torch stable-ABI target (default: from torch-stable-abi<V>-… names).",
)
@click.option(
    "--macos",
    default=None,
    metavar="V",
    help="Highest allowed minimum macOS (default: 26.0 for Metal, else 15.0).",
)
@click.option(
    "--redistributable/--local",
    default=True,
    show_default=True,
    help="--local allows build-machine RPATHs (host-toolchain builds).",
)
@click.option(
    "--no-import",
    "no_import",
    is_flag=True,
    help="Skip importing each variant through the kernels loader.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@reports_user_errors
def check(
    path: Path,
    policy: str,
    python_abi: str,
    stable_abi: str | None,
    macos: str | None,
    redistributable: bool,
    no_import: bool,
    as_json: bool,
) -> None:
    """Check PATH: one variant directory, or a build tree of variants.

    Layout, metadata, Python sources (imports, op namespaces), shared
    libraries (symbol versions, needed libraries, search paths, Python and
    Torch stable ABI, macOS deployment target) and an import through the
    `kernels` loader. Exit code 1 when a variant has violations, 2 for bad
    input.

    \b
    Examples:
      kernelnix check build/
      kernelnix check --policy manylinux_2_28 --json result/torch213-cxx11-cpu-x86_64-linux
    """
    options = CheckOptions(
        policy=policy,
        python_abi=python_abi,
        stable_abi=_version_option(stable_abi, "torch-stable-abi"),
        macos_min=_version_option(macos, "macos"),
        redistributable=redistributable,
        import_check=not no_import,
    )
    reports = check_tree(path, options)
    if as_json:
        click.echo(json.dumps(reports_json(reports), indent=2))
    else:
        click.echo(render_reports(reports))
    if not all(report.ok for report in reports):
        sys.exit(EXIT_VIOLATIONS)


main.add_command(check)
