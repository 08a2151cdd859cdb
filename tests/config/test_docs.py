"""docs/build-toml.md's key tables are the ones the models give (kernelnix.config.markdown):
the blocks between `<!-- keys: NAME -->` and `<!-- /keys -->` change only with
`pytest --update-golden`."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from paths import ROOT

from kernelnix.cli import main
from kernelnix.config.json_schema import build_toml_schema
from kernelnix.config.markdown import markdown_tables

DOC = ROOT / "docs" / "build-toml.md"
BLOCK = re.compile(r"(<!-- keys: (?P<name>.+?) -->\n)(?P<table>.*?)(<!-- /keys -->)", re.S)


def test_the_doc_has_every_table_once() -> None:
    names = [m["name"] for m in BLOCK.finditer(DOC.read_text())]
    assert names == list(markdown_tables(build_toml_schema()))


def test_the_docs_tables_are_the_models(request: pytest.FixtureRequest) -> None:
    tables = markdown_tables(build_toml_schema())
    text = DOC.read_text()
    generated = BLOCK.sub(lambda m: m[1] + tables[m["name"]] + m[4], text)
    if request.config.getoption("--update-golden"):
        DOC.write_text(generated)
    assert text == generated, "docs/build-toml.md's key tables differ: pytest --update-golden"


def test_kernelnix_schema_markdown_prints_them() -> None:
    result = CliRunner().invoke(main, ["schema", "build-toml", "--markdown"])
    assert result.exit_code == 0, result.output
    for name, table in markdown_tables(build_toml_schema()).items():
        assert f"## {name}\n\n{table}" in result.stdout


def test_only_build_toml_has_key_tables() -> None:
    result = CliRunner().invoke(main, ["schema", "metadata", "--markdown"])
    assert result.exit_code == 2
    assert "only build-toml has key tables" in result.output


def test_the_tables_say_what_differs_between_editions() -> None:
    tables = markdown_tables(build_toml_schema())
    assert "| `version` | integer ≥ 0 | required | 5, v4, v3 (optional) |" in tables["general"]
    assert "| `kernel-depends` | [kernel dependency] | `[]` | 5 |" in tables["general"]
    assert "| `cxx-flags` | [string] | `[]` | 5, v4 |" in tables["tvm-ffi"]
    assert "editions" not in tables["general.hub"]  # the same in every edition
    assert "| `rocm-archs` | [ROCm arch] | none | rocm |" in tables["kernel.<name>"]
    # A snake_case spelling is told in its key's row, not as a row of its own.
    assert "| `cuda_capabilities` |" not in tables["torch-noarch"]
