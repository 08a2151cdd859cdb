"""build-variant: the build step of one variant, as each Nix derivation runs it and
`build --local` runs it once per variant. It reads the plan and imports nothing
that makes one: no build.toml models, no planner, no flake or project generation
(tests/compile/test_imports.py), so that each variant's build starts its compile
and its import check's interpreter sooner."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kernelnix.cli import command, exits_on, reports_user_errors
from kernelnix.compile import BuildError, build_variant
from kernelnix.compile.dependencies import dependency_locations
from kernelnix.compile.variant import (
    Prebuilt,
    compile_object,
    configure_variant,
    parse_cuda_archs,
    with_cuda_archs,
)
from kernelnix.core.diagnostics import UserError
from kernelnix.host.system import current_system
from kernelnix.plan.model import read_plan
from kernelnix.variants.matrix import TOOLCHAINS

JOBS_OPTION = click.option(
    "-j", "--jobs", type=click.IntRange(min=1), help="Parallel compile jobs (default: Ninja's)."
)
CUDA_ARCHS_OPTION = click.option(
    "--cuda-archs",
    metavar="ARCHS",
    help="A development build: CUDA kernels only for these of their archs "
    "(`9.0`, `8.0,9.0a`; `native`: the visible GPUs'). Not publishable.",
)
DEPENDENCY_OPTION = click.option(
    "--dependency",
    "dependencies",
    metavar="NAME=DIR",
    multiple=True,
    help="Where a header dependency is (`cutlass_3_8=/src/cutlass/include`); "
    "the same as KERNELNIX_DEP_<NAME>=DIR.",
)
UNIQUE_ID_OPTION = click.option(
    "--unique-id",
    help="Unique part of the op namespace (default: git tree id, else a hash of the files).",
)


# A failed compile or check: its message on stderr and exit code 1.
reports_build_errors = exits_on(BuildError, "build failed: ")


@command("build-variant")
@click.option(
    "--plan",
    "plan_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The plan file (kernelnix plan).",
)
@click.option("--variant", required=True, metavar="NAME", help="The variant to build.")
@click.option("--system", metavar="SYSTEM", help="The plan's system (default: this machine's).")
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The kernel's directory (with build.toml); not read by --step configure.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the variant directory OUT/NAME/ is written.",
)
@UNIQUE_ID_OPTION
@click.option(
    "--kernel-git",
    metavar="REV",
    help="The kernel's commit for the metadata's provenance: COMMIT (all 40 or 64 hex "
    "digits), COMMIT-dirty, or '' when unknown (default: the one the plan recorded).",
)
@click.option("--toolchain", type=click.Choice(TOOLCHAINS), default="host", show_default=True)
@click.option("--redistributable", is_flag=True, help="Hold the result to the default policy.")
@click.option(
    "--glibc-target",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Compile and link against this assembled glibc target (a sysroot kernelnix made "
    "from the locked ziglang wheel), as publishable Linux variants of the host compilers do.",
)
@click.option(
    "--no-import-check",
    is_flag=True,
    help="Skip the import through `kernels` (a flake's doGetKernelCheck = false).",
)
@click.option(
    "--local-kernels",
    metavar="REPO=DIR[:REPO=DIR...]",
    help="The folders of the variant's kernel dependencies, in the loader's LOCAL_KERNELS "
    "form (the flake passes the ones it fetched); default: download them through "
    "huggingface_hub's cache at the commits the plan locks.",
)
@JOBS_OPTION
@CUDA_ARCHS_OPTION
@DEPENDENCY_OPTION
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the CMake project and build tree here (default: a temporary directory).",
)
@click.option(
    "--step",
    type=click.Choice(["variant", "configure", "object"]),
    default="variant",
    show_default=True,
    help="Object by object (docs/distributed.md): `configure` writes the configured "
    "CMake tree into OUT (from the sources' names only), `object` compiles one source "
    "of it into OUT, `variant` with --configured links the objects and finishes.",
)
@click.option(
    "--configured",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The configure step's output (for --step object, and --step variant with --objects-file).",
)
@click.option(
    "--object", "object_source", metavar="SOURCE", help="The source --step object compiles."
)
@click.option(
    "--objects-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The object steps' outputs, separated by white space, for --step variant.",
)
@reports_user_errors
@reports_build_errors
def build_variant_command(
    plan_path: Path,
    variant: str,
    system: str | None,
    source: Path | None,
    out: Path,
    unique_id: str | None,
    kernel_git: str | None,
    toolchain: str,
    redistributable: bool,
    glibc_target: Path | None,
    no_import_check: bool,
    local_kernels: str | None,
    jobs: int | None,
    cuda_archs: str | None,
    dependencies: tuple[str, ...],
    work_dir: Path | None,
    step: str,
    configured: Path | None,
    object_source: str | None,
    objects_file: Path | None,
) -> None:
    """\b
    Examples:
      kernelnix build-variant --plan kernelnix-plan.json \\
        --variant torch213-cxx11-cpu-x86_64-linux --source . --out "$out"
    """
    os.environ.update(dependency_locations(dependencies))
    plan = read_plan(plan_path)
    if cuda_archs is not None:
        plan = with_cuda_archs(plan, parse_cuda_archs(cuda_archs))
    target_system = system or current_system()
    if step == "configure":
        configure_variant(
            plan,
            target_system,
            variant,
            out,
            unique_id=unique_id,
            redistributable=redistributable,
            jobs=jobs,
            work_dir=work_dir,
            glibc_target=glibc_target,
        )
        return
    if source is None:
        raise UserError.single(f"--step {step} needs --source (the kernel's directory)")
    if step == "object":
        if configured is None or object_source is None:
            raise UserError.single("--step object needs --configured and --object")
        built_object = compile_object(
            plan,
            target_system,
            variant,
            configured,
            object_source,
            source,
            out,
            work_dir=work_dir,
            glibc_target=glibc_target,
        )
        click.echo(f"compiled {built_object}")
        return
    if (configured is None) != (objects_file is None):
        raise UserError.single("--configured and --objects-file go together")
    prebuilt = (
        Prebuilt(configured, [Path(p) for p in objects_file.read_text().split()])
        if configured and objects_file
        else None
    )
    built = build_variant(
        plan,
        target_system,
        variant,
        source,
        out,
        unique_id=unique_id,
        kernel_git=kernel_git,
        toolchain=toolchain,
        redistributable=redistributable,
        jobs=jobs,
        work_dir=work_dir,
        import_check=not no_import_check,
        glibc_target=glibc_target,
        local_kernels=local_kernels,
        prebuilt=prebuilt,
    )
    click.echo(f"built {built}")
