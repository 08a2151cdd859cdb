"""`kernelnix reproduce`: rebuild a kernel and compare it with a published bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernelnix.cli import command, reports_user_errors
from kernelnix.commands.nix import nix_options
from kernelnix.project.nix import NixOptions

EXIT_DIFFERS = 1


@command("reproduce")
@click.argument("source", type=click.Path(path_type=Path))
@click.option(
    "--against",
    required=True,
    metavar="BUNDLE_OR_HUB_REPO",
    help="The reference: a bundle directory (or build tree, or variant), or a kernel "
    "repository on the Hub as OWNER/NAME.",
)
@click.option(
    "--revision",
    metavar="REV",
    help="The Hub revision (branch, tag or commit). Default: the branch v<version> of the "
    "rebuilt variants when it exists, else main.",
)
@click.option(
    "--variant",
    "variant_names",
    multiple=True,
    metavar="V",
    help="Rebuild and compare only this variant (repeatable). Default: the whole bundle.",
)
@click.option(
    "--built",
    type=click.Path(path_type=Path),
    help="Compare this bundle, built before, instead of building SOURCE.",
)
@nix_options
@reports_user_errors
def reproduce_command(
    source: Path,
    against: str,
    revision: str | None,
    variant_names: tuple[str, ...],
    built: Path | None,
    nix: NixOptions,
) -> None:
    """SOURCE is the kernel's directory. It is built with `nix build` (the bundle,
    or each --variant; in the Nix sandbox when its flake uses the hermetic
    toolchain), and each variant is compared with the reference's: identical,
    or the files that differ and where (ELF sections by name, else the first
    differing offset), files and variants found on one side only. A digest
    that `kernelnix hash` recorded in the reference is checked against the
    rebuilt files as the `kernels` loader checks it.

    Exit status: 0 when every compared variant is identical, 1 when anything
    differs, 2 on bad input (no such directory, repository or revision).

    \b
    Examples:
      kernelnix reproduce . --against my-org/relu
      kernelnix reproduce . --against my-org/relu --revision v1
      kernelnix reproduce . --against my-org/relu --variant torch213-cxx11-cpu-x86_64-linux
      kernelnix reproduce . --against ../published/build
      kernelnix reproduce . --against my-org/relu --built result
    """
    from kernelnix.publish.reproduce import report_lines, reproduce

    verdicts = reproduce(
        source, against, revision=revision, variant_names=variant_names, built=built, nix=nix
    )
    for line in report_lines(verdicts):
        click.echo(line)
    if any(verdict.state != "identical" for verdict in verdicts) or not verdicts:
        sys.exit(EXIT_DIFFERS)
