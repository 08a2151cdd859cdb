"""The policy file format: auditwheel's `manylinux-policy.json`, plus kernelnix's extras.

A policy file is a JSON list of policies with auditwheel's keys. kernelnix's
own files (kernelnix/data/policies/) may add the `kernelnix_*` extras; any
other key, a wrong type or a malformed version is an error naming the file and
the key path. auditwheel's file goes through the same model, so both are read
one way: kernelnix's file model and its one translator of pydantic's errors
(kernelnix.config.issues), with auditwheel's snake_case keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from kernelnix.config.base import FileModel
from kernelnix.core.diagnostics import Diagnostic, UserError, format_key_path

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable  # Python 3.11+: only for type checking

    from kernelnix.config.issues import Issue

# A number (`2.27`, `1.2.0.8`) or a name that starts with a capital (`TM_1`, `LDBL_3.4`).
SymbolVersion = Annotated[
    str, StringConstraints(pattern=r"^(?:[0-9]+(?:\.[0-9]+)*|[A-Z][A-Za-z0-9_.]*)$")
]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
FIX = "correct the policy file (format: kernelnix/data/policies/README.md)"


class PolicyEntry(FileModel):
    """One policy as auditwheel writes it, with kernelnix's optional extras."""

    # auditwheel's keys are snake_case, the file model's kebab-case.
    model_config = ConfigDict(alias_generator=None)

    name: NonEmpty
    aliases: list[NonEmpty]
    priority: int = Field(ge=0)
    # CPU architecture -> namespace (`GLIBC`) -> every version the level allows.
    symbol_versions: dict[NonEmpty, dict[NonEmpty, list[SymbolVersion]]]
    lib_whitelist: list[NonEmpty]
    # Library -> symbols private to it.
    blacklist: dict[NonEmpty, list[NonEmpty]]
    # kernelnix's extras.
    kernelnix_description: str | None = None
    # Library -> the fix shown when a binary needs it (allowed by manylinux, not here).
    kernelnix_forbidden_libraries: dict[NonEmpty, NonEmpty] = Field(default_factory=dict)


AUDITWHEEL_KEYS = ("name", "aliases", "priority", "symbol_versions", "lib_whitelist", "blacklist")
EXTRA_KEYS = ("kernelnix_description", "kernelnix_forbidden_libraries")
_POLICY_FILE = TypeAdapter(list[PolicyEntry])


def read_policy_files(files: Iterable[Traversable]) -> dict[str, PolicyEntry]:
    """The policies of `files` by name, validated; a name or alias used twice is an error."""
    policies: dict[str, PolicyEntry] = {}
    names: set[str] = set()
    for file in files:
        for index, entry in enumerate(parse_policy_file(_read_text(file), str(file))):
            taken = names.intersection([entry.name, *entry.aliases])
            if taken:
                raise UserError.single(
                    f"policy name {sorted(taken)[0]!r} is used twice",
                    file=str(file),
                    key=f"[{index}]",
                    fix="give every policy and alias its own name",
                )
            names.update([entry.name, *entry.aliases])
            policies[entry.name] = entry
    return policies


def _read_text(file: Traversable) -> str:
    try:
        return file.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.single(
            f"cannot read the policy file: {exc}", file=str(file), fix="reinstall kernelnix"
        ) from None


def parse_policy_file(text: str, file: str) -> list[PolicyEntry]:
    """The policies in one file's text; UserError (every problem, with key paths) if malformed."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError.single(f"not valid JSON: {exc}", file=file, fix=FIX) from None
    try:
        return _POLICY_FILE.validate_python(data, strict=True)
    except ValidationError as exc:
        from kernelnix.config.issues import issues_of  # only a bad file pays for it

        issues = issues_of(exc, list[PolicyEntry])
        raise UserError([_diagnostic(issue, file) for issue in issues]) from None


def _diagnostic(issue: Issue, file: str) -> Diagnostic:
    """The issue in the words of auditwheel's format."""
    if not issue.loc:
        found = _shown(issue.value)
        message = f"expected a JSON list of policies (auditwheel's format), found {found}"
    elif issue.kind == "extra_forbidden":
        message = (
            f"unknown key {issue.loc[-1]!r}; expected auditwheel's keys "
            f"({', '.join(AUDITWHEEL_KEYS)}) or kernelnix's extras ({', '.join(EXTRA_KEYS)})"
        )
    elif issue.kind == "missing":
        message = "missing key (auditwheel's policy format requires it)"
    elif issue.kind == "string_pattern_mismatch":
        message = (
            "expected a symbol version: a number such as 2.27 or a name such as TM_1, "
            f"found {_shown(issue.value)}"
        )
    elif issue.kind == "string_too_short":
        message = "expected a non-empty string"
    else:
        message = issue.message
    return Diagnostic(message, file=file, key=format_key_path(issue.loc) or None, fix=FIX)


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
