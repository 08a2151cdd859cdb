"""The shared Jinja2 environment: templates live in the package, `kernelnix/templates/`.

Templates render text; Python never concatenates CMake or Nix by hand. Values
from build.toml pass through the filter of the target language (`cmake`,
`toml`, `py`: kernelnix.emit.escape).
Undefined template variables are errors, never empty strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelnix.emit.escape import cmake_bracket, python_string, toml_string

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


@cache
def environment() -> jinja2.Environment:
    # Imported when the first template renders: check-config, which imports the
    # CMake project's value checks, renders none.
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cmake"] = cmake_bracket
    env.filters["toml"] = toml_string
    env.filters["py"] = python_string
    return env


def render(name: str, context: Mapping[str, Any]) -> str:
    """Render `kernelnix/templates/<name>` with `context`."""
    return environment().get_template(name).render(**context)
