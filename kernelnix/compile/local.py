"""`kernelnix build --local`: every variant this machine can build, without Nix.

Variants go to `DIR/build/<variant>/` (the layout the `kernels` loader reads);
each one's CMake project and build tree stay in `DIR/build/.build/<variant>/`
so that a second build only recompiles what changed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kernelnix.checks.import_check import alternatives_variables
from kernelnix.compile.variant import BuildError, build_variant
from kernelnix.core.diagnostics import UserError
from kernelnix.core.fileio import write_atomic
from kernelnix.core.process import run_shown
from kernelnix.core.progress import Progress
from kernelnix.host.environments import (
    LockedEnvironment,
    environment_variables,
    locked_environment,
    locked_glibc_target,
    locked_python_depends,
    materialize,
    materialize_glibc_target,
)
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.plan.model import PLAN_FILE, Plan, PlanVariant

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
    reasons = {n: _why_not(e) for n, e in variants.items() if variant in (None, n)}
    if variant is not None and reasons[variant]:
        raise UserError.single(f"cannot build {variant} on this machine: {reasons[variant]}")
    return reasons


def _why_not(variant: PlanVariant) -> str | None:
    """Why this machine cannot build `variant`: its toolkit, or its kernel dependencies."""
    deps = variant.kernel_deps
    return why_not_buildable(variant) or (deps.error if deps else None)


def build_planned(
    plan: Plan,
    directory: Path,
    variant: str | None = None,
    jobs: int | None = None,
    *,
    progress: bool = False,
    host_glibc: bool = False,
) -> LocalBuild:
    """Build `variant` of `plan`, or every variant of it this machine can build.

    Linux variants are built for publishing, against the locked glibc target
    (assembled once per machine, kernelnix.host.glibc_target); `host_glibc`
    builds them against this machine's glibc instead, for this machine only.
    With `progress`, a build of several variants shows kernelnix.core.progress on stderr.
    """
    system = current_system()
    reasons = _reasons(plan, system, variant)
    glibc = _GlibcTarget(system, not host_glibc and system.endswith("-linux"))
    result = LocalBuild(skipped={name: reason for name, reason in reasons.items() if reason})
    out_dir = directory / BUILD_DIR
    plan_file = _PlanFile(plan, out_dir / WORK_DIR / PLAN_FILE)
    stream = sys.stderr if progress and len(reasons) > 1 else None
    with Progress(list(reasons), stream) as display:
        for name in result.skipped:
            display.skip(name)
        for name in (name for name in reasons if name not in result.skipped):
            noarch = plan.variants[system][name].kind == "noarch"
            work_dir = None if noarch else out_dir / WORK_DIR / name
            with display.building(name, out_dir / WORK_DIR / f"{name}.log"):
                environments = _environments(plan.variants[system][name])
                target = None if noarch else glibc.assembled()
                if not environments.on_path:
                    built = build_variant(
                        plan,
                        system,
                        name,
                        directory,
                        out_dir,
                        jobs=jobs,
                        work_dir=work_dir,
                        redistributable=glibc.wanted,
                        glibc_target=target,
                    )
                else:
                    built = _build_in_environment(
                        plan_file.written(),
                        system,
                        name,
                        directory,
                        out_dir,
                        jobs,
                        environments,
                        glibc.wanted,
                        target,
                    )
            result.built.append(built)
    return result


@dataclass
class _GlibcTarget:
    """The glibc target of a `build --local`, when `wanted`: assembled (or found in
    the cache) when the first compiled variant needs it."""

    system: str
    wanted: bool
    path: Path | None = None

    def assembled(self) -> Path | None:
        if self.wanted and self.path is None:
            locked = locked_glibc_target(self.system)
            self.path = materialize_glibc_target(locked, log=lambda line: print(line, flush=True))
        return self.path


@dataclass
class _PlanFile:
    """The plan as the build steps run in wheel environments read it: written once
    per `build --local`, when the first of them needs it."""

    plan: Plan
    path: Path
    done: bool = False

    def written(self) -> Path:
        if not self.done:
            write_atomic(self.path, self.plan.to_json())
            self.done = True
        return self.path


@dataclass(frozen=True)
class _Environments:
    """The locked environments a variant builds and imports in, in PYTHONPATH's
    order: its Torch's (a compiled variant of a locked build set) and its
    python-depends' (any variant); and the python-depends' other releases that
    the import check tries where the variant fails to load with the first."""

    on_path: list[LockedEnvironment]
    alternatives: list[LockedEnvironment]


def _environments(variant: PlanVariant) -> _Environments:
    torch = locked_environment(variant)
    depends = locked_python_depends(variant.metadata.python_depends, variant.system)
    on_path = [found for found in (torch, *depends[:1]) if found is not None]
    return _Environments(on_path, depends[1:])


def _build_in_environment(
    plan_file: Path,
    system: str,
    name: str,
    directory: Path,
    out_dir: Path,
    jobs: int | None,
    environments: _Environments,
    redistributable: bool,
    glibc_target: Path | None,
) -> Path:
    """The build step of one variant in a process whose Torch (and nvcc) are the
    variant's locked wheels (kernelnix.host.environments), not this Python's, and
    whose python-depends are theirs."""
    log = lambda line: print(line, flush=True)  # noqa: E731
    roots = [materialize(environment, log=log) for environment in environments.on_path]
    others = [materialize(environment, log=log) for environment in environments.alternatives]
    work = out_dir / WORK_DIR
    command = [
        sys.executable,
        "-m",
        "kernelnix",
        "build-variant",
        *("--plan", str(plan_file), "--variant", name, "--system", system),
        *("--source", str(directory), "--out", str(out_dir), "--work-dir", str(work / name)),
        *(["--jobs", str(jobs)] if jobs else []),
        *(["--redistributable"] if redistributable else []),
        *(["--glibc-target", str(glibc_target)] if glibc_target else []),
    ]
    for environment, root in zip(environments.on_path, roots, strict=True):
        print(f"+ {environment.describe()} from {root}", flush=True)
    for environment, root in zip(environments.alternatives, others, strict=True):
        print(f"+ if it fails to load: {environment.describe()} from {root}", flush=True)
    variables = environment_variables(roots, dict(os.environ))
    variables.update(alternatives_variables(roots[-1], others))
    done = run_shown(command, env=variables)
    if done.returncode != 0:
        raise BuildError(f"{name}: the build step failed (exit {done.returncode}, see above)")
    return out_dir / name
