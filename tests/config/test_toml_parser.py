"""The TOML parser build.toml is read with reads what the standard library's
`tomllib` reads, in the same order, and refuses what it refuses with the same
message: an rtoml release that read another TOML version, or a file that rtoml
wrongly refuses (good/dotted-and-inline-tables), would change what kernelnix
accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paths import EXAMPLES, ROOT, TESTS

from kernelnix.config import toml_parser

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

FILES = sorted(
    [
        *EXAMPLES.glob("*/build.toml"),
        *(TESTS / "data" / "configs").glob("**/build.toml"),
    ]
)
# TOML 1.1 spellings, which TOML 1.0 (tomllib, kernel-builder) refuses.
TOML_1_1 = ["a = {x = 1,\n y = 2}", 'a = "\\e"', 'a = "\\xff"', "a = 07:32", "a = {x = 1,}"]


def _outcome(parse: object, text: str) -> object:
    try:
        return parse(text)  # type: ignore[operator]
    except (tomllib.TOMLDecodeError, toml_parser.TOMLDecodeError) as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_config_parses_as_tomllib_parses_it(path: Path) -> None:
    text = path.read_bytes().decode("utf-8", "replace").removeprefix("\ufeff")
    ours, theirs = _outcome(toml_parser.loads, text), _outcome(tomllib.loads, text)
    assert ours == theirs
    assert json.dumps(ours, default=str) == json.dumps(theirs, default=str)  # key order too


@pytest.mark.parametrize("text", TOML_1_1)
def test_toml_1_1_is_refused_as_tomllib_refuses_it(text: str) -> None:
    ours = _outcome(toml_parser.loads, text)
    assert isinstance(ours, str) and ours.startswith("error: ")
    assert ours == _outcome(tomllib.loads, text)
