"""Rules over the kernel's Python files (read with `ast`, never imported).

- imports (kernelnix/checks/python_imports.py): relative within the kernel;
  otherwise, for what runs when the kernel loads, only the standard library,
  torch, what that Torch and the `kernels` loader require, and the declared
  python-depends. Optional imports (inside functions, guarded by
  `try/except ImportError`, under `if TYPE_CHECKING:`, in modules the kernel
  does not load) get a note.
- op registrations: `torch.library` registrations take their op name from
  `add_op_namespace_prefix(...)`, never a literal `"ns::op"`: the namespace
  is unique per build, so a hard-coded one registers into the wrong place.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator

from kernelnix.checks.context import VariantContext
from kernelnix.checks.python_imports import (
    ImportRules,
    dotted_name,
    import_violations,
    loaded_modules,
    merge_load_time_imports,
    module_imports,
)
from kernelnix.checks.report import Violation
from kernelnix.checks.tables import load_time_modules, python_depends_imports

# Module-level torch.library functions whose first argument is an op name.
OP_NAME_FUNCTIONS = frozenset(
    {
        "custom_op",
        "triton_op",
        "register_fake",
        "register_kernel",
        "register_autograd",
        "register_vmap",
        "register_torch_dispatch",
        "register_autocast",
        "impl",
        "define",
        "impl_abstract",
    }
)
# Bare names that are unambiguous even when we cannot see where they came from.
UNAMBIGUOUS_FUNCTIONS = OP_NAME_FUNCTIONS - {"impl", "define"}
LIBRARY_CONSTRUCTORS = frozenset({"Library", "_scoped_library"})
OP_NAME_KEYWORDS = ("qualname", "name", "op", "op_name")
PREFIX_FUNCTION = "add_op_namespace_prefix"


def python_sources(ctx: VariantContext) -> Iterable[Violation]:
    trees: dict[str, ast.Module] = {}
    for relative in ctx.listing.files:
        if relative.endswith(".py"):
            tree = _parse(ctx, relative)
            if isinstance(tree, Violation):
                yield tree
            else:
                trees[relative] = tree
    imports = {relative: module_imports(tree) for relative, tree in trees.items()}
    loaded = loaded_modules(imports)
    guaranteed = load_time_modules(ctx.name, ctx.backend)
    rules = ImportRules(
        own_names=_own_names(ctx),
        allowed=_allowed_modules(ctx, guaranteed.modules),
        environment=guaranteed.environment,
        elsewhere=guaranteed.elsewhere,
    )
    found: list[Violation] = []
    for relative, tree in trees.items():
        found += import_violations(relative, imports[relative], rules, relative in loaded)
        found += op_name_violations(tree, relative)
    yield from merge_load_time_imports(found)


def _own_names(ctx: VariantContext) -> frozenset[str]:
    names = {ctx.kernel_name.replace("-", "_")} if ctx.kernel_name else set()
    if ctx.kernel_id:
        names.add(ctx.kernel_id)
    return frozenset(names)


def _allowed_modules(ctx: VariantContext, guaranteed: frozenset[str]) -> frozenset[str]:
    depends = python_depends_imports(ctx.python_depends, ctx.backend)
    # A kernel with kernel-depends reaches them through the loader's get_kernel_dep:
    # whatever loads it is that loader (metadata's kernels-minver says which release).
    loader = {"kernels"} if (ctx.metadata or {}).get("kernel-depends") else set()
    # The loader loads a tvm-ffi variant only where tvm_ffi imports, of its version.
    framework = {"tvm_ffi"} if ctx.name is not None and ctx.name.kind == "tvm-ffi" else set()
    return frozenset(
        {
            *sys.stdlib_module_names,
            *guaranteed,
            *depends,
            *ctx.options.python_depends,
            *loader,
            *framework,
        }
    )


def _parse(ctx: VariantContext, relative: str) -> ast.Module | Violation:
    source = (ctx.variant_dir / relative).read_bytes()
    try:
        return ast.parse(source, relative)
    except (SyntaxError, ValueError) as exc:
        return Violation(
            rule="python-syntax",
            file=relative,
            subject=relative,
            found=f"does not parse: {exc}",
            limit="valid Python",
            fix="fix the syntax error",
            line=getattr(exc, "lineno", None),
        )


# ---------------------------------------------------------------------------
# Op registrations


def op_name_violations(tree: ast.Module, relative: str) -> Iterator[Violation]:
    from_library = _names_imported_from_torch_library(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        kind, name = _registration_kind(node.func, from_library)
        if kind is None:
            continue
        argument = _op_name_argument(node)
        if argument is None:
            continue
        problem = _op_name_problem(argument, kind)
        if problem is not None:
            found, fix = problem
            yield Violation(
                rule="op-namespace",
                file=relative,
                line=node.lineno,
                subject=f"{name}({ast.unparse(argument)})",
                found=found,
                limit=f"op names built with {PREFIX_FUNCTION}(...) from ._ops",
                fix=fix,
            )


def _names_imported_from_torch_library(tree: ast.Module) -> dict[str, str]:
    """Local name -> original name, for `from torch.library import X as Y`."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.library":
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
    return names


