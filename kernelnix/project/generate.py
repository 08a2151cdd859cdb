"""Writing a kernel project's files: a new project's scaffold with its flake
files (`kernelnix init`, `init_project`), and the files a project's flake reads,
written before Nix runs (`kernelnix generate`, `generate`):

- `flake.nix` (kernelnix.emit.flake), kept when its author edited it.
- `kernelnix-plan.json`: the build plan, written for Nix. Its unique id is a
  placeholder: the flake passes the commit (`self.shortRev`) to every build.
  nix/lib/plan.nix refuses a plan whose `build-toml-sha256` no longer matches.
- `kernelnix-host.json` (host toolchain only): this machine's Python, Torch and
  compilers (kernelnix.host.record).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelnix.config import load_config
from kernelnix.config.load import LoadedConfig
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.core.fileio import write_atomic
from kernelnix.core.process import run_shown
from kernelnix.emit.flake import FLAKE_FILE, FlakeSettings, pristine_settings, render_flake
from kernelnix.emit.scaffold import DEFAULT_LICENSE, KernelNames, scaffold_files
from kernelnix.host.record import HOST_FILE, HostRecord, host_json, probe_host
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import PLAN_FILE, Plan

# The plan's unique id for Nix; every variant build replaces it with the revision.
NIX_UNIQUE_ID = "flake_rev"


@dataclass(frozen=True)
class Written:
    """What generate did with one file: wrote, unchanged or kept (edited by the author)."""

    path: Path
    action: str

    def describe(self) -> str:
        if self.action == "kept":
            return (
                f"kept {self.path}: edited since kernelnix generated it "
                "(pass --force to overwrite it)"
            )
        return f"{self.action} {self.path}"


def nix_plan(loaded: LoadedConfig) -> Plan:
    """The plan the flake reads: deterministic, no git state, placeholder unique id."""
    return build_plan(loaded, PlanOptions(unique_id=NIX_UNIQUE_ID))


def _write_if_changed(path: Path, text: str) -> Written:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return Written(path, "unchanged")
    write_atomic(path, text)
    return Written(path, "wrote")


def _flake(
    directory: Path, url: str | None, toolchain: str | None, force: bool
) -> tuple[Written, FlakeSettings]:
    path = directory / FLAKE_FILE
    existing = path.read_text(encoding="utf-8") if path.exists() else None
    previous = pristine_settings(existing) if existing is not None else None
    base = previous or FlakeSettings()
    settings = FlakeSettings(url or base.kernelnix_url, toolchain or base.toolchain)
    if existing is not None and previous is None and not force:
        return Written(path, "kept"), settings
    return _write_if_changed(path, render_flake(settings)), settings


@dataclass(frozen=True)
class Generated:
    written: list[Written]
    notes: list[str]
    plan: Plan


def _host_notes(record: HostRecord) -> list[str]:
    if record.variants:
        return []
    reasons = sorted(set(record.not_buildable.values()))
    return [
        "the host toolchain can build no variant on this machine"
        + (f" ({'; '.join(reasons)})" if reasons else "")
    ]


def generate(
    loaded: LoadedConfig,
    *,
    kernelnix_url: str | None = None,
    toolchain: str | None = None,
    force: bool = False,
    host_record: bool = True,
) -> Generated:
    """Write flake.nix, the plan and (host toolchain) the host record next to build.toml.

    Unset settings keep those of an unedited generated flake.nix, else the defaults.
    """
    plan = nix_plan(loaded)
    root = loaded.path.parent
    flake, settings = _flake(root, kernelnix_url, toolchain, force)
    written = [flake, _write_if_changed(root / PLAN_FILE, plan.to_json())]
    notes: list[str] = []
    if host_record and settings.toolchain == "host":
        record = probe_host(plan)
        written.append(_write_if_changed(root / HOST_FILE, host_json(record)))
        notes += _host_notes(record)
    return Generated(written, notes, plan)


def _refuse_existing(directory: Path, targets: list[str]) -> None:
    existing = sorted(t for t in targets if (directory / t).exists())
    if existing:
        raise UserError(
            [
                Diagnostic(
                    "already exists; nothing was written",
                    file=display_path(directory / target),
                    fix="pass --overwrite to replace the scaffold's files (others are kept)",
                )
                for target in existing
            ]
        )


def _git_init(directory: Path) -> Diagnostic | None:
    """`git init` and `git add -A`; a warning (not an error) when git is missing or fails."""
    git = shutil.which("git")
    if git is None:
        return Diagnostic(
            "git is not installed: the project is not a git repository yet",
            file=display_path(directory),
            fix="run `git init && git add -A` there (Nix flakes only see tracked files)",
            severity="warning",
        )
    for args in (["init", "--quiet"], ["add", "-A"]):
        done = run_shown([git, "-C", str(directory), *args], capture_output=True)
        if done.returncode != 0:
            return Diagnostic(
                f"git {' '.join(args)} failed: {done.stderr.strip()}",
                file=display_path(directory),
                fix="run `git init && git add -A` there yourself",
                severity="warning",
            )
    return None


@dataclass
class Scaffolded:
    directory: Path
    names: KernelNames
    written: list[str]  # relative paths
    notes: list[str]
    warnings: list[Diagnostic]


def init_project(
    directory: Path,
    names: KernelNames,
    backends: list[str],
    license: str = DEFAULT_LICENSE,
    overwrite: bool = False,
) -> Scaffolded:
    """Write the scaffold into `directory`, generate its flake files, stage it in git."""
    files = scaffold_files(names, backends, license)
    if not overwrite:
        _refuse_existing(directory, [*files, FLAKE_FILE])
    for relative, text in files.items():
        write_atomic(directory / relative, text)
    generated = generate(load_config(directory), force=overwrite)
    git_warning = _git_init(directory)
    return Scaffolded(
        directory=directory,
        names=names,
        written=[*files, *(w.path.name for w in generated.written)],
        notes=generated.notes,
        warnings=[git_warning] if git_warning else [],
    )
