"""Strict, declarative validation of parsed TOML/JSON tables into frozen objects.

A `Model` subclass declares its fields as annotations; a field's key in the file
is its name with `_` spelled `-`. Validation never coerces (a float is not a
string, a bool is not an integer), rejects unknown keys, and collects every
problem of a document as an `Issue` (kind, location, value) instead of stopping
at the first.

kernelnix used pydantic for this; importing it and building its validators took
~100 ms of every run, most of the budget of `kernelnix plan` (see
benchmarks/bench_plan.py). The few features build.toml and metadata.json need
fit here: `str`, `int`, `bool`, `Literal`, `list`, `dict`, optional and tagged
unions, nested models, and `Annotated` markers (`Before`, `Ge`, `Serializer`,
`Tagged`).
"""

from __future__ import annotations

import copy
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

Loc = tuple[str | int, ...]
M = TypeVar("M", bound="Model")


# ----------------------------------------------------------------- markers


@dataclass(frozen=True)
class Before:
    """Run `func` on the raw value before the type check; it raises ValueError."""

    func: Callable[[Any], Any]


@dataclass(frozen=True)
class Ge:
    """The (integer) value must be at least `bound`."""

    bound: int


@dataclass(frozen=True)
class Serializer:
    """How the value is written back out (`Model.to_data`)."""

    func: Callable[[Any], Any]


@dataclass(frozen=True)
class Tagged:
    """On a union of models: the member is chosen by the value of this key."""

    key: str


# ------------------------------------------------------------------ issues


@dataclass(frozen=True)
class Issue:
    """One problem: `kind` names it (`missing`, `extra_forbidden`, `string_type`,
    `literal_error`, `value_error`, ...), `loc` is the key path to it."""

    kind: str
    loc: Loc
    message: str
    value: Any = None
    error: Exception | None = None  # for `value_error`: what the check raised
    choices: tuple[Any, ...] = ()  # for `literal_error` and `union_tag_invalid`


class SchemaError(ValueError):
    """A document with problems; `issues` lists every one."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("; ".join(f"{_dotted(i.loc)}: {i.message}" for i in issues))
        self.issues = issues


def _dotted(loc: Loc) -> str:
    return ".".join(map(str, loc)) or "(top level)"


# Exact types: (issue kind, words for messages).
_EXACT_TYPES = {
    bool: ("bool_type", "a boolean"),
    int: ("int_type", "an integer"),
    str: ("string_type", "a string"),
}


def toml_type_name(value: object) -> str:
    """The TOML word for a parsed value's type, for error messages (JSON's null too)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return "date/time"


def describe(value: object) -> str:
    """`integer 5`, `string 'x'`, `a table`: a parsed value for messages."""
    return "a table" if isinstance(value, dict) else f"{toml_type_name(value)} {value!r}"


# ------------------------------------------------------------------ fields

_REQUIRED: Any = object()


@dataclass(frozen=True)
class _Default:
    value: Any
    examples: tuple[str, ...]


def field(default: Any = _REQUIRED, *, examples: Sequence[str] = ()) -> Any:
    """A field's default (none: required) and example values for error fixes."""
    return _Default(default, tuple(examples))


@dataclass(frozen=True)
class FieldSpec:
    name: str
    key: str
    annotation: Any
    default: Any
    examples: tuple[str, ...]

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _specs_of(cls: type) -> dict[str, FieldSpec]:
    hints = typing.get_type_hints(cls, include_extras=True)
    specs = {}
    for name, annotation in hints.items():
        if name.startswith("_") or typing.get_origin(annotation) is ClassVar:
            continue
        # The default belongs to the class that annotated the field last.
        owner = next(c for c in cls.__mro__ if name in inspect.get_annotations(c))
        raw = owner.__dict__.get(name, _REQUIRED)
        default = raw if isinstance(raw, _Default) else _Default(raw, ())
        specs[name] = FieldSpec(
            name, name.replace("_", "-"), annotation, default.value, default.examples
        )
    return specs


# ------------------------------------------------------------------ models

# What a compiled check returns for a value whose problems it recorded.
INVALID: Any = object()