def _registration_kind(func: ast.expr, from_library: dict[str, str]) -> tuple[str | None, str]:
    """("api" | "library" | "method" | None, display name) for a call target.

    - api: module-level torch.library function; the op name must come from
      add_op_namespace_prefix.
    - library: Library(...) constructor; its namespace must not be a literal.
    - method: a method of some object (a Library, a custom op); only a literal
      qualified "ns::op" is wrong there.
    """
    if isinstance(func, ast.Name):
        original = from_library.get(func.id, func.id)
        if original in LIBRARY_CONSTRUCTORS:
            return "library", func.id
        if original in UNAMBIGUOUS_FUNCTIONS or (
            func.id in from_library and original in OP_NAME_FUNCTIONS
        ):
            return "api", func.id
        return None, func.id
    if isinstance(func, ast.Attribute):
        receiver = dotted_name(func.value)
        display = f"{receiver}.{func.attr}" if receiver else func.attr
        if func.attr in LIBRARY_CONSTRUCTORS:
            return "library", display
        if func.attr in OP_NAME_FUNCTIONS:
            if receiver.split(".")[-1] == "library":
                return "api", display
            return "method", display
    return None, ""


def _op_name_argument(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for keyword in call.keywords:
        if keyword.arg in OP_NAME_KEYWORDS or keyword.arg == "ns":
            return keyword.value
    return None


def _op_name_problem(argument: ast.expr, kind: str) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for an op-name argument, or None if fine."""
    prefix_fix = (
        f'pass {PREFIX_FUNCTION}("<op>") (from ._ops import {PREFIX_FUNCTION}); the '
        "namespace is unique per build"
    )
    literal = _literal_text(argument)
    if kind == "library":
        if literal is not None:
            return (
                f"literal op namespace {literal!r}",
                "use the build's namespace: `ops.name` (from ._ops import ops)",
            )
        return None
    if kind == "method":
        if literal is not None and "::" in literal:
            return (f"literal op namespace in {literal!r}", prefix_fix)
        return None
    if _is_prefix_call(argument):
        return None
    if literal is not None:
        found = (
            f"literal op namespace in {literal!r}"
            if "::" in literal
            else f"op name {literal!r} without the kernel's namespace"
        )
        return found, prefix_fix
    if isinstance(argument, ast.JoinedStr):
        return "op name built with an f-string", prefix_fix
    namespace = _torch_ops_namespace(argument)
    if namespace is not None:
        return (
            f"op referenced through the literal namespace torch.ops.{namespace}",
            "use `ops.<op>` (from ._ops import ops)",
        )
    return None


def _literal_text(node: ast.expr) -> str | None:
    """The text of a string literal or a concatenation of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_text(node.left), _literal_text(node.right)
        if left is not None or right is not None:
            return (left or "…") + (right or "…")
    return None


def _is_prefix_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == PREFIX_FUNCTION)
        or (isinstance(node.func, ast.Attribute) and node.func.attr == PREFIX_FUNCTION)
    )


def _torch_ops_namespace(node: ast.expr) -> str | None:
    """`mylib` for `torch.ops.mylib.op[.overload]`."""
    parts = dotted_name(node).split(".")
    if len(parts) >= 4 and parts[:2] == ["torch", "ops"]:
        return parts[2]
    return None
