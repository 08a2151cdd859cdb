"""The python-import rule: what a kernel's Python code imports when the kernel loads.

The loader imports the kernel's package (`__init__.py`) and, through it, every
module that package imports at load time, transitively. An absolute import run
then must resolve wherever the kernel is installed: the standard library,
torch, what that Torch and the `kernels` loader require (kernelnix.checks.tables:
derived from the locked wheels' metadata), or a declared python-depends;
anything else is a violation. Imports that run only later are optional code paths, as the
Hub's kernels use them (kernels-community's einops imports numpy, jax,
tensorflow, paddle, ... only for tensors of those frameworks), and get a note:
inside a function, under `if TYPE_CHECKING:`, in a `try` whose handler catches
ImportError, or in a module nothing imports at load time.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace

from kernelnix.checks.report import Violation

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# `try` and (3.11+) `try/except*` statements.
TRY_NODES = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))
PACKAGE_FILE = "__init__.py"

# Why an import does not run when the kernel loads.
IN_FUNCTION = "inside a function, so only when the function runs"
TYPE_CHECKING_ONLY = "under `if TYPE_CHECKING:`, which never runs"
GUARDED = "in a `try` whose handler catches ImportError"
NOT_LOADED = "by a module the kernel does not import when it loads"


@dataclass(frozen=True)
class ImportRules:
    own_names: frozenset[str]
    allowed: frozenset[str]
    # What the kernel loads in (`Torch 2.14.1+cu130 or by the kernels 0.17.2 loader`),
    # and modules other Torch builds bring -> which: both for the messages.
    environment: str = "Torch or by the kernels loader"
    elsewhere: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FoundImport:
    node: ast.Import | ast.ImportFrom
    deferred: str | None  # why it does not run at load time; None when it does


def module_imports(tree: ast.Module) -> list[FoundImport]:
    """Every import statement of a module, with whether it runs when the module loads."""
    return list(_walk(tree.body, None))


def _walk(body: list[ast.stmt], deferred: str | None) -> Iterator[FoundImport]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield FoundImport(node, deferred)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, deferred or IN_FUNCTION)
        elif isinstance(node, TRY_NODES):
            guarded = deferred or (GUARDED if _catches_import_error(node.handlers) else None)
            yield from _walk(node.body, guarded)
            # A handler, `else` and `finally` run at load time like the code around them.
            for handler in node.handlers:
                yield from _walk(handler.body, deferred)
            yield from _walk(node.orelse, deferred)
            yield from _walk(node.finalbody, deferred)
        elif isinstance(node, ast.If):
            only_typing = TYPE_CHECKING_ONLY if _is_type_checking(node.test) else None
            yield from _walk(node.body, deferred or only_typing)
            yield from _walk(node.orelse, deferred)
        else:  # class bodies, `with`, loops, `match`: they run at load time
            for child in _child_bodies(node):
                yield from _walk(child, deferred)


def _child_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        value = getattr(node, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    if isinstance(node, ast.Match):
        for case in node.cases:
            yield case.body


def _catches_import_error(handlers: list[ast.ExceptHandler]) -> bool:
    for handler in handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(dotted_name(t).split(".")[-1] in IMPORT_ERRORS for t in types):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    return dotted_name(test).split(".")[-1] == "TYPE_CHECKING"


def dotted_name(node: ast.AST) -> str:
    """`torch.library.custom_op` for the matching Attribute chain; "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


# ---------------------------------------------------------------------------
# Which modules load with the kernel


def loaded_modules(imports: Mapping[str, list[FoundImport]]) -> set[str]:
    """The files (of `imports`) that run when the loader imports the kernel's package."""
    loaded: set[str] = set()
    pending = [PACKAGE_FILE]
    while pending:
        file = pending.pop()
        if file in loaded or file not in imports:
            continue
        loaded.add(file)
        for found in imports[file]:
            if found.deferred is None and isinstance(found.node, ast.ImportFrom):
                pending.extend(_relative_targets(file, found.node, imports))
    return loaded


