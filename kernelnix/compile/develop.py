"""Local development: `kernelnix create-pyproject` and the build its setup.py runs.

create-pyproject writes `pyproject.toml` and `setup.py` into the kernel's
directory (never over existing files without `--force`). `pip install
--no-build-isolation -e .` then calls `build_for_development`: the variant of
this machine is built like `kernelnix build --local` does, and its CMake
compile database is linked as `build/compile_commands.json` (where clangd
looks for it).
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from kernelnix.compile.local import BUILD_DIR, WORK_DIR, build_planned, plan_here
from kernelnix.config import BuildConfig, load_config
from kernelnix.core.diagnostics import UserError, display_path
from kernelnix.core.fileio import write_atomic
from kernelnix.emit.render import render
from kernelnix.host.machine import host_torch, why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.plan.build import package_dir, pyext, source_files
from kernelnix.plan.metadata import python_dependency_table, python_depends_for

COMPILE_COMMANDS = "compile_commands.json"


def _pip_packages(names: list[str], table: dict[str, Any]) -> list[str]:
    return [p["pkg"] for name in names for p in table.get(name, {}).get("python", [])]


def _packages(directory: Path, config: BuildConfig) -> list[str]:
    """The package and its sub-packages (directories with an `__init__.py`)."""
    root = PurePosixPath(package_dir(config))
    found = [
        PurePosixPath(f).parent
        for f in source_files(directory, config)
        if PurePosixPath(f).name == "__init__.py" and PurePosixPath(f).is_relative_to(root)
    ]
    name = config.general.python_name
    return sorted({".".join((name, *p.relative_to(root).parts)) for p in found} | {name})


def pyproject_context(directory: Path, config: BuildConfig) -> dict[str, Any]:
    table = python_dependency_table()
    general = list(config.general.python_depends)
    optional = {
        backend: _pip_packages(
            python_depends_for(config, backend)[len(general) :],
            table["backends"].get(backend, {}),
        )
        for backend in config.backends
    }
    return {
        "name": config.general.name,
        "python_name": config.general.python_name,
        "version": str(config.general.version),
        "license": config.general.license,
        "dependencies": ["torch", *_pip_packages(general, table["general"])],
        "optional_dependencies": {b: p for b, p in optional.items() if p},
        "packages": _packages(directory, config),
        "package_dir": package_dir(config),
        "package_data": [f"*.{e}" for e in pyext(config) if e != "py"],
    }


def create_pyproject(directory: Path, *, force: bool = False) -> list[Path]:
    """Write pyproject.toml and setup.py into `directory`; returns their paths."""
    loaded = load_config(directory)
    context = pyproject_context(directory, loaded.config)
    files = {
        directory / "pyproject.toml": render("pyproject/pyproject.toml.j2", context),
        directory / "setup.py": render("pyproject/setup.py.j2", context),
    }
    existing = [display_path(p) for p in files if p.exists()]
    if existing and not force:
        raise UserError.single(
            f"file(s) already exist: {', '.join(existing)}", fix="pass --force to overwrite them"
        )
    for path, text in files.items():
        write_atomic(path, text)
    return list(files)


def _host_backend() -> str:
    torch = host_torch()
    if torch is not None and torch.cuda:
        return "cuda"
    if torch is not None and torch.hip:
        return "rocm"
    if torch is not None and torch.xpu:
        return "xpu"
    return "metal" if current_system().endswith("darwin") else "cpu"


def development_variant(plan: dict[str, Any]) -> str:
    """The variant to develop with: this machine's backend, compiled before noarch."""
    variants = plan["variants"].get(current_system(), {})
    backend = _host_backend()
    buildable = [n for n, v in variants.items() if why_not_buildable(v) is None]
    if not buildable:
        raise UserError.single(
            f"no variant can be built on this machine ({current_system()})",
            fix="run `kernelnix build --local` to see why",
        )

    def rank(name: str) -> tuple[bool, bool]:
        return (variants[name]["backend"] != backend, variants[name]["kind"] == "noarch")

    return min(buildable, key=rank)


def build_for_development(root: Path, jobs: int | None = None) -> Path:
    """Build the development variant of the kernel in `root`; returns its directory."""
    _, plan = plan_here(root)
    name = development_variant(plan)
    built = build_planned(plan, root, name, jobs).built[0]
    database = root / BUILD_DIR / WORK_DIR / name / "build" / COMPILE_COMMANDS
    if database.is_file():
        shutil.copyfile(database, root / BUILD_DIR / COMPILE_COMMANDS)
    return built
