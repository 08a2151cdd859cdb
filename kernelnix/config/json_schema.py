"""JSON Schemas of build.toml and metadata.json, generated from the models.

`kernelnix schema build-toml|metadata` prints them, and kernelnix/data/schema/
ships them, so that an editor (taplo, Even Better TOML) checks build.toml as
it is typed. The schema holds every rule of the models, the patterns of the
value types included; what only the loader checks is what needs the project
directory or the raw text (paths inside the project, NUL characters), and the
details of git URLs that a pattern cannot say (see docs/build-toml.md).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import core_schema

from kernelnix.config.editions.probe import MODELS, PRE_EDITION_SHAPES

DIALECT = "https://json-schema.org/draft/2020-12/schema"

BUILD_TOML_DESCRIPTION = (
    "The build.toml of a kernel built by kernelnix (or kernel-builder): edition 5, or "
    "the pre-edition v4 and v3 shapes. Generated from kernelnix's models by "
    "`kernelnix schema build-toml`."
)


class SchemaGenerator(GenerateJsonSchema):
    """pydantic's generator without a title on each property (the key is its name),
    and with tagged unions an editor reports well."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def tagged_union_schema(self, schema: core_schema.TaggedUnionSchema) -> dict[str, Any]:
        # pydantic writes `oneOf` with an OpenAPI `discriminator`, which validators
        # ignore: a mistake in a kernel table would read "not valid under any of the
        # schemas". Here the tag selects its member's schema, whose errors are reported.
        tag = self._extract_discriminator(schema, [])
        assert tag is not None, "kernelnix's tagged unions are tagged by one key"
        members = {
            str(value): self.generate_inner(choice) for value, choice in schema["choices"].items()
        }
        return {
            "type": "object",
            "required": [tag],
            "properties": {tag: {"enum": list(members)}},
            "allOf": [
                {"if": {"properties": {tag: {"const": value}}}, "then": member}
                for value, member in members.items()
            ],
        }


class TomlSchemaGenerator(SchemaGenerator):
    """For build.toml: TOML has no null, so an optional key is just its type."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> dict[str, Any]:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> dict[str, Any]:
        if schema.get("default", ...) is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


def build_toml_schema() -> dict[str, Any]:
    """The schema of every edition: `edition` selects edition 5, as the loader does;
    a file without it is one of the pre-edition shapes."""
    refs, definitions = models_json_schema(
        [(model, "validation") for model in MODELS.values()],
        schema_generator=TomlSchemaGenerator,
    )
    edition5 = refs[(MODELS["5"], "validation")]
    pre_edition = [refs[(MODELS[shape], "validation")] for shape in PRE_EDITION_SHAPES]
    return {
        "$schema": DIALECT,
        "title": "build.toml",
        "description": BUILD_TOML_DESCRIPTION,
        "type": "object",
        "if": {"required": ["general"], "properties": {"general": {"required": ["edition"]}}},
        "then": edition5,
        "else": {"anyOf": pre_edition},
        **definitions,
    }


def document_schema(model: type[BaseModel], title: str) -> dict[str, Any]:
    """The schema of a JSON document validated by `model`."""
    schema = model.model_json_schema(by_alias=True, schema_generator=SchemaGenerator)
    return {"$schema": DIALECT, **schema, "title": title}
