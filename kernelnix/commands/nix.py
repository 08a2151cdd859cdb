"""Commands over the kernel's Nix flake: generate, build-and-copy, devshell, testshell.

`kernelnix build` (without --local) and `list-variants --nix` reach Nix through
kernelnix.project.nix as well.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from kernelnix.cli import DIR_ARGUMENT, command, print_warnings, reports_user_errors
from kernelnix.config import load_config
from kernelnix.project.generate import generate
from kernelnix.project.library import library_url
from kernelnix.project.nix import NixOptions, build_and_copy, enter_shell
from kernelnix.variants.matrix import TOOLCHAINS


def archive_url(value: str) -> str:
    """A cache as Nix names a store: a folder becomes file://<its absolute path>."""
    if "://" in value:
        return value
    return f"file://{Path(value).resolve()}"


def nix_options(func: Any) -> Any:
    """The options passed through to nix (-L, --max-jobs, --cores, --archive, --builders), given
    to `func` as one `nix: NixOptions` argument."""

    @functools.wraps(func)
    def with_nix_options(
        *args: Any,
        print_build_logs: bool,
        max_jobs: int | None,
        cores: int | None,
        archives: tuple[str, ...],
        builders: str | None,
        **kwargs: Any,
    ) -> Any:
        options = NixOptions(print_build_logs, max_jobs, cores, archives, builders)
        return func(*args, nix=options, **kwargs)

    options = [
        click.option("-L", "--print-build-logs", is_flag=True, help="Show build logs."),
        click.option("--max-jobs", type=click.IntRange(min=0), help="Builds Nix runs at once."),
        click.option(
            "--cores",
            type=click.IntRange(min=0),
            help="CPU cores each build may use (0: all).",
        ),
        click.option(
            "--archive",
            "archives",
            multiple=True,
            metavar="CACHE",
            type=archive_url,
            help="A binary cache that keeps the build's downloads (kernelnix archive), used "
            "where a registry no longer has a file (repeatable; flake.nix's nixConfig "
            "extra-substituters too).",
        ),
        click.option(
            "--builders",
            metavar="MACHINES",
            help="Nix's remote builders ('ssh-ng://host x86_64-linux - 8 ; ...'), "
            "instead of nix.conf's; with --max-jobs 0 only they build.",
        ),
    ]
    decorated: Any = with_nix_options
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


@command("generate")
@DIR_ARGUMENT
@click.option(
    "--kernelnix-url",
    metavar="URL",
    help="The flake input of kernelnix, e.g. git+file:///path/to/kernelnix "
    "(default: that of the generated flake.nix, else the name `kernelnix`, which "
    "kernelnix's commands resolve to this kernelnix's Nix library).",
)
@click.option(
    "--toolchain",
    type=click.Choice(TOOLCHAINS),
    help="Build in the Nix sandbox from locked registry artifacts (hermetic), or with "
    "this machine's compilers and Python (host: faster, not reproducible elsewhere). "
    "Default: that of the generated flake.nix, else hermetic.",
)
@click.option("--force", is_flag=True, help="Overwrite a flake.nix that was edited.")
@click.option(
    "--no-host-record",
    is_flag=True,
    help="Do not write kernelnix-host.json (this machine's Python, Torch, compilers).",
)
@reports_user_errors
def generate_command(
    directory: Path,
    kernelnix_url: str | None,
    toolchain: str | None,
    force: bool,
    no_host_record: bool,
) -> None:
    """Run it after editing build.toml: the flake refuses a stale plan. A flake.nix
    you edited is kept unless --force is given. Nix sees only files git tracks:
    `git add` the new files.

    \b
    Examples:
      kernelnix generate
      kernelnix generate path/to/kernel --kernelnix-url git+file:///src/kernelnix
    """
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    generated = generate(
        loaded,
        kernelnix_url=kernelnix_url,
        toolchain=toolchain,
        force=force,
        host_record=not no_host_record,
    )
    for written in generated.written:
        click.echo(written.describe())
    for note in generated.notes:
        click.echo(f"note: {note}", err=True)


@command("nix-library")
@reports_user_errors
def nix_library_command() -> None:
    """A wheel carries the library (kernelnix/data/flake); a source checkout is one.
    kernelnix's own commands pass it to Nix as a generated flake's `kernelnix`
    input; for plain `nix build`, register it once.

    \b
    Examples:
      kernelnix nix-library
      nix registry add kernelnix "$(kernelnix nix-library)"
    """
    click.echo(library_url())


@command("build-and-copy")
@DIR_ARGUMENT
@nix_options
@reports_user_errors
def build_and_copy_command(directory: Path, nix: NixOptions) -> None:
    """\b
    Examples:
      kernelnix build-and-copy examples/relu
      kernelnix build-and-copy -L --max-jobs 2 --cores 8 .
    """
    build_and_copy(directory, nix)


def shell_command(name: str, details: str) -> None:
    """Register `kernelnix <name>`: `nix develop` on one of the kernel's shells."""

    @command(name, details)
    @DIR_ARGUMENT
    @click.option("--variant", metavar="NAME", help="The shell of this variant.")
    @nix_options
    @reports_user_errors
    def shell(directory: Path, variant: str | None, nix: NixOptions) -> None:
        enter_shell(directory, name, variant, nix)


shell_command(
    "devshell",
    """Without --variant, the shell of the best variant this machine builds.

    \b
    Examples:
      kernelnix devshell
      kernelnix devshell --variant torch213-cxx11-cu126-x86_64-linux examples/relu
    """,
)
shell_command(
    "testshell",
    """Nix builds the variant first if needed.

    Without --variant, the best variant this machine builds.

    \b
    Examples:
      kernelnix testshell
      kernelnix testshell --variant torch213-cxx11-cpu-x86_64-linux examples/relu
    """,
)
