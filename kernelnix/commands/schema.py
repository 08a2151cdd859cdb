"""`kernelnix schema`: the JSON Schemas of build.toml, metadata.json, the plan and the
host record."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from kernelnix.cli import command
from kernelnix.config.json_schema import build_toml_schema
from kernelnix.config.markdown import markdown_tables
from kernelnix.host.record import host_record_schema
from kernelnix.plan.metadata import metadata_schema
from kernelnix.plan.model import plan_schema

SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "build-toml": build_toml_schema,
    "metadata": metadata_schema,
    "plan": plan_schema,
    "host-record": host_record_schema,
}


def schema_text(document: str) -> str:
    """The schema of `document` as kernelnix prints and ships it
    (kernelnix/data/schema/<document>.schema.json)."""
    return json.dumps(SCHEMAS[document](), indent=2, ensure_ascii=False) + "\n"


def key_tables_text() -> str:
    """build.toml's key tables in Markdown, each under its name."""
    tables = markdown_tables(build_toml_schema())
    return "\n".join(f"## {name}\n\n{table}" for name, table in tables.items())


@command("schema")
@click.argument("document", type=click.Choice(list(SCHEMAS)))
@click.option(
    "--markdown",
    is_flag=True,
    help="Print build.toml's key tables instead, as docs/build-toml.md has them.",
)
def schema_command(document: str, markdown: bool) -> None:
    """Generated from the models kernelnix validates with; the same files ship in
    kernelnix/data/schema/. `plan` and `host-record` are the files Python writes
    for Nix (kernelnix-plan.json, kernelnix-host.json). An editor that reads JSON
    Schemas (taplo, Even Better TOML) checks build.toml as you type: see
    docs/build-toml.md.

    \b
    Examples:
      kernelnix schema build-toml > build-toml.schema.json
      kernelnix schema metadata
      kernelnix schema plan
      kernelnix schema build-toml --markdown
    """
    if markdown and document != "build-toml":
        raise click.UsageError("--markdown: only build-toml has key tables")
    click.echo(key_tables_text() if markdown else schema_text(document), nl=False)
