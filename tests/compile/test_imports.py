"""The build step and the CMake project read the plan, never the matrix or the
build.toml models (docs/architecture.md: one direction)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from paths import ROOT

PACKAGE = ROOT / "kernelnix"
# develop.py also holds create-pyproject, which writes pyproject.toml from build.toml.
# project.py writes a project's files (init, generate): it plans build.toml.
PLAN_READERS = sorted(
    [PACKAGE / "emit" / "cmake.py", PACKAGE / "host" / "machine.py"]
    + [p for p in (PACKAGE / "compile").glob("*.py") if p.name not in ("develop.py", "project.py")]
)
# Loading build.toml (to plan it, or to regenerate the flake) is not reading its models.
ALLOWED = {("kernelnix.config", "load_config")}


def imported_names(path: Path) -> set[tuple[str, str]]:
    """(module, name) of every `from module import name` and `import module` in `path`."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names}
    return found


@pytest.mark.parametrize("path", PLAN_READERS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_plan_readers_import_neither_the_matrix_nor_the_config_models(path: Path) -> None:
    forbidden = {
        (module, name)
        for module, name in imported_names(path) - ALLOWED
        if module.startswith(("kernelnix.config", "kernelnix.variants"))
    }
    assert not forbidden, f"{path.name} imports {sorted(forbidden)}: read the plan instead"


def test_the_rule_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "from kernelnix.variants.matrix import load_matrix\nimport kernelnix.config\n"
    )
    assert imported_names(module) == {
        ("kernelnix.variants.matrix", "load_matrix"),
        ("kernelnix.config", ""),
    }
