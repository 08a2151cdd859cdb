"""Line numbers for TOML key paths.

The TOML parser gives values without positions, so error messages would lose the
line. This is a small, forgiving scanner over the raw text that records the
line where each key (and each element of a multi-line array) starts. It only
has to be good enough to point at the right line; the real parsing is done by
`toml_parser`.
"""

from __future__ import annotations

import re

from kernelnix.config import toml_parser

KeyPath = tuple[str | int, ...]

_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY_PART = re.compile(rf"\s*({_BARE_KEY}|{_QUOTED_KEY})\s*")


def _split_dotted_key(text: str) -> list[str] | None:
    """`a."b.c".d` -> ["a", "b.c", "d"]; None when `text` is not a key."""
    parts: list[str] = []
    pos = 0
    while True:
        match = _KEY_PART.match(text, pos)
        if not match:
            return None
        raw = match.group(1)
        parts.append(_unquote(raw) if raw[0] in "\"'" else raw)
        pos = match.end()
        if pos == len(text):
            return parts
        if text[pos] != ".":
            return None
        pos += 1


def _unquote(raw: str) -> str:
    """A quoted key's text, its escapes resolved as TOML resolves them."""
    try:
        return str(toml_parser.loads(f"k = {raw}")["k"])
    except toml_parser.TOMLDecodeError:
        return raw[1:-1]


def _header_key(text: str, close: str) -> list[str] | None:
    """The key of a table header's inside, `text` starting after `[` or `[[`: up to the
    first `close` outside quotes (`[kernel."a]b"]` has the key `kernel`, `a]b`)."""
    in_quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if in_quote:
            if escaped:
                escaped = False
            elif ch == "\\" and in_quote == '"':
                escaped = True
            elif ch == in_quote:
                in_quote = None
        elif ch in "\"'":
            in_quote = ch
        elif text.startswith(close, i):
            return _split_dotted_key(text[:i].strip())
    return None


def _find_assignment(line: str) -> tuple[list[str], int] | None:
    """Split `key = value` into the key parts and the offset of the value."""
    in_quote: str | None = None
    for i, ch in enumerate(line):
        if in_quote:
            if ch == in_quote:
                in_quote = None
        elif ch in "\"'":
            in_quote = ch
        elif ch == "=":
            key = _split_dotted_key(line[:i].strip())
            return (key, i + 1) if key else None
        elif ch == "#":
            return None
    return None


class _ArrayScanner:
    """Tracks element start lines of a (possibly multi-line) array value."""

    def __init__(self, path: KeyPath) -> None:
        self.path = path
        self.depth = 0
        self.index = 0
        self.expect_element = True
        self.in_string: str | None = None

    def feed(self, text: str, line_no: int, positions: dict[KeyPath, int]) -> bool:
        """Consume text; returns True when the outer array closed."""
        i = 0
        while i < len(text):
            ch = text[i]
            if self.in_string:
                if ch == "\\" and self.in_string == '"':
                    i += 2
                    continue
                if ch == self.in_string:
                    self.in_string = None
            elif ch == "#":
                return False
            elif ch in " \t\r\n":
                pass
            elif ch in "[{":
                if self.depth == 1 and self.expect_element:
                    self._mark(line_no, positions)
                self.depth += 1
            elif ch in "]}":
                self.depth -= 1
                if self.depth == 0:
                    return True
            elif ch == ",":
                if self.depth == 1:
                    self.index += 1
                    self.expect_element = True
            else:
                if self.depth == 1 and self.expect_element:
                    self._mark(line_no, positions)
                if ch in "\"'":
                    self.in_string = ch
            i += 1
        return False

    def _mark(self, line_no: int, positions: dict[KeyPath, int]) -> None:
        positions.setdefault((*self.path, self.index), line_no)
        self.expect_element = False


def toml_lines(text: str) -> list[str]:
    """`text`'s lines as TOML counts them: only LF (or CRLF) ends a line, where
    str.splitlines also breaks at characters TOML allows in keys, strings and
    comments (U+0085, U+2028, U+2029), which would shift every line after them."""
    return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []


def key_lines(text: str) -> dict[KeyPath, int]:
    """Map every table, key and array element found in `text` to its 1-based line."""
    positions: dict[KeyPath, int] = {}
    table: KeyPath = ()
    array_tables: dict[KeyPath, int] = {}
    scanner: _ArrayScanner | None = None
    for line_no, line in enumerate(toml_lines(text), start=1):
        if scanner is not None:
            if scanner.feed(line, line_no, positions):
                scanner = None
            continue
        stripped = line.strip()
        if stripped.startswith("[["):
            parts = _header_key(stripped[2:], "]]")
            if parts:
                base = tuple(parts)
                index = array_tables[base] = array_tables.get(base, -1) + 1
                table = (*base, index)
                positions.setdefault(base, line_no)
                positions.setdefault(table, line_no)
            continue
        if stripped.startswith("["):
            parts = _header_key(stripped[1:], "]")
            if parts:
                table = tuple(parts)
                for depth in range(1, len(table) + 1):
                    positions.setdefault(table[:depth], line_no)
            continue
        assignment = _find_assignment(line)
        if assignment is None:
            continue
        key, value_at = assignment
        path = (*table, *key)
        for depth in range(len(table) + 1, len(path) + 1):
            positions.setdefault(path[:depth], line_no)
        value = line[value_at:].lstrip()
        if value.startswith("["):
            scanner = _ArrayScanner(path)
            if scanner.feed(value, line_no, positions):
                scanner = None
    return positions


def line_of(positions: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its longest located prefix."""
    for depth in range(len(path), 0, -1):
        line = positions.get(path[:depth])
        if line is not None:
            return line
    return None
