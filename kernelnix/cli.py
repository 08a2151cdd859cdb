"""The `kernelnix` command line: thin glue over the library modules."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from kernelnix import __version__
from kernelnix.config import load_config
from kernelnix.config.update import apply_update, plan_update
from kernelnix.diagnostics import Diagnostic, UserError, diagnostics_json

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2

DIR_ARGUMENT = click.argument(
    "directory",
    required=False,
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
)


def print_warnings(warnings: Iterable[Diagnostic]) -> None:
    for warning in warnings:
        click.echo(warning.render(), err=True)


def reports_user_errors(func: F) -> F:
    """Turn a UserError into its diagnostics on stderr and exit code 2, no traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            if kwargs.get("as_json"):
                click.echo(diagnostics_json(exc.diagnostics))
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelnix")
def main() -> None:
    """Build Hub-conforming PyTorch kernels from build.toml with Nix.

    \b
    Examples:
      kernelnix check-config examples/relu
      kernelnix update-build --dry-run path/to/kernel
    """


@main.command("check-config")
@DIR_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print the normalized edition-5 config.")
@reports_user_errors
def check_config(directory: Path, as_json: bool) -> None:
    """Validate DIRECTORY/build.toml (any edition in use).

    Every problem is reported at once, with file, key path and line.
    Exit code 2 when the file is invalid.

    \b
    Example:
      kernelnix check-config examples/relu --json
    """
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    if as_json:
        click.echo(json.dumps(loaded.config.to_json(), indent=2))
    else:
        config = loaded.config
        click.echo(
            f"{loaded.path}: ok: {config.general.name} v{config.general.version}, "
            f"framework {config.framework}, backends {', '.join(config.backends)}, "
            f"{len(config.kernel)} kernel section(s)"
        )


@main.command("update-build")
@DIR_ARGUMENT
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
@reports_user_errors
def update_build(directory: Path, dry_run: bool) -> None:
    """Rewrite a pre-edition DIRECTORY/build.toml as edition 5.

    Comments and key order are kept; the file is replaced atomically.

    \b
    Example:
      kernelnix update-build --dry-run examples/relu-legacy
    """
    update = plan_update(directory)
    if not update.changed:
        click.echo(f"{update.path}: already edition 5; nothing to do")
        return
    if dry_run:
        click.echo(update.diff(), nl=False)
        return
    apply_update(update)
    click.echo(f"{update.path}: upgraded from the pre-edition {update.shape} format to edition 5")
