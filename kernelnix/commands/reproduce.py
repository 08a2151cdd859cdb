"""`kernelnix reproduce`: rebuild a kernel and compare it with a published bundle;
`kernelnix archive`: keep the downloads it is built from."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernelnix.cli import DIR_ARGUMENT, command, reports_user_errors
from kernelnix.commands.nix import archive_url, nix_options
from kernelnix.core.diagnostics import UserError
from kernelnix.project.nix import NixOptions

EXIT_DIFFERS = 1


@command("reproduce")
@click.argument("source")
@click.option(
    "--against",
    metavar="BUNDLE_OR_HUB_REPO",
    help="The reference: a bundle directory (or build tree, or variant), or a kernel "
    "repository on the Hub as OWNER/NAME. Without it, SOURCE is a kernel repository on the "
    "Hub, rebuilt from the source its provenance names.",
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
    source: str,
    against: str | None,
    revision: str | None,
    variant_names: tuple[str, ...],
    built: Path | None,
    nix: NixOptions,
) -> None:
    """SOURCE is the kernel's directory; or, without --against, a kernel repository
    on the Hub (OWNER/NAME), whose variants' build provenance names the source
    repository and commit: it is fetched with git and built with the kernelnix
    its flake.lock pins (a variant built from a dirty work tree is refused).

    The reference is checked first (a repository or revision that does not
    exist stops it before anything is built). Then the bundle's variants, or
    each --variant, are built from source on this machine, in the Nix sandbox
    when the flake uses the hermetic toolchain: never substituted from a binary
    cache, and a variant already in the Nix store is built again and compared
    with that copy (`nix-store --check`); the report says how many were built.
    Each is compared with the reference's: identical, or the files that differ
    and where (ELF sections by name, else the first differing offset), files and
    variants found on one side only. A digest that `kernelnix hash` recorded in
    the reference is checked against the rebuilt files as the `kernels` loader
    checks it.

    Exit status: 0 when every compared variant is identical, 1 when anything
    differs, 2 on bad input (no such directory, repository or revision).

    \b
    Examples:
      kernelnix reproduce . --against my-org/relu
      kernelnix reproduce . --against my-org/relu --revision v1
      kernelnix reproduce . --against my-org/relu --variant torch213-cxx11-cpu-x86_64-linux
      kernelnix reproduce . --against ../published/build
      kernelnix reproduce . --against my-org/relu --built result
      kernelnix reproduce my-org/relu --revision v1
    """
    from kernelnix.publish.reproduce import (
        HUB_REPO,
        report_lines,
        reproduce,
        reproduce_published,
    )

    if against is not None:
        done = reproduce(
            Path(source),
            against,
            revision=revision,
            variant_names=variant_names,
            built=built,
            nix=nix,
        )
    elif built is not None or Path(source).is_dir() or not HUB_REPO.fullmatch(source):
        raise UserError.single(
            "--against is missing: the published bundle to compare with",
            key="--against",
            fix="pass --against BUNDLE_OR_HUB_REPO, or give SOURCE as a Hub repository "
            "OWNER/NAME to rebuild it from the source its provenance names",
        )
    else:
        done = reproduce_published(source, revision=revision, variant_names=variant_names, nix=nix)
    for line in report_lines(done.verdicts, done.rebuild):
        click.echo(line)
    if any(verdict.state != "identical" for verdict in done.verdicts) or not done.verdicts:
        sys.exit(EXIT_DIFFERS)


@command("archive")
@DIR_ARGUMENT
@click.option(
    "--to",
    "cache",
    required=True,
    metavar="CACHE",
    help="The binary cache: a folder, file:///path or http(s)://host/path (a server that "
    "accepts uploads).",
)
@click.option("--wheels", is_flag=True, help="PyPI's files too (gigabytes of Torch and CUDA).")
@nix_options
@reports_user_errors
def archive_command(directory: Path, cache: str, wheels: bool, nix: NixOptions) -> None:
    """Every fixed-output download of the bundle's build (the toolchain's Debian
    packages and npm tarball, kernel dependencies' files; --wheels: PyPI's too)
    is fetched where missing and copied into the cache. Their store paths are
    content-addressed: Nix takes them from any cache, unsigned, and checks their
    hashes. Name the cache to later builds with --archive CACHE, or in flake.nix
    (`nixConfig.extra-substituters`).

    \b
    Examples:
      kernelnix archive --to /srv/kernel-archive .
      kernelnix archive --to 'file:///srv/kernel-archive?compression=zstd' --wheels .
      kernelnix build --archive /srv/kernel-archive .
    """
    from kernelnix.publish.archive import archive

    done = archive(directory, archive_url(cache), wheels=wheels, options=nix)
    for download in done.downloads:
        click.echo(f"archived {Path(download.output).name} ({download.url})")
    click.echo(
        f"{len(done.downloads)} downloads in {done.cache}; build with --archive {done.cache}, "
        f'or in flake.nix: nixConfig.extra-substituters = [ "{done.cache}" ];'
    )