def _relative_targets(file: str, node: ast.ImportFrom, files: Collection[str]) -> Iterator[str]:
    """The kernel's files a relative import loads: each package on the way, then the modules."""
    if node.level == 0:
        return
    package = _package_of(file)
    up = node.level - 1
    if up > len(package):
        return  # beyond the kernel's package: Python refuses it, the import check reports it
    base = package[: len(package) - up]
    target = base + (node.module.split(".") if node.module else [])
    modules = [target[:end] for end in range(len(base) + 1, len(target) + 1)]
    # `from . import name` loads the submodule `name` when there is one.
    modules += [[*target, alias.name] for alias in node.names if alias.name != "*"]
    for parts in modules:
        for candidate in ("/".join([*parts, PACKAGE_FILE]), "/".join(parts) + ".py"):
            if candidate in files:
                yield candidate


def _package_of(file: str) -> list[str]:
    """The package a file's relative imports start from: `a/b.py` and `a/__init__.py` -> a."""
    parts = file.removesuffix(".py").split("/")
    return parts[:-1]


# ---------------------------------------------------------------------------
# The rule


def import_violations(
    relative: str, imports: list[FoundImport], rules: ImportRules, loaded: bool
) -> Iterator[Violation]:
    """Violations (load-time imports) and notes (optional ones) for one file."""
    for found in imports:
        node = found.node
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            continue  # relative: always fine
        names = (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
        for module in names:
            top = module.split(".")[0]
            if top in rules.own_names:
                yield _own_import(relative, node, module)
            elif top not in rules.allowed:
                deferred = found.deferred or (None if loaded else NOT_LOADED)
                yield _outside_import(relative, node, module, deferred, rules)


def _own_import(relative: str, node: ast.stmt, module: str) -> Violation:
    return Violation(
        rule="python-import",
        file=relative,
        line=node.lineno,
        subject=module,
        found="absolute import of the kernel itself",
        limit="relative imports within the kernel",
        fix="use a relative import (`from . import x`, `from ._ops import ops`); "
        "the loader registers the kernel under a unique module name",
    )


LOAD_TIME_IMPORT = "imported when the kernel loads"
# How many other places a merged violation lists.
LISTED_PLACES = 5


def merge_load_time_imports(violations: list[Violation]) -> list[Violation]:
    """One violation per top-level module imported at load time from several places
    (a package the build lacks is one problem, not one per file), at its first place."""
    groups: dict[str, list[Violation]] = {}
    for violation in violations:
        if violation.rule == "python-import" and violation.found.startswith(LOAD_TIME_IMPORT):
            groups.setdefault(violation.subject.split(".")[0], []).append(violation)
    several = [group for group in groups.values() if len(group) > 1]
    firsts = {id(group[0]): _merged(group) for group in several}
    dropped = {id(violation) for group in several for violation in group[1:]}
    return [firsts.get(id(v), v) for v in violations if id(v) not in dropped]


def _merged(group: list[Violation]) -> Violation:
    others = [violation.location() for violation in group[1:]]
    more = len(others) - LISTED_PLACES
    return replace(
        group[0],
        subject=group[0].subject.split(".")[0],
        found=f"{group[0].found}; also imported at {', '.join(others[:LISTED_PLACES])}"
        + (f" and {more} more places" if more > 0 else ""),
    )


def _outside_import(
    relative: str, node: ast.stmt, module: str, deferred: str | None, rules: ImportRules
) -> Violation:
    if deferred is None:
        top = module.split(".")[0]
        found = (
            f"{LOAD_TIME_IMPORT}, but it is not in the standard library, not required by "
            f"{rules.environment}, and not among the kernel's python-depends"
        )
        if top in rules.elsewhere:
            found += f"; it comes with {rules.elsewhere[top]}, not with this variant's Torch"
        return Violation(
            rule="python-import",
            file=relative,
            line=node.lineno,
            subject=module,
            found=found,
            limit="the standard library, torch, what Torch and the loader require, python-depends",
            fix="declare it in build.toml (general.python-depends) if the loader supports "
            "it, import it inside the function that needs it or inside try/except "
            "ImportError, or drop it",
        )
    return Violation(
        rule="python-import",
        file=relative,
        line=node.lineno,
        subject=module,
        found=f"optional dependency, imported {deferred}",
        limit="",
        fix="nothing to do if the kernel works without it (users of that code path install "
        "it); declare it in build.toml (general.python-depends) if the kernel needs it",
        severity="note",
    )
