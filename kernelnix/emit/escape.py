"""How values from build.toml reach generated text: one function per language.

CMake: `cmake_bracket`. TOML: `toml_string` (a JSON string is a TOML basic
string). Python: `python_string` (a `repr` literal).

The one way a value reaches CMake is a bracket argument.

`cmake_bracket("-DX=\"a b\"")` is `[=[-DX="a b"]=]`: CMake takes the text between
the brackets literally (no `${}` expansion, no escapes, no `)` or `"` parsing),
and the bracket length is chosen so the closing bracket never occurs in the
value. What a bracket argument cannot protect is rejected instead of passed on:

- control characters (newline, carriage return, tab, NUL, ...): a newline would
  end a compiler command line, and one right after the opening bracket is
  dropped by CMake;
- `;`: CMake splits every list-valued property (sources, include directories,
  compile options) on it, so the value would arrive as two;
- `$<`: source, include and option properties evaluate generator expressions;
- a variable reference (`${`, `$ENV{`, `$CACHE{`): CMake still expands these in
  source file names (its legacy expansion), after the bracket argument;
- an unclosed `[`: CMake does not split a list on `;` inside square brackets,
  so the values after it would be glued to it.

Paths (sources, include directories) are held to more: CMake writes object
file paths into Ninja's shell commands unquoted, so a path may only use
letters, digits, space and `_ . + - / @ = , ~`.
"""

from __future__ import annotations

import json
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_VARIABLE = re.compile(r"\$[A-Z]*\{")
_PATH = re.compile(r"[A-Za-z0-9 _.+\-/@=,~]*")


class UnsafeCMakeValue(ValueError):
    """A value that cannot reach CMake verbatim."""


def _unclosed_bracket(value: str) -> bool:
    depth = 0
    for char in value:
        if char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
    return depth > 0


def cmake_problem(value: str, *, path: bool = False) -> str | None:
    """Why `value` cannot be passed to CMake verbatim, or None when it can."""
    if _CONTROL.search(value):
        return "contains a control character (newline, tab, ...)"
    if ";" in value:
        return "contains ';', which CMake treats as a list separator"
    if "$<" in value:
        return "contains '$<', which CMake evaluates as a generator expression"
    if _VARIABLE.search(value):
        return "contains a CMake variable reference ('${' ...), which CMake may expand"
    if _unclosed_bracket(value):
        return "contains an unclosed '[', which makes CMake merge it with the next value"
    if path and not _PATH.fullmatch(value):
        return (
            "is a path with a character CMake and Ninja cannot pass to the compiler; "
            "use letters, digits, space and _ . + - / @ = , ~"
        )
    return None


def cmake_bracket(value: object) -> str:
    """`value` as a CMake bracket argument; raises UnsafeCMakeValue (see module doc)."""
    text = str(value)
    problem = cmake_problem(text)
    if problem:
        raise UnsafeCMakeValue(f"{text!r} {problem}")
    equals = 0
    while f"]{'=' * equals}]" in text or text.endswith("]" + "=" * equals):
        equals += 1
    fence = "=" * equals
    return f"[{fence}[{text}]{fence}]"


def toml_string(value: object) -> str:
    """`value` as a TOML basic string."""
    return json.dumps(str(value))


def python_string(value: object) -> str:
    """`value` as a Python string literal."""
    return repr(str(value))


def nix_string(value: str) -> str:
    """`value` as a Nix string literal that evaluates to exactly `value`.

    Inside "..." Nix treats `\\` as an escape and `${` as interpolation, so
    every backslash, quote and dollar is escaped, and control characters are
    written as escapes: no value can end the string or run Nix code.
    """
    escapes = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return '"' + "".join(escapes.get(c, c) for c in value) + '"'
