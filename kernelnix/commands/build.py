"""Commands that compile: build (with Nix, or --local: the build step once per variant),
create-pyproject and clean-pyproject. The build step itself is build-variant's
(`build_variant.py`)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kernelnix.cli import DIR_ARGUMENT, command, print_warnings, reports_user_errors
from kernelnix.commands.build_variant import (
    CUDA_ARCHS_OPTION,
    DEPENDENCY_OPTION,
    JOBS_OPTION,
    UNIQUE_ID_OPTION,
    reports_build_errors,
)
from kernelnix.commands.nix import nix_options
from kernelnix.compile.dependencies import dependency_locations
from kernelnix.compile.develop import create_pyproject
from kernelnix.compile.local import build_planned
from kernelnix.compile.variant import parse_cuda_archs, with_cuda_archs
from kernelnix.core.diagnostics import UserError, display_path
from kernelnix.host.system import current_system
from kernelnix.plan.build import PlanOptions, plan_directory
from kernelnix.project.nix import NixOptions


@command("build")
@DIR_ARGUMENT
@click.option(
    "--local", is_flag=True, help="Build with this machine's compilers and Torch, no Nix."
)
@click.option("--variant", metavar="NAME", help="Build only this variant.")
@UNIQUE_ID_OPTION
@JOBS_OPTION
@CUDA_ARCHS_OPTION
@DEPENDENCY_OPTION
@click.option(
    "--no-progress",
    is_flag=True,
    help="With --local: no per-variant progress lines; build output goes to the terminal.",
)
@click.option(
    "--host-glibc",
    is_flag=True,
    help="With --local: compile and link Linux variants against this machine's glibc, not "
    "the glibc 2.27 target; for debugging: such variants load only on machines like this "
    "one, and `upload` refuses them.",
)
@nix_options
@reports_user_errors
@reports_build_errors
def build_command(
    directory: Path,
    local: bool,
    variant: str | None,
    unique_id: str | None,
    jobs: int | None,
    cuda_archs: str | None,
    dependencies: tuple[str, ...],
    no_progress: bool,
    host_glibc: bool,
    nix: NixOptions,
) -> None:
    """With --local, every variant this machine can build (its system, its
    Torch, its compilers) is built without Nix; the others are listed with
    the reason. Linux variants are built for publishing: against the glibc 2.27
    target (assembled once per machine from a locked wheel), with a private C++
    runtime, checked under the publishing policy. Several variants show
    one progress line each on stderr; on a terminal, their build output goes
    to DIRECTORY/build/.build/<variant>.log.

    Without --local, `nix build` writes DIRECTORY/result; -L, --max-jobs and
    --cores (-j is --cores) are passed to it.

    \b
    Examples:
      kernelnix build --local examples/relu
      kernelnix build --local examples/relu --variant torch213-cxx11-cpu-x86_64-linux
      kernelnix build --local --cuda-archs 9.0 examples/relu
      kernelnix build examples/relu
      kernelnix build -L --max-jobs 2 --cores 8 examples/relu
    """
    if not local:
        local_only = (
            (cuda_archs, "--cuda-archs", "add --local"),
            (dependencies, "--dependency", "add --local"),
            (host_glibc, "--host-glibc", "add --local, or set hostGlibc = true in flake.nix"),
        )
        for given, option, fix in local_only:
            if given:
                raise UserError.single(f"{option} applies to --local builds", key=option, fix=fix)
        from kernelnix.project.nix import build_with_nix, nix_build_options

        options = nix_build_options(nix, jobs)
        build_with_nix(directory, variant, unique_id, options)
        return
    if nix.given:
        raise UserError.single(
            "-L, --max-jobs and --cores are passed to Nix; a --local build runs no Nix",
            fix="drop them, or use -j/--jobs for the compile jobs of a --local build",
        )
    os.environ.update(dependency_locations(dependencies))
    here = PlanOptions(systems=(current_system(),), unique_id=unique_id)
    loaded, plan = plan_directory(directory, here)
    if cuda_archs is not None:
        plan = with_cuda_archs(plan, parse_cuda_archs(cuda_archs))
    print_warnings(loaded.warnings)  # before the build, not after minutes of it
    result = build_planned(
        plan, directory, variant, jobs, progress=not no_progress, host_glibc=host_glibc
    )
    for name, reason in result.skipped.items():
        click.echo(f"skipped {name}: {reason}")
    for path in result.built:
        click.echo(f"built {path}")
    if not result.built:
        raise UserError.single(
            f"no variant of {directory} can be built on this machine ({current_system()})",
            fix="see the reasons above; install the Torch and toolkit a variant needs",
        )


TARGET_ARGUMENT = click.argument(
    "target", required=False, type=click.Path(file_okay=False, path_type=Path)
)


@command("create-pyproject")
@DIR_ARGUMENT
@TARGET_ARGUMENT
@click.option("-f", "--force", is_flag=True, help="Overwrite files that exist.")
@UNIQUE_ID_OPTION
@click.option("--kernel-sha", metavar="COMMIT", help="The kernel's git commit, for the metadata.")
@click.option(
    "--kernel-dirty", is_flag=True, help="The commit of --kernel-sha had uncommitted changes."
)
@reports_user_errors
def create_pyproject_command(
    directory: Path,
    target: Path | None,
    force: bool,
    unique_id: str | None,
    kernel_sha: str | None,
    kernel_dirty: bool,
) -> None:
    """`pip install --no-build-isolation -e TARGET` then builds the variant of
    this machine with kernelnix's CMake project and writes
    compile_commands.json for IDEs. --unique-id, --kernel-sha and
    --kernel-dirty are recorded in setup.py for that build.

    \b
    Examples:
      kernelnix create-pyproject examples/relu
      pip install --no-build-isolation -e examples/relu
      kernelnix create-pyproject -f . --unique-id dev --kernel-sha "$(git rev-parse HEAD)"
    """
    from kernelnix.compile.develop import kernel_revision

    kernel_git = kernel_revision(kernel_sha, kernel_dirty)
    written = create_pyproject(
        directory, target, force=force, unique_id=unique_id, kernel_git=kernel_git
    )
    for path in written:
        click.echo(f"wrote {path}")


@command("clean-pyproject")
@DIR_ARGUMENT
@TARGET_ARGUMENT
@click.option("-d", "--dry-run", is_flag=True, help="List the files; delete nothing.")
@click.option("-f", "--force", is_flag=True, help="Delete without asking.")
@click.option(
    "--ops-id",
    metavar="ID",
    help="Only the build outputs of this unique id (create-pyproject's --unique-id).",
)
@reports_user_errors
def clean_pyproject_command(
    directory: Path, target: Path | None, dry_run: bool, force: bool, ops_id: str | None
) -> None:
    """Files of those names that kernelnix did not write are kept. Asks before
    deleting unless -f.

    \b
    Examples:
      kernelnix clean-pyproject --dry-run examples/relu
      kernelnix clean-pyproject -f . --ops-id dev
    """
    from kernelnix.compile.develop import pyproject_leftovers

    leftovers = pyproject_leftovers(directory, target, ops_id)
    for path in leftovers.foreign:
        click.echo(f"note: kept {display_path(path)}: not written by kernelnix", err=True)
    if not leftovers.generated:
        click.echo("nothing to clean")
        return
    for path in leftovers.generated:
        click.echo(f"{'would delete' if dry_run else 'to delete:'} {display_path(path)}")
    if dry_run:
        return
    if not force:
        click.confirm(f"Delete these {len(leftovers.generated)} file(s)?", abort=True)
    for path in leftovers.generated:
        path.unlink()
    click.echo(f"deleted {len(leftovers.generated)} file(s)")
