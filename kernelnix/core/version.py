"""Dotted version numbers as build.toml and variant names use them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering


@total_ordering
@dataclass(frozen=True)
class Version:
    """A dotted list of unsigned integers; trailing zero components are dropped.

    `Version.parse("12.0") == Version.parse("12")` and it prints as `12`, the
    way the reference tool compares and prints versions.
    """

    parts: tuple[int, ...]

    def __post_init__(self) -> None:
        parts = list(self.parts)
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        object.__setattr__(self, "parts", tuple(parts))

    @classmethod
    def parse(cls, text: str) -> Version:
        text = text.strip()
        if not text:
            raise ValueError("empty version string")
        pieces = text.split(".")
        if not all(p.isdigit() and p.isascii() for p in pieces):
            raise ValueError(f"version must consist of dot-separated numbers, got {text!r}")
        return cls(tuple(int(p) for p in pieces))

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.parts)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.parts < other.parts

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def descending(self) -> tuple[int, ...]:
        """Sort key that puts newer versions first (trailing zeros do not matter)."""
        return tuple(-p for p in (*self.parts, 0, 0, 0, 0)[:4])

    def major_minor(self) -> str:
        """`2.13`, `12.0`: always two components, as variant tables write them."""
        return f"{self.major}.{self.minor}"

    def flat(self) -> str:
        """Variant-name form: major and minor digits joined (`12.6` -> `126`)."""
        return f"{self.major}{self.minor}"