Check = Callable[[Any, Loc, list[Issue], Mapping[str, Any]], Any]
Dump = Callable[[Any, bool], Any]


class Model:
    """A frozen record validated from a table. Subclasses declare annotated fields;
    `normalize_input` and `check_whole` are hooks for rules across fields."""

    _compiled: ClassVar[tuple[dict[str, FieldSpec], dict[str, FieldSpec], dict[str, Check]]]

    def __init__(self, **values: Any) -> None:
        specs = self.schema_fields()
        unknown = values.keys() - specs.keys()
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown fields {sorted(unknown)}")
        for name, spec in specs.items():
            if name in values:
                value = values[name]
            elif spec.required:
                raise TypeError(f"{type(self).__name__}: missing field {name!r}")
            else:
                value = copy.copy(spec.default)
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # mutable lists inside

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({inner})"

    @classmethod
    def schema_fields(cls) -> dict[str, FieldSpec]:
        """Fields by Python name, in declaration order (base classes first)."""
        return cls._schema()[0]

    @classmethod
    def field_for_key(cls, key: str) -> FieldSpec | None:
        """The field spelled `key` in the file, if any."""
        return cls._schema()[1].get(key)

    @classmethod
    def _schema(cls) -> tuple[dict[str, FieldSpec], dict[str, FieldSpec], dict[str, Check]]:
        # Built on first use, per class: a run only touches the models it needs.
        if "_compiled" not in cls.__dict__:
            specs = _specs_of(cls)
            by_key = {spec.key: spec for spec in specs.values()}
            checks = {name: _compile(spec.annotation) for name, spec in specs.items()}
            cls._compiled = (specs, by_key, checks)
        return cls._compiled

    @classmethod
    def validate(cls: type[M], data: Any, *, context: Mapping[str, Any] | None = None) -> M:
        """The model of `data`, or SchemaError listing every problem."""
        issues: list[Issue] = []
        result = _check_model(cls, data, (), issues, context or {})
        if issues:
            raise SchemaError(issues)
        return result

    @classmethod
    def normalize_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Hook: rewrite the raw table before the fields are checked (ValueError: a problem)."""
        return data

    def check_whole(self, context: Mapping[str, Any]) -> None:
        """Hook: rules across fields, run when every field is valid (ValueError: a problem)."""

    def to_data(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """Plain JSON data with the file's key names, fields in declaration order."""
        out = {}
        for name, spec in self.schema_fields().items():
            value = getattr(self, name)
            if value is None and exclude_none:
                continue
            out[spec.key] = _dumper(spec.annotation)(value, exclude_none)
        return out


def _check_model(
    cls: type[M], data: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]
) -> M:
    if not isinstance(data, dict):
        issues.append(_not_a_table("model_type", loc, data))
        return INVALID
    try:
        data = cls.normalize_input(data)
    except ValueError as exc:
        issues.append(Issue("value_error", loc, str(exc), data, error=exc))
        return INVALID
    specs, by_key, checks = cls._schema()
    before = len(issues)
    for key in data:
        if key not in by_key:
            issues.append(Issue("extra_forbidden", (*loc, key), "unknown key", data[key]))
    values = {}
    for name, spec in specs.items():
        if spec.key in data:
            values[name] = checks[name](data[spec.key], (*loc, spec.key), issues, context)
        elif spec.required:
            issues.append(Issue("missing", (*loc, spec.key), "required key is missing", data))
        else:
            values[name] = copy.copy(spec.default)
    if len(issues) > before:
        return INVALID
    model = object.__new__(cls)
    model.__dict__.update(values)
    try:
        model.check_whole(context)
    except ValueError as exc:
        issues.append(Issue("value_error", loc, str(exc), data, error=exc))
        return INVALID
    return model


# ------------------------------------------------------ compiled type checks

_checks: dict[Any, Check] = {}


def _compile(annotation: Any) -> Check:
    """The check function of a type annotation, built once per annotation."""
    try:
        return _checks[annotation]
    except KeyError:
        check = _checks[annotation] = _build_check(annotation)
        return check


