"""kernelnix.config.base and .issues: strict kebab-case models, and pydantic's errors
as problems of a file (key path without union tags, the model there, plain words)."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field, PlainSerializer, PlainValidator, ValidationError, model_validator

from kernelnix.config.base import FileModel
from kernelnix.config.issues import Issue, field_for_key, issues_of


def _upper(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a name")
    return value.upper()


Name = Annotated[str, PlainValidator(_upper), PlainSerializer(str.lower)]


class Leaf(FileModel):
    kind: Literal["leaf"]
    size: Annotated[int, Field(ge=0)] = 0


class Branch(FileModel):
    kind: Literal["branch"]
    leaves: list[str] = Field([])


class Pair(FileModel):
    low: int
    high: int

    @model_validator(mode="after")
    def _ordered(self) -> Pair:
        if self.low > self.high:
            raise ValueError("low is above high")
        return self


class Doc(FileModel):
    name: Name = Field(examples=["x"])
    enabled: bool = True
    tags: list[str] = Field([])
    pair: Pair | None = None
    nodes: dict[str, Annotated[Leaf | Branch, Field(discriminator="kind")]] = Field({})
    cuda_flags: list[str] = Field([])


def problems(data: object, model: type[FileModel] = Doc) -> list[Issue]:
    with pytest.raises(ValidationError) as info:
        model.validate(data)
    return issues_of(info.value, model)


def kinds(data: object, model: type[FileModel] = Doc) -> list[tuple[str, tuple[str | int, ...]]]:
    return sorted((issue.kind, issue.loc) for issue in problems(data, model))


def test_a_valid_document_round_trips_with_file_keys() -> None:
    doc = Doc.validate(
        {
            "name": "relu",
            "cuda-flags": ["-O3"],
            "pair": {"low": 1, "high": 2},
            "nodes": {"x": {"kind": "leaf", "size": 3}, "y": {"kind": "branch"}},
        }
    )
    assert doc.name == "RELU"
    assert isinstance(doc.nodes["y"], Branch)
    assert doc.to_data(exclude_none=True) == {
        "name": "relu",  # the serializer runs on the way out
        "enabled": True,
        "tags": [],
        "pair": {"low": 1, "high": 2},
        "nodes": {"x": {"kind": "leaf", "size": 3}, "y": {"kind": "branch", "leaves": []}},
        "cuda-flags": ["-O3"],
    }
    assert Doc.validate({"name": "a"}).to_data()["pair"] is None
    assert Doc.file_keys() == ["name", "enabled", "tags", "pair", "nodes", "cuda-flags"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "a", "enabled": 1}, ("bool_type", ("enabled",))),
        ({"name": "a", "tags": "x"}, ("list_type", ("tags",))),
        ({"name": "a", "tags": ["x", 2.5]}, ("string_type", ("tags", 1))),
        ({"name": "a", "pair": {"low": True, "high": 2}}, ("int_type", ("pair", "low"))),
        ({"name": "a", "pair": {"low": 1.0, "high": 2}}, ("int_type", ("pair", "low"))),
        ({"name": "a", "pair": []}, ("model_type", ("pair",))),
        ({"name": "a", "nodes": []}, ("dict_type", ("nodes",))),
        ({"name": ""}, ("value_error", ("name",))),
        ({"name": "a", "nodes": {"x": {"kind": "leaf", "size": -1}}}, None),
    ],
)
def test_values_are_never_coerced(
    data: dict[str, object], expected: tuple[str, tuple] | None
) -> None:
    assert kinds(data) == [expected or ("greater_than_equal", ("nodes", "x", "size"))]


def test_every_problem_is_collected_in_plain_words() -> None:
    found = {
        (i.kind, i.loc): i.message for i in problems({"tags": [1], "x": 2, "pair": {"low": 1}})
    }
    assert found == {
        ("extra_forbidden", ("x",)): "unknown key",
        ("missing", ("name",)): "required key is missing",
        ("missing", ("pair", "high")): "required key is missing",
        ("string_type", ("tags", 0)): "expected a string, got integer 1",
    }


def test_only_the_kebab_case_spelling_is_a_key() -> None:
    assert kinds({"name": "a", "cuda_flags": []}) == [("extra_forbidden", ("cuda_flags",))]


def test_literals_are_strict_and_name_their_choices() -> None:
    (issue,) = problems({"kind": "leaves"}, Leaf)
    assert (issue.kind, issue.choices) == ("literal_error", ("leaf",))
    assert issue.message == "expected one of 'leaf', got string 'leaves'"

    class Five(FileModel):
        edition: Literal[5]

    assert kinds({"edition": True}, Five) == [("literal_error", ("edition",))]
    # An integral float is the integer to a Literal (as to JSON Schema); the loader
    # refuses `edition = 5.0` before validating (tests/data/configs/bad/edition-float).
    assert Five.validate({"edition": 5.0}).edition == 5


def test_a_tagged_union_leaves_its_tag_out_of_the_key_path() -> None:
    (issue,) = problems({"name": "a", "nodes": {"x": {"kind": "branch", "leavs": []}}})
    assert (issue.kind, issue.loc, issue.owner) == (
        "extra_forbidden",
        ("nodes", "x", "leavs"),
        Branch,
    )
    assert kinds({"name": "a", "nodes": {"x": {"size": 1}, "y": {"kind": "twig"}, "z": "?"}}) == [
        ("model_attributes_type", ("nodes", "z")),
        ("union_tag_invalid", ("nodes", "y")),
        ("union_tag_not_found", ("nodes", "x")),
    ]


def test_a_missing_key_names_the_table_it_belongs_to() -> None:
    (issue,) = problems({"name": "a", "pair": {"low": 1}})
    assert (issue.kind, issue.loc, issue.owner) == ("missing", ("pair", "high"), Pair)
    info = field_for_key(Doc, "name")
    assert info is not None and info.examples == ["x"]
    assert field_for_key(Doc, "cuda_flags") is None
    assert field_for_key(Doc, "cuda-flags") is not None


def test_a_check_across_fields_runs_when_they_are_valid() -> None:
    (issue,) = problems({"low": 3, "high": 1}, Pair)
    assert (issue.kind, issue.loc, issue.message) == ("value_error", (), "low is above high")
    assert kinds({"low": "3", "high": 1}, Pair) == [("int_type", ("low",))]


def test_models_are_frozen_and_compare_by_value() -> None:
    pair = Pair.validate({"low": 1, "high": 2})
    with pytest.raises(ValidationError, match="frozen"):
        pair.low = 5  # type: ignore[misc]
    assert pair == Pair(low=1, high=2)
    assert pair != Pair(low=1, high=3)


def test_defaults_are_not_shared_between_instances() -> None:
    first, second = Doc.validate({"name": "a"}), Doc.validate({"name": "b"})
    assert first.tags is not second.tags


def test_validators_are_built_on_first_use() -> None:
    class Late(FileModel):
        value: int

    assert not Late.__pydantic_complete__
    Late.validate({"value": 1})
    assert Late.__pydantic_complete__
