"""`kernelnix build --local`: every variant this machine can build, without Nix.

Variants go to `DIR/build/<variant>/` (the layout the `kernels` loader reads);
each one's CMake project and build tree stay in `DIR/build/.build/<variant>/`
so that a second build only recompiles what changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelnix.build.host import why_not_buildable
from kernelnix.build.variant import build_variant
from kernelnix.config import LoadedConfig, load_config
from kernelnix.diagnostics import Diagnostic, UserError
from kernelnix.plan import PlanOptions, build_plan, current_system

BUILD_DIR = "build"
WORK_DIR = ".build"


@dataclass
class LocalBuild:
    """What `build_local` did: the variant directories built, the ones skipped and why."""

    built: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[Diagnostic] = field(default_factory=list)


def plan_here(directory: Path, unique_id: str | None = None) -> tuple[LoadedConfig, dict[str, Any]]:
    """The config of `directory` and its plan for this machine's system."""
    loaded = load_config(directory)
    try:
        plan = build_plan(loaded, PlanOptions(systems=(current_system(),), unique_id=unique_id))
    except ValueError as exc:
        raise UserError.single(str(exc), key="--unique-id") from None
    return loaded, plan


def build_planned(
    plan: dict[str, Any], directory: Path, variant: str | None = None, jobs: int | None = None
) -> LocalBuild:
    """Build `variant` of `plan`, or every variant of it this machine can build."""
    system = current_system()
    variants = plan["variants"].get(system, {})
    if variant is not None and variant not in variants:
        raise UserError.single(
            f"no variant {variant!r} for {system}",
            key="--variant",
            fix=f"use one of: {', '.join(variants) or '(none)'}",
        )
    result = LocalBuild()
    out_dir = directory / BUILD_DIR
    for name, entry in variants.items():
        if variant not in (None, name):
            continue
        reason = why_not_buildable(entry)
        if reason and variant is not None:
            raise UserError.single(f"cannot build {name} on this machine: {reason}")
        if reason:
            result.skipped[name] = reason
            continue
        work_dir = out_dir / WORK_DIR / name if entry["kind"] != "noarch" else None
        result.built.append(
            build_variant(plan, system, name, directory, out_dir, jobs=jobs, work_dir=work_dir)
        )
    return result


def build_local(
    directory: Path,
    variant: str | None = None,
    *,
    unique_id: str | None = None,
    jobs: int | None = None,
) -> LocalBuild:
    """Build the variants of `directory` this machine can build (or just `variant`)."""
    loaded, plan = plan_here(directory, unique_id)
    result = build_planned(plan, directory, variant, jobs)
    result.warnings = list(loaded.warnings)
    return result