def _build_check(tp: Any) -> Check:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        return _annotated_check(args[0], args[1:])
    if tp is Any:
        return lambda value, loc, issues, context: value
    if tp in _EXACT_TYPES:
        return _exact_type_check(tp)
    if origin is Literal:
        return _literal_check(args)
    if origin is list:
        return _list_check(_compile(args[0]))
    if origin is dict:
        return _dict_check(_compile(args[1]))
    if origin in (typing.Union, types.UnionType):
        return _union_check(args)
    if isinstance(tp, type) and issubclass(tp, Model):
        return lambda value, loc, issues, context: _check_model(tp, value, loc, issues, context)
    if isinstance(tp, type):
        return _instance_check(tp)
    raise TypeError(f"unsupported annotation in a model: {tp!r}")


def _not_a_table(kind: str, loc: Loc, value: Any) -> Issue:
    return Issue(kind, loc, f"expected a table, got {describe(value)}", value)


def _exact_type_check(tp: type) -> Check:
    kind, word = _EXACT_TYPES[tp]

    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if type(value) is tp:
            return value
        issues.append(Issue(kind, loc, f"expected {word}, got {describe(value)}", value))
        return INVALID

    return check


def _instance_check(tp: type) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if isinstance(value, tp):
            return value
        issues.append(
            Issue("is_instance_of", loc, f"expected {tp.__name__}, got {describe(value)}", value)
        )
        return INVALID

    return check


def _literal_check(choices: tuple[Any, ...]) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        # Strict: `True` is not the literal 1, nor `5.0` the literal 5.
        if any(type(value) is type(c) and value == c for c in choices):
            return value
        expected = ", ".join(map(repr, choices))
        issues.append(
            Issue(
                "literal_error",
                loc,
                f"expected one of {expected}, got {describe(value)}",
                value,
                choices=choices,
            )
        )
        return INVALID

    return check


def _list_check(element: Check) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if type(value) is not list:
            issues.append(
                Issue("list_type", loc, f"expected an array, got {describe(value)}", value)
            )
            return INVALID
        return [element(item, (*loc, i), issues, context) for i, item in enumerate(value)]

    return check


def _dict_check(item: Check) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if type(value) is not dict:
            issues.append(_not_a_table("dict_type", loc, value))
            return INVALID
        return {key: item(entry, (*loc, key), issues, context) for key, entry in value.items()}

    return check


def _union_check(members: tuple[Any, ...]) -> Check:
    optional = type(None) in members
    checks = [_compile(m) for m in members if m is not type(None)]

    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if value is None and optional:
            return None
        first: list[Issue] | None = None
        for member in checks:
            attempt: list[Issue] = []
            result = member(value, loc, attempt, context)
            if not attempt:
                return result
            first = attempt if first is None else first
        issues.extend(first or ())
        return INVALID

    return check


def _annotated_check(inner: Any, marks: tuple[Any, ...]) -> Check:
    tag = next((m.key for m in marks if isinstance(m, Tagged)), None)
    check = _tagged_check(inner, tag) if tag else _compile(inner)
    for mark in marks:
        if isinstance(mark, Before):
            check = _before(mark.func, check)
        elif isinstance(mark, Ge):
            check = _at_least(mark.bound, check)
    return check


def _before(func: Callable[[Any], Any], then: Check) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        try:
            value = func(value)
        except ValueError as exc:
            issues.append(Issue("value_error", loc, str(exc), value, error=exc))
            return INVALID
        return then(value, loc, issues, context)

    return check


def _at_least(bound: int, then: Check) -> Check:
    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        count = len(issues)
        result = then(value, loc, issues, context)
        if len(issues) == count and result < bound:
            issues.append(
                Issue("greater_than_equal", loc, f"expected at least {bound}, got {result}", value)
            )
            return INVALID
        return result

    return check


def tagged_members(union: Any, tag: str) -> dict[Any, type[Model]]:
    """`{tag value: model}` of a union of models that each fix `tag` to a Literal."""
    members = {}
    for model in typing.get_args(union):
        annotation = model.schema_fields()[tag].annotation
        for value in typing.get_args(annotation):
            members[value] = model
    return members


