"""docs/plan.md's key tables, generated from the plan's models: key, type and
meaning of every field, so the document cannot drift from the file it describes
(tests/plan/test_docs.py compares them; `pytest --update-golden` rewrites them)."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

from kernelnix.plan.metadata import Metadata
from kernelnix.plan.model import (
    FrameworkSources,
    KernelCompile,
    KernelGitState,
    Plan,
    PlanDependency,
    PlanHub,
    PlanKernel,
    PlanKernelDep,
    PlanKernelDeps,
    PlanKernelFile,
    PlanModel,
    PlanSystem,
    PlanVariant,
)

# Each table: its model, its name in the type column, where it is in the file.
SECTIONS: list[tuple[type[PlanModel], str, str]] = [
    (Plan, "Plan", "the top level"),
    (PlanSystem, "System", "`systems.<system>`"),
    (PlanVariant, "Variant", "`variants.<system>.<name>`"),
    (KernelCompile, "KernelCompile", "`variants.<system>.<name>.compile.<kernel>`"),
    (PlanDependency, "Dependency", "`...compile.<kernel>.dependencies[]`"),
    (PlanKernelDeps, "KernelDeps", "`variants.<system>.<name>.kernel-deps`"),
    (PlanKernelDep, "KernelDep", "`...kernel-deps.kernels[]`"),
    (PlanKernelFile, "KernelFile", "`...kernel-deps.kernels[].files[]`"),
    (PlanKernel, "Kernel", "`kernels.<kernel>`"),
    (FrameworkSources, "FrameworkSources", "`framework-sources`"),
    (KernelGitState, "KernelGit", "`kernel-git`"),
    (PlanHub, "Hub", "`hub`"),
]
# A variant's metadata.json is its own contract: `kernelnix schema metadata`.
_NAMES: dict[Any, str] = {model: name for model, name, _ in SECTIONS} | {Metadata: "metadata.json"}
_SCALARS: dict[Any, str] = {str: "string", int: "int", bool: "bool", Any: "any"}


def type_text(annotation: Any, none: str = "null") -> str:
    """A field's type as the table shows it: `[string]`, `{string: Variant}`, `string \\| null`
    (`none` names None: `absent` where the key is left out)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return f"[{type_text(args[0])}]"
    if origin is dict:
        return f"{{{type_text(args[0])}: {type_text(args[1])}}}"
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in args)
    if origin in (Union, types.UnionType):
        return " \\| ".join(none if a is type(None) else type_text(a) for a in args)
    return _SCALARS.get(annotation) or _NAMES[annotation]


def key_table(model: type[PlanModel]) -> str:
    rows = ["| key | type | meaning |", "|---|---|---|"]
    none = "absent" if model.NONE_IS_ABSENT else "null"
    for name, info in model.model_fields.items():
        kind = type_text(info.annotation, none)
        meaning = (info.description or "").replace("|", "\\|")
        rows.append(f"| `{info.alias or name}` | {kind} | {meaning} |")
    return "\n".join(rows) + "\n"


def plan_tables() -> str:
    """Every table of the plan, a `###` heading each, in SECTIONS' order."""
    parts = []
    for model, name, place in SECTIONS:
        intro = f"{model.__doc__.strip()}\n\n" if model.__doc__ else ""
        parts.append(f"### {name}: {place}\n\n{intro}{key_table(model)}")
    return "\n".join(parts)
