"""Patterns: `"b c (h w) -> b h w c"`, one side per axis list, groups in parentheses."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import EinliteError

_TOKEN = re.compile(r"\(|\)|[A-Za-z_][A-Za-z0-9_]*|\S")


@dataclass(frozen=True)
class Pattern:
    left: list[list[str]]  # one group of axis names per input dimension
    right: list[list[str]]

    def names(self, side: list[list[str]]) -> list[str]:
        return [name for group in side for name in group]


def parse_pattern(text: str) -> Pattern:
    if text.count("->") != 1:
        raise EinliteError(f"pattern {text!r} needs exactly one '->'")
    left, right = text.split("->")
    return Pattern(_parse_side(left, text), _parse_side(right, text))


def _parse_side(side: str, pattern: str) -> list[list[str]]:
    groups: list[list[str]] = []
    open_group: list[str] | None = None
    for token in _TOKEN.findall(side):
        if token == "(" and open_group is None:
            open_group = []
        elif token == ")" and open_group is not None:
            groups.append(open_group)
            open_group = None
        elif token.isidentifier() and open_group is None:
            groups.append([token])
        elif token.isidentifier():
            open_group.append(token)
        else:
            raise EinliteError(f"unexpected {token!r} in pattern {pattern!r}")
    if open_group is not None:
        raise EinliteError(f"unclosed '(' in pattern {pattern!r}")
    names = [name for group in groups for name in group]
    if len(set(names)) != len(names):
        raise EinliteError(f"an axis name repeats in {side.strip()!r} of {pattern!r}")
    return groups
