"""Commands over variants and the build plan: list-variants, plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from kernelnix.cli import DIR_ARGUMENT, command, print_warnings, reports_user_errors
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.core.fileio import write_atomic
from kernelnix.host.system import current_system
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import PLAN_FILE, PlanVariant
from kernelnix.variants.matrix import load_matrix, read_build_sets
from kernelnix.variants.names import parse_variant_name


@command("list-variants")
@DIR_ARGUMENT
@click.option(
    "--system",
    "system",
    metavar="SYSTEM",
    help="List the variants of this system (default: this machine's).",
)
@click.option("--all-systems", is_flag=True, help="List the variants of every system.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: system -> variant details.")
@click.option(
    "--nix",
    is_flag=True,
    help="List what the kernel's flake builds here instead (nix eval .#variants).",
)
@click.option("--arch", is_flag=True, help="Only the compiled variants (no noarch ones).")
@reports_user_errors
def list_variants(
    directory: Path, system: str | None, all_systems: bool, as_json: bool, nix: bool, arch: bool
) -> None:
    """Names follow the Hub grammar, e.g. torch213-cxx11-cu126-x86_64-linux.

    \b
    Examples:
      kernelnix list-variants examples/relu
      kernelnix list-variants examples/relu --all-systems --json
      kernelnix list-variants examples/relu --nix
      kernelnix list-variants examples/relu-noarch --arch
    """
    if system and all_systems:
        raise UserError.single(
            "--system and --all-systems are mutually exclusive", fix="pass one of them"
        )
    systems = _systems_option(system, all_systems)
    if nix:
        from kernelnix.project.nix import flake_variants

        found = _only_arch(flake_variants(directory, systems), arch)
        if as_json:
            click.echo(json.dumps(found, indent=2))
        else:
            _echo_names(found)
        return
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    plan = build_plan(loaded, PlanOptions(systems=systems))
    for line in plan.notes + [c for s in plan.systems.values() for c in s.collisions]:
        click.echo(f"note: {line}", err=True)
    if as_json:
        click.echo(
            json.dumps(
                {
                    s: {
                        name: _variant_summary(v)
                        for name, v in plan.variants[s].items()
                        if not arch or v.kind != "noarch"
                    }
                    for s in plan.variants
                },
                indent=2,
            )
        )
        return
    _echo_names(_only_arch({s: system.variants for s, system in plan.systems.items()}, arch))


def _only_arch(names: dict[str, list[str]], arch: bool) -> dict[str, list[str]]:
    """With `arch`, the names of compiled variants only (kernel-builder's archVariants)."""
    if not arch:
        return names
    return {
        s: [n for n in listed if parse_variant_name(n).kind != "noarch"]
        for s, listed in names.items()
    }


def _echo_names(names: dict[str, list[str]]) -> None:
    for name in (n for system_names in names.values() for n in system_names):
        click.echo(name)


def _variant_summary(variant: PlanVariant) -> dict[str, Any]:
    fields = {
        "kind",
        "backend",
        "backend_version",
        "torch",
        "stable_abi",
        "tvm_ffi",
        "bundle",
    }
    summary = variant.model_dump(mode="json", by_alias=True, include=fields)
    return {**summary, "ops-id": variant.ops_id, "archs": variant.archs}


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


@command("plan")
@DIR_ARGUMENT
@click.option("--unique-id", help="Unique part of the op namespace (default: git tree id).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Where to write the plan (default: DIRECTORY/{PLAN_FILE}).",
)
@click.option(
    "--matrix",
    "matrix_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='Build sets replacing the matrix\'s: JSON {"build-sets": [...]} in the form of '
    "kernelnix/data/matrix.json (what a kernel flake's torchVersions gives).",
)
@reports_user_errors
def plan_command(
    directory: Path, unique_id: str | None, output: Path | None, matrix_file: Path | None
) -> None:
    """\b
    Examples:
      kernelnix plan examples/relu
      kernelnix plan examples/relu -o /tmp/relu-plan.json --unique-id dev
    """
    matrix = load_matrix(read_build_sets(matrix_file)) if matrix_file else None
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    try:
        plan = build_plan(loaded, PlanOptions(unique_id=unique_id), matrix)
    except ValueError as exc:
        raise UserError.single(str(exc), key="--unique-id") from None
    target = output or loaded.path.parent / PLAN_FILE
    write_atomic(target, plan.to_json())
    click.echo(
        f"wrote {target}: {sum(len(s.variants) for s in plan.systems.values())} "
        f"variants over {len(plan.systems)} systems"
    )


@command("host-record")
@click.argument("plan_path", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the record here (default: stdout).",
)
@reports_user_errors
def host_record_command(plan_path: Path, output: Path | None) -> None:
    """The host toolchain builds what the record says this Python, Torch and these
    compilers can build. `kernelnix generate` writes it next to flake.nix; a flake
    without one runs this command during evaluation.

    \b
    Examples:
      kernelnix host-record kernelnix-plan.json
      kernelnix host-record kernelnix-plan.json -o kernelnix-host.json
    """
    from kernelnix.host.record import host_json, probe_host
    from kernelnix.plan.model import read_plan

    text = host_json(probe_host(read_plan(plan_path)))
    if output is None:
        click.echo(text, nl=False)
    else:
        write_atomic(output, text)
