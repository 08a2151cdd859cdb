"""The rule list: every check a variant goes through, in report order.

A rule is a function `(VariantContext) -> Iterable[Violation]`. To add one,
write the function next to its kin and append it to the matching list here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from kernelnix.checks.binaries import (
    Binary,
    BinarySettings,
    check_binary,
    is_binary_name,
    load_binaries,
)
from kernelnix.checks.context import VariantContext
from kernelnix.checks.import_check import imports_through_kernels
from kernelnix.checks.layout import LAYOUT_RULES
from kernelnix.checks.metadata_rules import (
    metadata_fields,
    metadata_matches_variant,
    metadata_model,
    metadata_provenance,
    metadata_readable,
)
from kernelnix.checks.policy import Policy, PolicyError, load_policy
from kernelnix.checks.python_source import python_sources
from kernelnix.checks.report import Violation
from kernelnix.checks.store_paths import store_paths

VariantRule = Callable[[VariantContext], Iterable[Violation]]

METADATA_RULES: list[VariantRule] = [
    metadata_readable,
    metadata_fields,
    metadata_model,
    metadata_matches_variant,
    metadata_provenance,
]


def compiled_libraries(ctx: VariantContext) -> Iterable[Violation]:
    """Every shared library in the variant against the binary rules."""
    base = BinarySettings(
        policy=None,
        python_abi=ctx.python_abi,
        stable_abi=ctx.stable_abi,
        macos_min=ctx.macos_min,
        backend=ctx.backend,
        cpu=ctx.cpu,
        os_name=ctx.os_name,
        redistributable=ctx.options.redistributable,
        kind=ctx.name.kind if ctx.name else None,
    )
    # The policy, so the settings, depend on a binary's format and CPU only.
    settings: dict[tuple[str, str], BinarySettings] = {}
    for relative in ctx.listing.files:
        if not is_binary_name(relative):
            continue
        binaries, problems = load_binaries(ctx.variant_dir, relative)
        yield from problems
        for binary in binaries:
            policy, problem = _policy_for(ctx, binary)
            if problem is not None:
                yield problem
            key = (binary.format, binary.cpu)
            if key not in settings:
                settings[key] = replace(base, policy=policy)
            yield from check_binary(binary, settings[key])


def _policy_for(ctx: VariantContext, binary: Binary) -> tuple[Policy | None, Violation | None]:
    if binary.format != "ELF":
        return None, None
    try:
        return load_policy(ctx.options.policy, binary.cpu), None
    except PolicyError as exc:
        return None, Violation(
            rule="symbol-version",
            file=binary.file,
            subject=f"policy {ctx.options.policy}",
            found=str(exc),
            limit="a policy that covers the library's architecture",
            fix="pick a policy for this architecture (--policy)",
        )


LAYOUT: list[VariantRule] = list(LAYOUT_RULES)
PYTHON_RULES: list[VariantRule] = [python_sources]
BINARY_RULES: list[VariantRule] = [compiled_libraries, store_paths]
IMPORT_RULES: list[VariantRule] = [imports_through_kernels]


def variant_rules() -> list[VariantRule]:
    return [*METADATA_RULES, *LAYOUT, *PYTHON_RULES, *BINARY_RULES, *IMPORT_RULES]
