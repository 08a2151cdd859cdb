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
from kernelnix.fileio import write_atomic
from kernelnix.matrix import load_matrix
from kernelnix.plan import PLAN_FILE, PlanOptions, build_plan, current_system, plan_json

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


@main.command("list-variants")
@DIR_ARGUMENT
@click.option(
    "--system",
    "system",
    metavar="SYSTEM",
    help="List the variants of this system (default: this machine's).",
)
@click.option("--all-systems", is_flag=True, help="List the variants of every system.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: system -> variant details.")
@reports_user_errors
def list_variants(directory: Path, system: str | None, all_systems: bool, as_json: bool) -> None:
    """List the build variants of DIRECTORY/build.toml, one per line.

    Names follow the Hub grammar, e.g. torch213-cxx11-cu126-x86_64-linux.

    \b
    Examples:
      kernelnix list-variants examples/relu
      kernelnix list-variants examples/relu --all-systems --json
    """
    if system and all_systems:
        raise UserError.single(
            "--system and --all-systems are mutually exclusive", fix="pass one of them"
        )
    systems = _systems_option(system, all_systems)
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    plan = build_plan(loaded, PlanOptions(systems=systems))
    for line in plan["notes"] + [c for s in plan["systems"].values() for c in s["collisions"]]:
        click.echo(f"note: {line}", err=True)
    if as_json:
        click.echo(
            json.dumps(
                {
                    s: {name: _variant_summary(v) for name, v in plan["variants"][s].items()}
                    for s in plan["variants"]
                },
                indent=2,
            )
        )
        return
    for name in (n for s in plan["systems"].values() for n in s["variants"]):
        click.echo(name)


def _variant_summary(variant: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "kind",
        "backend",
        "backend-version",
        "torch",
        "stable-abi",
        "tvm-ffi",
        "bundle",
        "ops-id",
        "archs",
    )
    return {k: variant[k] for k in keys}


def _systems_option(system: str | None, all_systems: bool) -> tuple[str, ...] | None:
    known = load_matrix().systems
    if all_systems:
        return None
    chosen = system or current_system()
    if chosen not in known:
        raise UserError.single(
            f"unknown system {chosen!r}; the matrix has: {', '.join(known)}",
            fix="pass --system with one of those, or --all-systems",
        )
    return (chosen,)


@main.command("plan")
@DIR_ARGUMENT
@click.option("--unique-id", help="Unique part of the op namespace (default: git tree id).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Where to write the plan (default: DIRECTORY/{PLAN_FILE}).",
)
@reports_user_errors
def plan_command(directory: Path, unique_id: str | None, output: Path | None) -> None:
    """Write the build plan of DIRECTORY/build.toml (JSON, every system).

    \b
    Example:
      kernelnix plan examples/relu -o /tmp/relu-plan.json
    """
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    try:
        plan = build_plan(loaded, PlanOptions(unique_id=unique_id))
    except ValueError as exc:
        raise UserError.single(str(exc), key="--unique-id") from None
    target = output or loaded.path.parent / PLAN_FILE
    write_atomic(target, plan_json(plan))
    click.echo(
        f"wrote {target}: {sum(len(s['variants']) for s in plan['systems'].values())} "
        f"variants over {len(plan['systems'])} systems"
    )
