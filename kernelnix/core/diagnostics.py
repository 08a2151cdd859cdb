"""User-facing problems: one record per problem, reported all at once.

Every error a user sees names the file, the key path, the line (where known),
what was found and expected, and how to fix it. Commands raise `UserError`
with a list of diagnostics; the CLI prints them and exits with code 2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Diagnostic:
    """One problem (or warning) found in a user's input."""

    message: str
    file: str | None = None
    key: str | None = None
    line: int | None = None
    fix: str | None = None
    severity: str = "error"

    def location(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key:
            parts.append(self.key)
        return ": ".join(parts)

    def render(self) -> str:
        where = self.location()
        text = (
            f"{self.severity}: {where}: {self.message}"
            if where
            else (f"{self.severity}: {self.message}")
        )
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def format_key_path(path: Sequence[str | int]) -> str:
    """A key path as diagnostics show it: `kernel.relu.src[2]`, `kernel."a.b".src`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # A quoted key is written as TOML (and JSON) spell it: escapes included.
            text = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            out += f".{text}" if out else text
    return out


class ConfigValueError(ValueError):
    """A build.toml value that a later stage cannot use, with its key path."""

    def __init__(self, message: str, key: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.fix = fix

    def diagnostic(self, file: str) -> Diagnostic:
        return Diagnostic(str(self), file=file, key=self.key, fix=self.fix)


@dataclass
class UserError(Exception):
    """Bad input: carries every diagnostic found, not just the first."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    @classmethod
    def single(cls, message: str, **where: object) -> UserError:
        return cls([Diagnostic(message, **where)])  # type: ignore[arg-type]

    def summary(self) -> str:
        errors = [d for d in self.diagnostics if d.severity == "error"]
        files = sorted({d.file for d in errors if d.file})
        noun = "error" if len(errors) == 1 else "errors"
        return f"{len(errors)} {noun}" + (f" in {', '.join(files)}" if files else "")

    def render(self) -> str:
        return "\n".join([*(d.render() for d in self.diagnostics), self.summary()])


def diagnostics_json(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2)


def display_path(path: Path) -> str:
    """A path as the user should see it: relative to the cwd when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