def _tagged_check(union: Any, tag: str) -> Check:
    members = tagged_members(union, tag)

    def check(value: Any, loc: Loc, issues: list[Issue], context: Mapping[str, Any]) -> Any:
        if type(value) is not dict:
            issues.append(_not_a_table("model_type", loc, value))
            return INVALID
        if tag not in value:
            issues.append(Issue("union_tag_not_found", loc, f"`{tag}` is missing", value))
            return INVALID
        model = members.get(value[tag]) if isinstance(value[tag], str) else None
        if model is None:
            issues.append(
                Issue(
                    "union_tag_invalid",
                    loc,
                    f"unknown {tag} {value[tag]!r}",
                    value,
                    choices=tuple(members),
                )
            )
            return INVALID
        return _check_model(model, value, loc, issues, context)

    return check


# ------------------------------------------------- models inside a document


def model_at(root: type[Model], data: Any, loc: Loc) -> type[Model] | None:
    """The model that validates the table at `loc` of `data` (e.g. to list its keys);
    a tagged union is resolved by the tag found in `data`."""
    current: Any = root
    value = data
    for part in loc:
        if isinstance(current, type) and issubclass(current, Model):
            spec = current.field_for_key(str(part))
            if spec is None:
                return None
            annotation = spec.annotation
        else:
            annotation = _element_type(current)
        value = _child(value, part)
        current = _resolve(annotation, value)
    return current if isinstance(current, type) and issubclass(current, Model) else None


def _child(value: Any, part: str | int) -> Any:
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and part < len(value):
        return value[part]
    return None


def _element_type(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    return args[0] if origin is list else args[1] if origin is dict else None


def _resolve(annotation: Any, value: Any) -> Any:
    """Strip Annotated and Optional; pick a tagged union's member by the tag in `value`."""
    while True:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is Annotated:
            tag = next((m.key for m in args[1:] if isinstance(m, Tagged)), None)
            if tag is None:
                annotation = args[0]
                continue
            found = value.get(tag) if isinstance(value, dict) else None
            return tagged_members(args[0], tag).get(found) if isinstance(found, str) else None
        if origin in (typing.Union, types.UnionType):
            members = [m for m in args if m is not type(None)]
            models = [m for m in members if isinstance(m, type) and issubclass(m, Model)]
            annotation = members[0] if len(members) == 1 else (models[0] if models else None)
            continue
        return annotation


# ------------------------------------------------------------- serializing

_dumpers: dict[Any, Dump] = {}


def _dumper(annotation: Any) -> Dump:
    try:
        return _dumpers[annotation]
    except KeyError:
        dump = _dumpers[annotation] = _build_dumper(annotation)
        return dump


def _build_dumper(tp: Any) -> Dump:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        serializer = next((m for m in args[1:] if isinstance(m, Serializer)), None)
        if serializer is None:
            return _dumper(args[0])
        return lambda value, exclude_none: serializer.func(value)
    if tp in _EXACT_TYPES or origin is Literal:
        return _dump_same
    if origin is list:
        item = _dumper(args[0])
        if item is _dump_same:
            return lambda value, exclude_none: list(value)
        return lambda value, exclude_none: [item(v, exclude_none) for v in value]
    if origin is dict:
        item = _dumper(args[1])
        return lambda value, exclude_none: {k: item(v, exclude_none) for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        members = [m for m in args if m is not type(None)]
        if len(members) == 1:
            inner = _dumper(members[0])
            return lambda value, exclude_none: None if value is None else inner(value, exclude_none)
    return _dump_plain


def _dump_same(value: Any, exclude_none: bool) -> Any:
    return value


def _dump_plain(value: Any, exclude_none: bool) -> Any:
    if isinstance(value, Model):
        return value.to_data(exclude_none=exclude_none)
    if isinstance(value, list):
        return [_dump_plain(v, exclude_none) for v in value]
    if isinstance(value, dict):
        return {k: _dump_plain(v, exclude_none) for k, v in value.items()}
    return value
