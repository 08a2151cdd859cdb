"""Commands for kernel authors: init, hash, fill-card, upload, build-and-upload."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kernelnix.cli import (
    DIR_ARGUMENT,
    F,
    command,
    exits_on,
    print_warnings,
    reports_user_errors,
)
from kernelnix.commands.nix import nix_options
from kernelnix.config import load_config
from kernelnix.config.types import BACKENDS
from kernelnix.core.diagnostics import display_path
from kernelnix.core.fileio import write_atomic
from kernelnix.project.nix import NixOptions
from kernelnix.publish.hub import HubError, UploadResult
from kernelnix.publish.release import REPO_TYPES

EXIT_HUB_ERROR = 1


class SpreadValues(click.Command):
    """Lets `--backends cpu cuda` stand for `--backends cpu --backends cuda`, as upstream.

    Only known backend names (and `all`) are taken as further values, so a
    PATH after the list stays the PATH.
    """

    spread_option = "--backends"
    spread_values = frozenset([*BACKENDS, "all"])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self.spread(args))

    def spread(self, args: Sequence[str]) -> list[str]:
        result: list[str] = []
        spreading = False
        for arg in args:
            if spreading and arg.lower() in self.spread_values:
                result += [self.spread_option, arg]
                continue
            opens = result[-1:] == [self.spread_option] or arg.startswith(f"{self.spread_option}=")
            result.append(arg)
            spreading = opens
        return result


def default_backends() -> list[str]:
    return ["metal"] if sys.platform == "darwin" else ["cuda"]


@command("init", cls=SpreadValues)
@click.argument("path", required=False)
@click.option("--name", metavar="OWNER/REPO", help="The kernel's Hub repository.")
@click.option(
    "--backends",
    multiple=True,
    metavar="BACKEND...",
    default=default_backends,
    help=f"`all` or some of: {', '.join(BACKENDS)} (default: cuda; metal on macOS).",
)
@click.option("--license", "license_", default="Apache-2.0", show_default=True, metavar="ID")
@click.option("--overwrite", is_flag=True, help="Replace scaffold files that exist.")
@reports_user_errors
def init_command(
    path: str | None, name: str | None, backends: tuple[str, ...], license_: str, overwrite: bool
) -> None:
    """The directory is ./REPO of --name OWNER/REPO, or PATH. Without --name,
    PATH is the name when it reads OWNER/REPO, else the directory (default:
    the current one), whose name is the repository's; the owner is then the
    user logged in to the Hub (`hf auth login`).

    \b
    Examples:
      kernelnix init --name my-org/add-one --backends cpu cuda
      kernelnix init my-org/add-one --backends all
      kernelnix init                 # here, as <hub user>/<this directory's name>
    """
    from kernelnix.emit.scaffold import resolve_backends, resolve_target
    from kernelnix.project.generate import init_project
    from kernelnix.publish.hub import hub_user

    names, directory = resolve_target(path, name, Path.cwd(), hub_user)
    done = init_project(directory, names, resolve_backends(backends), license_, overwrite)
    print_warnings(done.warnings)
    for note in done.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"Initialized {names.repo_id} in {display_path(directory)}")


@command("hash")
@DIR_ARGUMENT
@reports_user_errors
def hash_command(directory: Path) -> None:
    """DIRECTORY is a variant, or holds variants in result/, build/ or itself.
    The `kernels` loader checks the digest of signed variants.

    \b
    Examples:
      kernelnix hash examples/relu
      kernelnix hash build/torch213-cxx11-cpu-x86_64-linux
    """
    from kernelnix.publish.digest import hash_variants

    for variant, digest in hash_variants(directory):
        click.echo(f"hashed {display_path(variant)}: {len(digest.files)} files")


@command("fill-card")
@DIR_ARGUMENT
@click.argument("output", required=False, type=click.Path(dir_okay=False, path_type=Path))
@reports_user_errors
def fill_card_command(directory: Path, output: Path | None) -> None:
    """\b
    Examples:
      kernelnix fill-card examples/relu build/CARD.md
      kernelnix fill-card examples/relu | less
    """
    from kernelnix.emit.card import render_card

    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    text = render_card(loaded)
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(output, text)
    click.echo(f"wrote {display_path(output)}", err=True)


# The Hub unreachable or refusing a request: the message on stderr, exit code 1.
reports_hub_errors = exits_on(HubError, "", EXIT_HUB_ERROR)


def _in_existing_directory(ctx: click.Context, param: click.Parameter, path: Path | None) -> Any:
    """Refuse a file whose directory is missing before anything is built or sent."""
    if path is not None and not path.parent.is_dir():
        raise click.BadParameter(f"no directory {display_path(path.parent)}; create it first")
    return path


def upload_options(func: F) -> F:
    options = [
        click.option("--repo-id", metavar="OWNER/NAME", help="Default: general.hub.repo-id."),
        click.option(
            "--branch", help="Default: general.hub.branch, else v<version> of the variants."
        ),
        click.option("--private", is_flag=True, help="Create the repository as private."),
        click.option(
            "--repo-type",
            type=click.Choice(REPO_TYPES),
            default="kernel",
            show_default=True,
            help="`model` for repositories created before the Hub had kernel repositories.",
        ),
        click.option("--create-pr", is_flag=True, help="Open pull requests instead of pushing."),
        click.option(
            "--dry-run",
            is_flag=True,
            help="Print the checks and the planned commits; never contacts the Hub (works "
            "offline, so stale files to delete are not listed).",
        ),
        click.option(
            "--no-import",
            is_flag=True,
            help="Skip importing each variant through the kernels loader (other checks run).",
        ),
        click.option(
            "--output-json",
            type=click.Path(dir_okay=False, path_type=Path),
            callback=_in_existing_directory,
            help="Also write what was uploaded (repository, branch, variants, commits) "
            "to this JSON file.",
        ),
        click.option("-q", "--quiet", is_flag=True, help="Print only warnings and errors."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _upload(
    directory: Path,
    dry_run: bool,
    no_import: bool,
    output_json: Path | None,
    quiet: bool,
    built: Path | None = None,
    **options: Any,
) -> None:
    from kernelnix.checks import CheckOptions
    from kernelnix.publish.hub import upload
    from kernelnix.publish.release import UploadOptions

    checks = CheckOptions(import_check=not no_import)
    settings = UploadOptions(**options, checks=checks, built=built)
    result = upload(directory, settings, dry_run=dry_run)
    print_warnings(result.release.warnings)
    if output_json is not None:
        write_atomic(output_json, json.dumps(result.summary(), indent=2) + "\n")
    if not quiet:
        _report_upload(result)


def _report_upload(result: UploadResult) -> None:
    release, remote = result.release, result.remote
    new = "" if remote.branch_exists or not remote.read else " (new)"
    click.echo(
        f"{len(release.variants)} variant(s) for {release.repo_id}, branch {release.branch}{new}"
    )
    if release.checked:
        click.echo(
            f"checked under the publishing policy ({release.checked[0].report.settings['policy']}):"
        )
    for checked in release.checked:
        click.echo(f"  {checked.describe()}")
    if not remote.read:
        click.echo(
            "the Hub was not contacted: whether the branch exists, and the stale files a "
            "real upload deletes from it, are not known"
        )
    for commit in result.commits:
        click.echo(f"commit to {commit.branch}: {len(commit.operations)} operation(s)")
        if result.dry_run:
            for operation in commit.operations:
                click.echo(f"  {operation.describe()}")
    done = "dry run: nothing was sent to" if result.dry_run else "uploaded:"
    click.echo(f"{done} {result.url}")


@command("upload")
@DIR_ARGUMENT
@click.option(
    "--variants-from",
    "built",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Publish the variants of this build (a bundle or a directory of variants) instead "
    "of those found under DIRECTORY (result/, else build/).",
)
@upload_options
@reports_user_errors
@reports_hub_errors
def upload_command(directory: Path, **options: Any) -> None:
    """Variants go to build/<variant>/ on the version branch, benchmarks/benchmark*.py
    beside them, the card to README.md on main. A variant that fails the
    post-build checks is refused. Logs in with HF_TOKEN or `hf auth login`.

    \b
    Examples:
      kernelnix upload --dry-run examples/relu
      kernelnix upload --repo-id my-org/relu --branch v2 .
      kernelnix upload -q --output-json upload.json .
    """
    _upload(directory, **options)


@command("build-and-upload")
@DIR_ARGUMENT
@click.option("--variant", metavar="NAME", help="Build and upload only this variant.")
@upload_options
@nix_options
@reports_user_errors
@reports_hub_errors
def build_and_upload_command(
    directory: Path,
    variant: str | None,
    nix: NixOptions,
    **options: Any,
) -> None:
    """The bundle goes to DIRECTORY/result and is copied to DIRECTORY/build; what
    is uploaded is its store path, whatever else result/ or build/ held before.

    With --variant, only that variant is built (into DIRECTORY/result) and uploaded.

    \b
    Examples:
      kernelnix build-and-upload --dry-run examples/relu
      kernelnix build-and-upload -L --cores 8 --repo-id my-org/relu .
      kernelnix build-and-upload --variant torch213-cxx11-cu126-x86_64-linux .
    """
    from kernelnix.project.nix import build_and_copy, build_with_nix

    built = build_with_nix(directory, variant, None, nix)
    if variant is None:
        build_and_copy(directory, nix)
    _upload(directory, built=built, **options)
