"""CARD.md: the Hub repository card, rendered from the project's template.

The template is the project's `CARD.md` (a Jinja2 template, as `kernelnix init`
writes it), else kernelnix/templates/card/CARD.md.j2. Its context follows the
reference's fill-card: `repo_id`, `version`, `functions` (the string entries
of `__all__` in the kernel's package `__init__.py`, minus "layers"), `layers`
(the classes of `layers/__init__.py` or `layers.py`, when "layers" is in
`__all__`), `has_benchmark`, `upstream`, `source` and `license` (lowercased).
Python files are parsed, never imported. An empty list is passed as None.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from kernelnix.config.load import LoadedConfig
from kernelnix.core.diagnostics import UserError, display_path
from kernelnix.emit.render import TEMPLATES
from kernelnix.plan.build import package_dir

CARD_FILE = "CARD.md"
DEFAULT_TEMPLATE = TEMPLATES / "card" / "CARD.md.j2"
BENCHMARK = Path("benchmarks") / "benchmark.py"
LAYERS = "layers"


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise UserError.single(
            f"cannot parse Python: {exc.msg}",
            file=display_path(path),
            line=exc.lineno,
            fix="fix the syntax error (the card lists names from it without importing it)",
        ) from None


def _all_entries(node: ast.stmt) -> list[ast.expr] | None:
    """The entries of `__all__ = [...]` (or a tuple) when `node` is that assignment."""
    if not isinstance(node, ast.Assign) or not isinstance(node.value, (ast.List, ast.Tuple)):
        return None
    if any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets):
        return node.value.elts
    return None


def exported_names(path: Path) -> list[str]:
    """The string entries of a top-level `__all__ = [...]` in `path`; [] without one."""
    if not path.is_file():
        return []
    for node in _parse(path).body:
        entries = _all_entries(node)
        if entries is not None:
            return [
                entry.value
                for entry in entries
                if isinstance(entry, ast.Constant) and isinstance(entry.value, str)
            ]
    return []


def class_names(path: Path) -> list[str]:
    """The top-level classes defined in `path`."""
    return [node.name for node in _parse(path).body if isinstance(node, ast.ClassDef)]


def layer_classes(package: Path) -> list[str]:
    for candidate in (package / LAYERS / "__init__.py", package / f"{LAYERS}.py"):
        if candidate.is_file():
            return class_names(candidate)
    return []


def card_repo_id(loaded: LoadedConfig, repo_id: str | None = None) -> str:
    """`repo_id`, else build.toml's `general.hub.repo-id`; an error without either."""
    hub = loaded.config.general.hub
    resolved = repo_id or (hub.repo_id if hub else None)
    if not resolved:
        raise UserError.single(
            "Cannot fill card template because `repo-id` is not specified in `[general.hub]`",
            file=display_path(loaded.path),
            key="general.hub.repo-id",
            fix='add `[general.hub]` with `repo-id = "<owner>/<name>"` to build.toml',
        )
    return resolved


def card_context(loaded: LoadedConfig, repo_id: str | None = None) -> dict[str, Any]:
    """The template variables, for the kernel of `loaded` published as `repo_id`."""
    general = loaded.config.general
    root = loaded.path.parent
    package = root / package_dir(loaded.config)
    exported = exported_names(package / "__init__.py")
    layers = layer_classes(package) if LAYERS in exported else []
    return {
        "repo_id": card_repo_id(loaded, repo_id),
        "version": general.version,
        "functions": [name for name in exported if name != LAYERS] or None,
        "layers": layers or None,
        "has_benchmark": (root / BENCHMARK).is_file(),
        "upstream": general.upstream,
        "source": general.source,
        "license": general.license.lower(),
    }


@cache
def _environment() -> SandboxedEnvironment:
    # Sandboxed: the template is the author's file. Undefined names render empty,
    # as in the reference (minijinja, trim_blocks).
    return SandboxedEnvironment(trim_blocks=True, keep_trailing_newline=True, autoescape=False)


def card_template(root: Path) -> Path:
    """The project's CARD.md when it has one, else kernelnix's default template."""
    own = root / CARD_FILE
    return own if own.is_file() else DEFAULT_TEMPLATE


def render_card(loaded: LoadedConfig, repo_id: str | None = None) -> str:
    """The card of the kernel of `loaded`; UserError naming the template when it is broken."""
    context = card_context(loaded, repo_id)
    template_path = card_template(loaded.path.parent)
    where = display_path(template_path)
    try:
        template = _environment().from_string(template_path.read_text(encoding="utf-8"))
        return template.render(context)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError.single(
            f"invalid template: {exc.message}",
            file=where,
            line=exc.lineno,
            fix="fix the Jinja syntax of the card template",
        ) from None
    except jinja2.TemplateError as exc:
        raise UserError.single(
            f"cannot render the card: {exc}",
            file=where,
            fix="use only the card variables: " + ", ".join(sorted(context)),
        ) from None
