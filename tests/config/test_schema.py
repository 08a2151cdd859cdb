"""kernelnix.schema: strict validation, every problem collected, data written back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import pytest

from kernelnix.schema import (
    Before,
    Ge,
    Model,
    SchemaError,
    Serializer,
    Tagged,
    field,
    model_at,
)


def _upper(value: object) -> object:
    if isinstance(value, str) and not value:
        raise ValueError("empty name")
    return value.upper() if isinstance(value, str) else value


Name = Annotated[str, Before(_upper), Serializer(str.lower)]


class Leaf(Model):
    kind: Literal["leaf"]
    size: Annotated[int, Ge(0)] = 0


class Branch(Model):
    kind: Literal["branch"]
    leaves: list[str] = field([])


class Pair(Model):
    low: int
    high: int

    def check_whole(self, context: Mapping[str, object]) -> None:
        if self.low > self.high and not context.get("lenient"):
            raise ValueError("low is above high")


class Doc(Model):
    name: Name = field(examples=['"x"'])
    enabled: bool = True
    tags: list[str] = field([])
    pair: Pair | None = None
    nodes: dict[str, Annotated[Leaf | Branch, Tagged("kind")]] = field({})


def issues_of(data: object, model: type[Model] = Doc) -> list[tuple[str, tuple, str]]:
    with pytest.raises(SchemaError) as info:
        model.validate(data)
    return [(i.kind, i.loc, i.message) for i in info.value.issues]


def test_valid_document_round_trips_with_file_keys() -> None:
    doc = Doc.validate(
        {
            "name": "relu",
            "tags": ["a"],
            "pair": {"low": 1, "high": 2},
            "nodes": {"x": {"kind": "leaf", "size": 3}, "y": {"kind": "branch"}},
        }
    )
    assert doc.name == "RELU"
    assert doc.nodes["x"] == Leaf(kind="leaf", size=3)
    assert isinstance(doc.nodes["y"], Branch)
    assert doc.to_data(exclude_none=True) == {
        "name": "relu",  # the serializer runs on the way out
        "enabled": True,
        "tags": ["a"],
        "pair": {"low": 1, "high": 2},
        "nodes": {"x": {"kind": "leaf", "size": 3}, "y": {"kind": "branch", "leaves": []}},
    }


def test_none_fields_are_kept_unless_excluded() -> None:
    doc = Doc.validate({"name": "a"})
    assert doc.to_data()["pair"] is None
    assert "pair" not in doc.to_data(exclude_none=True)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": 1}, ("string_type", ("name",))),
        ({"name": "a", "enabled": 1}, ("bool_type", ("enabled",))),
        ({"name": "a", "tags": "x"}, ("list_type", ("tags",))),
        ({"name": "a", "tags": ["x", 2.5]}, ("string_type", ("tags", 1))),
        ({"name": "a", "pair": {"low": True, "high": 2}}, ("int_type", ("pair", "low"))),
        ({"name": "a", "pair": []}, ("model_type", ("pair",))),
        ({"name": "a", "nodes": []}, ("dict_type", ("nodes",))),
        ({"name": ""}, ("value_error", ("name",))),
        ({"name": "a", "nodes": {"x": {"kind": "leaf", "size": -1}}}, None),
    ],
)
def test_values_are_never_coerced(data: dict, expected: tuple | None) -> None:
    found = issues_of(data)
    kinds = [(kind, loc) for kind, loc, _ in found]
    assert kinds == [expected or ("greater_than_equal", ("nodes", "x", "size"))]


def test_every_problem_is_collected() -> None:
    found = issues_of({"tags": [1], "extra": 2, "pair": {"low": 1}})
    assert sorted((kind, loc) for kind, loc, _ in found) == [
        ("extra_forbidden", ("extra",)),
        ("missing", ("name",)),
        ("missing", ("pair", "high")),
        ("string_type", ("tags", 0)),
    ]


def test_snake_case_spelling_is_an_unknown_key() -> None:
    class Kebab(Model):
        cuda_flags: list[str] = field([])

    assert Kebab.validate({"cuda-flags": ["-O3"]}).cuda_flags == ["-O3"]
    assert issues_of({"cuda_flags": []}, Kebab) == [
        ("extra_forbidden", ("cuda_flags",), "unknown key")
    ]


def test_literals_are_strict_and_name_their_choices() -> None:
    with pytest.raises(SchemaError) as info:
        Leaf.validate({"kind": "leaves"})
    (issue,) = info.value.issues
    assert (issue.kind, issue.choices) == ("literal_error", ("leaf",))

    class Five(Model):
        edition: Literal[5]

    assert [k for k, _, _ in issues_of({"edition": 5.0}, Five)] == ["literal_error"]
    assert [k for k, _, _ in issues_of({"edition": True}, Five)] == ["literal_error"]


def test_tagged_union_reports_missing_and_unknown_tags() -> None:
    found = issues_of({"name": "a", "nodes": {"x": {"size": 1}, "y": {"kind": "twig"}}})
    assert [(k, loc) for k, loc, _ in found] == [
        ("union_tag_not_found", ("nodes", "x")),
        ("union_tag_invalid", ("nodes", "y")),
    ]


def test_whole_model_check_runs_only_on_valid_fields_and_sees_the_context() -> None:
    assert issues_of({"low": 3, "high": 1}, Pair) == [("value_error", (), "low is above high")]
    assert Pair.validate({"low": 3, "high": 1}, context={"lenient": True}).low == 3
    assert [k for k, _, _ in issues_of({"low": "3", "high": 1}, Pair)] == ["int_type"]


def test_models_are_frozen_and_compare_by_value() -> None:
    pair = Pair(low=1, high=2)
    with pytest.raises(AttributeError):
        pair.low = 5  # type: ignore[misc]
    assert pair == Pair.validate({"low": 1, "high": 2})
    assert pair != Pair(low=1, high=3)
    with pytest.raises(TypeError, match="missing field 'high'"):
        Pair(low=1)
    with pytest.raises(TypeError, match="unknown fields"):
        Pair(low=1, high=2, mid=3)


def test_defaults_are_not_shared_between_instances() -> None:
    first, second = Doc.validate({"name": "a"}), Doc.validate({"name": "b"})
    assert first.tags is not second.tags


def test_fields_know_their_keys_and_examples() -> None:
    spec = Doc.field_for_key("name")
    assert spec is not None and spec.required and spec.examples == ('"x"',)
    assert Doc.field_for_key("missing") is None
    assert [s.key for s in Branch.schema_fields().values()] == ["kind", "leaves"]


def test_model_at_follows_tables_arrays_and_tags() -> None:
    data = {"nodes": {"x": {"kind": "branch"}, "y": {"kind": "?"}}, "pair": {}}
    assert model_at(Doc, data, ("pair",)) is Pair
    assert model_at(Doc, data, ("nodes", "x")) is Branch
    assert model_at(Doc, data, ("nodes", "y")) is None
    assert model_at(Doc, data, ("tags", 0)) is None
    assert model_at(Doc, data, ("nope",)) is None
