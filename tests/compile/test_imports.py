"""The layers of docs/architecture.md, held by what Python really imports.

Each module of kernelnix is imported alone (a child forked from a fresh
interpreter that has loaded no kernelnix module) and `sys.modules` is read back:
everything a module pulls in, through any chain of imports and package
`__init__`s, is checked. Imports inside functions, which run later, are
checked where they are written (`direct_imports`).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

PACKAGE = ROOT / "kernelnix"

# The stages, earliest first: a module imports from its own stage and earlier ones.
# `shells` is the cli's completion plumbing; `commands` registers on the cli's group.
STAGES = [
    "kernelnix",  # the package itself: its version
    "data",  # data files, read with importlib.resources
    "templates",
    "core",
    "config",
    "variants",
    "plan",
    "checks",
    "emit",
    "host",
    "gate",
    "compile",
    "project",
    "publish",
    "shells",
    "cli",
    "commands",
    "__main__",
]

# The build step, the CMake project of one variant and host detection read the plan:
# neither build.toml's models nor the matrix, nor what plans them.
PLAN_READERS = [
    "kernelnix.compile",
    "kernelnix.compile.variant",
    "kernelnix.compile.local",
    "kernelnix.compile.dependencies",
    "kernelnix.compile.gpu_archs",
    "kernelnix.compile.hipify",
    "kernelnix.emit.cmake",
    "kernelnix.host.machine",
    "kernelnix.host.record",
]
PLANNING = (
    "kernelnix.config.load",
    "kernelnix.config.model",
    "kernelnix.config.editions",
    "kernelnix.variants.matrix",
    "kernelnix.variants.enumerate",
    "kernelnix.plan.build",
    "kernelnix.plan.variant_metadata",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(module_name(p) for p in PACKAGE.rglob("*.py"))
# Importing `kernelnix.__main__` runs the command line: its imports are read, not run.
IMPORTABLE = [m for m in MODULES if m != "kernelnix.__main__"]


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def rank(module: str) -> int:
    return STAGES.index(stage(module))


# Run in one fresh interpreter: the third-party libraries are imported once, then each
# module is imported in a forked child whose sys.modules holds no kernelnix module yet.
_PROBE = """
import json, os, sys
import click, jinja2, pydantic  # shared by most modules; no kernelnix module among them
for module in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        __import__(module)
        found = [m for m in sys.modules if m.split(".")[0] == "kernelnix" and m != module]
        print(json.dumps([module, found]), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit(f"importing {module} failed")
"""


def loaded_by_each(modules: list[str]) -> dict[str, set[str]]:
    """For each module: the kernelnix modules in sys.modules after importing it alone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *modules],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return {module: set(found) for module, found in map(json.loads, done.stdout.splitlines())}


def loaded_by(module: str) -> set[str]:
    return loaded_by_each([module])[module]


@pytest.fixture(scope="module")
def loaded() -> dict[str, set[str]]:
    return loaded_by_each(IMPORTABLE)


def direct_imports(module: str) -> set[str]:
    """Every kernelnix module `module` names in an import, inside functions too."""
    path = ROOT / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.split(".")[0] == "kernelnix"}


def test_every_module_is_in_a_stage() -> None:
    assert {stage(m) for m in MODULES} <= set(STAGES)


@pytest.mark.parametrize("module", IMPORTABLE)
def test_a_module_loads_nothing_of_a_later_stage(module: str, loaded: dict[str, set[str]]) -> None:
    later = sorted(m for m in loaded[module] if rank(m) > rank(module))
    assert not later, f"importing {module} loads {later}, of later stages"


@pytest.mark.parametrize("module", MODULES)
def test_no_import_names_a_later_stage(module: str) -> None:
    later = sorted(m for m in direct_imports(module) if rank(m) > rank(module))
    assert not later, f"{module} imports {later}, of later stages"


@pytest.mark.parametrize("module", PLAN_READERS)
def test_plan_readers_load_neither_the_matrix_nor_the_config_models(
    module: str, loaded: dict[str, set[str]]
) -> None:
    planning = sorted(m for m in loaded[module] if m.startswith(PLANNING))
    assert not planning, f"importing {module} loads {planning}: read the plan instead"


def test_the_build_step_command_loads_no_planner_nor_project_generation(
    loaded: dict[str, set[str]],
) -> None:
    """build-variant, which every Nix derivation runs, starts from the plan: the matrix
    (for --toolchain's names) is all it loads of planning."""
    makers = (
        *(m for m in PLANNING if m != "kernelnix.variants.matrix"),
        "kernelnix.project",
        "kernelnix.emit.flake",
        "kernelnix.emit.scaffold",
        "kernelnix.gate",
        "kernelnix.publish",
        "kernelnix.commands.nix",
    )
    found = sorted(m for m in loaded["kernelnix.commands.build_variant"] if m.startswith(makers))
    assert not found, f"build-variant loads {found}"


def test_host_detection_loads_no_check_but_the_policies(loaded: dict[str, set[str]]) -> None:
    checks = {m for m in loaded["kernelnix.host.machine"] if stage(m) == "checks"}
    assert checks == {"kernelnix.checks", "kernelnix.checks.policy"}


def test_the_rules_see_an_indirect_import() -> None:
    """What a module reaches only through another one is caught: the check reads
    what Python loaded, not what the module names."""
    module = "kernelnix.plan.build"
    assert "kernelnix.config.editions.v3" not in direct_imports(module)
    assert "kernelnix.config.editions.v3" in loaded_by(module)


def test_core_imports_the_standard_library_only() -> None:
    """Plumbing every stage uses stays free of click, pydantic and Jinja2."""
    for path in sorted((PACKAGE / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "kernelnix", (
                    f"{path.name} imports {name}"
                )
