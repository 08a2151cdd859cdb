"""`kernelnix build --local`: every variant this machine can build, without Nix.

Variants go to `DIR/build/<variant>/` (the layout the `kernels` loader reads);
each one's CMake project and build tree stay in `DIR/build/.build/<variant>/`
so that a second build only recompiles what changed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from kernelnix.compile.variant import build_variant
from kernelnix.core.diagnostics import UserError
from kernelnix.core.progress import Progress
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.plan.model import Plan

BUILD_DIR = "build"
WORK_DIR = ".build"


@dataclass
class LocalBuild:
    """What `build_local` did: the variant directories built, the ones skipped and why."""

    built: list[Path] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _reasons(plan: Plan, system: str, variant: str | None) -> dict[str, str | None]:
    """Every variant of `system` (or just `variant`) -> why it cannot be built here, or None."""
    variants = plan.variants.get(system, {})
    if variant is not None:
        plan.variant(system, variant)  # a UserError naming the valid ones
    reasons = {n: why_not_buildable(e) for n, e in variants.items() if variant in (None, n)}
    if variant is not None and reasons[variant]:
        raise UserError.single(f"cannot build {variant} on this machine: {reasons[variant]}")
    return reasons


def build_planned(
    plan: Plan,
    directory: Path,
    variant: str | None = None,
    jobs: int | None = None,
    *,
    progress: bool = False,
) -> LocalBuild:
    """Build `variant` of `plan`, or every variant of it this machine can build.

    With `progress`, a build of several variants shows kernelnix.core.progress on stderr.
    """
    system = current_system()
    reasons = _reasons(plan, system, variant)
    result = LocalBuild(skipped={name: reason for name, reason in reasons.items() if reason})
    out_dir = directory / BUILD_DIR
    stream = sys.stderr if progress and len(reasons) > 1 else None
    with Progress(list(reasons), stream) as display:
        for name in result.skipped:
            display.skip(name)
        for name in (name for name in reasons if name not in result.skipped):
            noarch = plan.variants[system][name].kind == "noarch"
            work_dir = None if noarch else out_dir / WORK_DIR / name
            with display.building(name, out_dir / WORK_DIR / f"{name}.log"):
                built = build_variant(
                    plan, system, name, directory, out_dir, jobs=jobs, work_dir=work_dir
                )
            result.built.append(built)
    return result
