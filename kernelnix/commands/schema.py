"""`kernelnix schema`: the JSON Schemas of build.toml and metadata.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from kernelnix.cli import main
from kernelnix.config.json_schema import build_toml_schema
from kernelnix.plan.metadata import metadata_schema

SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "build-toml": build_toml_schema,
    "metadata": metadata_schema,
}


def schema_text(document: str) -> str:
    """The schema of `document` as kernelnix prints and ships it
    (kernelnix/data/schema/<document>.schema.json)."""
    return json.dumps(SCHEMAS[document](), indent=2, ensure_ascii=False) + "\n"


@main.command("schema")
@click.argument("document", type=click.Choice(list(SCHEMAS)))
def schema_command(document: str) -> None:
    """Print the JSON Schema of build.toml or of metadata.json.

    Generated from the models kernelnix validates with; the same files ship in
    kernelnix/data/schema/. An editor that reads JSON Schemas (taplo, Even
    Better TOML) checks build.toml as you type: see docs/build-toml.md.

    \b
    Examples:
      kernelnix schema build-toml > build-toml.schema.json
      kernelnix schema metadata
    """
    click.echo(schema_text(document), nl=False)
