"""pydantic's validation errors as problems of a file: key path, value, plain words.

A pydantic error names its type (`missing`, `extra_forbidden`, `string_type`,
`literal_error`, `value_error`, `union_tag_invalid`, ...) and its location;
a location inside a tagged union also holds the tag (`kernel.relu.cuda.src`),
which is not a key of the file. `issues_of` walks each location through the
models to drop the tags and to find the model and the type found there, which
the messages (valid keys, choices, examples) need.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from kernelnix.config.base import FileModel
from kernelnix.config.locate import KeyPath
from kernelnix.config.types import toml_type_name

# pydantic's type errors -> what was expected, in the words of messages.
EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


@dataclass(frozen=True)
class Issue:
    """One problem of a document."""

    kind: str  # pydantic's error type
    loc: KeyPath  # the key path in the file
    value: Any  # the value found (for `missing`: the table the key is missing from)
    owner: type[FileModel] | None  # the model of the table that holds the last key
    expected: Any  # the type expected at `loc`, when known
    error: Exception | None = None  # what a validator raised (`value_error`)
    bound: object = None  # the bound of `greater_than_equal`

    @property
    def choices(self) -> tuple[Any, ...]:
        """The values a Literal type allows; empty for other types."""
        return typing.get_args(self.expected) if _is_literal(self.expected) else ()

    @property
    def message(self) -> str:
        """The problem in plain words, without the key path."""
        kind, value = self.kind, self.value
        if kind == "missing":
            return "required key is missing"
        if kind == "extra_forbidden":
            return "unknown key"
        if kind == "value_error":
            return str(self.error)
        if kind == "literal_error":
            allowed = ", ".join(map(repr, self.choices))
            return f"expected one of {allowed}, got {describe(value)}"
        if kind == "greater_than_equal":
            return f"expected at least {self.bound}, got {value!r}"
        if kind in EXPECTED:
            return f"expected {EXPECTED[kind]}, got {describe(value)}"
        return f"invalid value {describe(value)} ({kind})"


def describe(value: object) -> str:
    """`integer 5`, `string 'x'`, `a table`: a parsed value for messages."""
    return "a table" if isinstance(value, dict) else f"{toml_type_name(value)} {value!r}"


def issues_of(error: ValidationError, root: Any) -> list[Issue]:
    """Every problem of `error`, raised by validating a document with `root` (a
    FileModel, or a type made of them such as `list[Model]`)."""
    issues = []
    for found in error.errors():
        loc, owner, expected = _walk(root, found["loc"])
        ctx = found.get("ctx", {})
        issues.append(
            Issue(
                kind=found["type"],
                loc=loc,
                value=found.get("input"),
                owner=owner,
                expected=expected,
                error=ctx.get("error"),
                bound=ctx.get("ge"),
            )
        )
    return issues


def _walk(root: Any, loc: tuple[int | str, ...]) -> tuple[KeyPath, Any, Any]:
    """The key path of a pydantic location (union tags dropped), the model that
    holds its last key, and the type expected there (None where unknown)."""
    path: list[str | int] = []
    owner: type[FileModel] | None = None
    current: Any = root
    for part in loc:
        members = _tagged_members(current)
        if members is not None:  # the tag that chose the member: not a key
            current = members.get(str(part))
            continue
        path.append(part)
        if _is_model(current):
            owner = current
            current = _field_type(current, str(part))
        else:
            current = _element_type(current)
    return tuple(path), owner, current


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, FileModel)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _field_type(model: type[BaseModel], key: str) -> Any:
    info = field_for_key(model, key)
    return None if info is None else _unwrap(info.annotation)


def field_for_key(model: type[BaseModel], key: str) -> FieldInfo | None:
    """The field spelled `key` in the file, if `model` has one."""
    return next((f for name, f in model.model_fields.items() if (f.alias or name) == key), None)


def _element_type(tp: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    return _unwrap(args[0] if origin is list else args[1] if origin is dict else None)


def _unwrap(tp: Any) -> Any:
    """Strip Optional and Annotated, but keep a tagged union's Annotated (its tag)."""
    while True:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is Annotated and _discriminator(args[1:]) is None:
            tp = args[0]
        elif origin in (typing.Union, UnionType) and type(None) in args and len(args) == 2:
            tp = next(a for a in args if a is not type(None))
        else:
            return tp


def _discriminator(metadata: tuple[Any, ...]) -> str | None:
    """The key that chooses a tagged union's member (kernelnix's unions use a key)."""
    for mark in metadata:
        if isinstance(mark, FieldInfo) and isinstance(mark.discriminator, str):
            return mark.discriminator
    return None


def _tagged_members(tp: Any) -> dict[str, type[BaseModel]] | None:
    """`{tag: model}` of a tagged union (an Annotated union with a discriminator)."""
    if typing.get_origin(tp) is not Annotated:
        return None
    union, *metadata = typing.get_args(tp)
    tag = _discriminator(tuple(metadata))
    if tag is None:
        return None
    return {
        value: member
        for member in typing.get_args(union)
        for value in typing.get_args(member.model_fields[tag].annotation)
    }
