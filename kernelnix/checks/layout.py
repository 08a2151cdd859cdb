"""The variant directory is one flat Python package, as the loader and the Hub expect.

`metadata.json`, `__init__.py`, `_ops.py`, further .py/.pyi/data files and, for
arch variants, exactly one extension library `<id>.abi3.so` (`<id>.so` for
tvm-ffi variants); no bytecode, no
links, no build leftovers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from fnmatch import fnmatchcase

from kernelnix.checks.binaries import is_binary_name
from kernelnix.checks.context import VariantContext
from kernelnix.checks.report import Violation
from kernelnix.variants.names import library_suffix

REQUIRED_FILES = {
    "metadata.json": "the variant's metadata (the loader refuses a variant without it)",
    "__init__.py": "the kernel's Python package",
    "_ops.py": "the ops module (exposes `ops` and `add_op_namespace_prefix`)",
}
# What a build tree leaves behind that has no business in a published variant.
BUILD_LEFTOVERS = (
    "*.o",
    "*.obj",
    "*.a",
    "*.lib",
    "CMakeCache.txt",
    "*.ninja",
    ".ninja_*",
    "*.egg-info",
    "cmake_install.cmake",
)


def required_files(ctx: VariantContext) -> Iterable[Violation]:
    present = set(ctx.listing.files)
    for name, role in REQUIRED_FILES.items():
        if name == "metadata.json" and ctx.metadata_error not in (None, "missing"):
            continue  # present but unreadable: the metadata rule reports it
        if name not in present:
            yield Violation(
                rule="layout",
                file=name,
                subject=name,
                found="missing",
                limit=role,
                fix="install the variant with the build (it writes the whole package)",
            )


def extension_library(ctx: VariantContext) -> Iterable[Violation]:
    """Compiled variants: exactly one `<id>.abi3.so` (tvm-ffi: `<id>.so`) at the top;
    noarch variants: none."""
    libraries = [f for f in ctx.listing.files if is_binary_name(f)]
    if ctx.name is None:
        return
    if ctx.is_noarch:
        for library in libraries:
            yield Violation(
                rule="layout",
                file=library,
                subject=library,
                found="compiled library in a noarch (Python-only) variant",
                limit=f"no compiled code in {ctx.variant_dir.name}",
                fix="build it as an arch variant (torch<V>-…), or remove the library",
            )
        return
    expected = _expected_library(ctx)
    if expected is not None and expected not in libraries:
        yield Violation(
            rule="layout",
            file=expected,
            subject=expected,
            found="missing",
            limit="exactly one extension library named after metadata.json's id",
            fix="install the library the build produced under this name",
        )
    for library in libraries:
        if library != expected:
            yield Violation(
                rule="layout",
                file=library,
                subject=library,
                found="unexpected library",
                limit=f"exactly one extension library{f', {expected}' if expected else ''}",
                fix="link everything into the one extension library, or load the extra code "
                "from the Python package's data with a relative path",
            )


def _expected_library(ctx: VariantContext) -> str | None:
    if ctx.kernel_id is None or ctx.name is None:
        return None
    return ctx.kernel_id + library_suffix(ctx.name.kind, ctx.os_name)


def no_bytecode(ctx: VariantContext) -> Iterable[Violation]:
    caches = [d for d in ctx.listing.dirs if d.rsplit("/", 1)[-1] == "__pycache__"]
    loose = [
        f
        for f in ctx.listing.files
        if f.endswith((".pyc", ".pyo")) and not any(f.startswith(c + "/") for c in caches)
    ]
    for entry in [*caches, *loose]:
        yield Violation(
            rule="layout",
            file=entry,
            subject=entry,
            found="compiled Python bytecode",
            limit="sources only; the Hub never serves bytecode",
            fix="delete it; set PYTHONDONTWRITEBYTECODE=1 when importing the variant",
        )


def plain_files_only(ctx: VariantContext) -> Iterable[Violation]:
    """No symlinks, devices or build leftovers: the package must copy as-is."""
    for entry in ctx.listing.symlinks:
        yield Violation(
            rule="layout",
            file=entry,
            subject=entry,
            found="symbolic link",
            limit="regular files and directories",
            fix="copy the file into the variant instead of linking to it",
        )
    for entry in ctx.listing.special:
        yield Violation(
            rule="layout",
            file=entry,
            subject=entry,
            found="special file (socket, FIFO or device)",
            limit="regular files and directories",
            fix="remove it",
        )
    for entry in [*ctx.listing.files, *ctx.listing.dirs]:
        name = entry.rsplit("/", 1)[-1]
        if any(fnmatchcase(name, pattern) for pattern in BUILD_LEFTOVERS):
            yield Violation(
                rule="layout",
                file=entry,
                subject=entry,
                found="build leftover",
                limit="only what the kernel needs at run time",
                fix="remove it from the install (it belongs to the build tree)",
            )


def ops_module(ctx: VariantContext) -> Iterable[Violation]:
    """_ops.py defines `ops` and `add_op_namespace_prefix`, which the op rules rely on."""
    if "_ops.py" not in ctx.listing.files:
        return
    try:
        tree = ast.parse((ctx.variant_dir / "_ops.py").read_bytes(), "_ops.py")
    except (SyntaxError, ValueError):
        return  # the Python rules report syntax errors
    defined = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    for name in ("ops", "add_op_namespace_prefix"):
        if name not in defined:
            yield Violation(
                rule="layout",
                file="_ops.py",
                subject=name,
                found="not defined at module level",
                limit="_ops.py defines `ops` and `add_op_namespace_prefix`",
                fix="let the build generate _ops.py from its template",
            )


LAYOUT_RULES = (required_files, extension_library, no_bytecode, plain_files_only, ops_module)
