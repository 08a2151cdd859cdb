"""Commands over build.toml: check-config, update-build."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kernelnix.cli import DIR_ARGUMENT, command, print_warnings, reports_user_errors
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.gate.check_config import config_problems


@command("check-config")
@DIR_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print the normalized edition-5 config.")
@reports_user_errors
def check_config(directory: Path, as_json: bool) -> None:
    """Checks the file and everything a plan, the generated project or a build
    would reject for the config's sake (missing sources, unknown
    python-depends, unsafe flags, bounds that match nothing, ...). Every problem
    is reported at once, with file, key path and line; exit code 2 when any is
    an error.

    \b
    Examples:
      kernelnix check-config
      kernelnix check-config examples/relu --json
    """
    loaded = load_config(directory)
    problems = [*loaded.warnings, *config_problems(loaded)]
    if any(p.severity == "error" for p in problems):
        raise UserError(problems)
    print_warnings(problems)
    if as_json:
        click.echo(json.dumps(loaded.config.to_json(), indent=2))
    else:
        config = loaded.config
        click.echo(
            f"{loaded.path}: ok: {config.general.name} v{config.general.version}, "
            f"framework {config.framework}, backends {', '.join(config.backends)}, "
            f"{len(config.kernel)} kernel section(s)"
        )


@command("update-build")
@DIR_ARGUMENT
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
@reports_user_errors
def update_build(directory: Path, dry_run: bool) -> None:
    """Comments and key order are kept; the file is replaced atomically.

    \b
    Examples:
      kernelnix update-build --dry-run examples/relu-legacy
      kernelnix update-build path/to/kernel
    """
    # Imported here: tomlkit costs check-config, the other command of this module.
    from kernelnix.config.rewrite import apply_update, plan_update

    update = plan_update(directory)
    if not update.changed:
        click.echo(f"{update.path}: already edition 5; nothing to do")
        return
    if dry_run:
        click.echo(update.diff(), nl=False)
        return
    apply_update(update)
    click.echo(f"{update.path}: upgraded from the pre-edition {update.shape} format to edition 5")
