"""Violations and per-variant reports: human text and JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# Only errors fail a variant; warnings and notes (e.g. an optional import) are printed.
Severity = Literal["error", "warning", "note"]

# The pseudo-file for findings about the variant as a whole (e.g. the import check).
VARIANT_FILE = "."


@dataclass(frozen=True)
class Violation:
    """One broken rule: where, what was found, the limit, and how to fix it."""

    rule: str
    file: str  # relative to the variant directory, `/`-separated; "." = the variant
    subject: str  # the symbol, library, key or module concerned
    found: str
    limit: str
    fix: str
    line: int | None = None
    severity: Severity = "error"

    def location(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def describe(self) -> str:
        return f"{self.subject}: {self.found}" + (f" (limit: {self.limit})" if self.limit else "")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rule": self.rule,
            "severity": self.severity,
            "subject": self.subject,
            "found": self.found,
            "limit": self.limit,
            "fix": self.fix,
        }
        if self.line is not None:
            data["line"] = self.line
        return data


@dataclass
class CheckReport:
    """The outcome of checking one variant directory."""

    variant_dir: Path
    settings: dict[str, Any] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files_checked: list[str] = field(default_factory=list)

    @property
    def variant(self) -> str:
        return self.variant_dir.name

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def by_file(self) -> dict[str, list[Violation]]:
        """Violations grouped per file, files in path order, the variant itself first."""
        groups: dict[str, list[Violation]] = {}
        for violation in sorted(self.violations, key=_sort_key):
            groups.setdefault(violation.file, []).append(violation)
        return groups

    def summary(self) -> str:
        errors = self.errors
        severities = Counter(v.severity for v in self.violations)
        tail = "".join(
            f", {_counted(severities[severity], severity)}"
            for severity in ("warning", "note")
            if severities[severity]
        )
        if not errors:
            return f"ok    {self.variant}: no violations ({len(self.files_checked)} files){tail}"
        files = _counted(len({v.file for v in errors}), "file")
        rules = Counter(v.rule for v in errors)
        per_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items()))
        violations = _counted(len(errors), "violation")
        return f"FAIL  {self.variant}: {violations} in {files} ({per_rule}){tail}"

    def render(self) -> str:
        """Grouped per file, then per rule; each fix printed once per group."""
        lines = [f"{self.variant}  [{_settings_text(self.settings)}]"]
        for file, violations in self.by_file().items():
            lines.append(f"  {'(variant)' if file == VARIANT_FILE else file}")
            lines.extend(_render_group(violations))
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "path": str(self.variant_dir),
            "ok": self.ok,
            "settings": self.settings,
            "summary": self.summary(),
            "files": [
                {"file": file, "violations": [v.to_json() for v in violations]}
                for file, violations in self.by_file().items()
            ],
            "notes": list(self.notes),
            "files_checked": list(self.files_checked),
        }


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _sort_key(violation: Violation) -> tuple[int, str, str, int, str]:
    return (
        0 if violation.file == VARIANT_FILE else 1,
        violation.file,
        violation.rule,
        violation.line or 0,
        violation.subject,
    )


def _settings_text(settings: dict[str, Any]) -> str:
    parts = []
    for key, value in settings.items():
        if key == "policy-reason":
            continue
        if key == "policy" and settings.get("policy-reason"):
            parts.append(f"policy {value} ({settings['policy-reason']})")
        elif value is True:
            parts.append(key)
        elif value is False:
            parts.append("local" if key == "redistributable" else f"no {key}")
        elif value is not None:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def _render_group(violations: list[Violation]) -> list[str]:
    lines: list[str] = []
    index = 0
    while index < len(violations):
        # Consecutive violations of one rule with the same fix share one fix line.
        first = violations[index]
        end = index
        while (
            end < len(violations)
            and violations[end].rule == first.rule
            and violations[end].fix == first.fix
        ):
            end += 1
        for violation in violations[index:end]:
            where = f"line {violation.line}: " if violation.line is not None else ""
            marker = "" if violation.severity == "error" else f"{violation.severity} "
            text = violation.describe().replace("\n", "\n        ")
            lines.append(f"    {marker}[{violation.rule}] {where}{text}")
        if first.fix:
            lines.append(f"      fix: {first.fix}")
        index = end
    return lines


def render_reports(reports: list[CheckReport]) -> str:
    """All reports, then one line for the whole tree when there are several."""
    text = "\n\n".join(report.render() for report in reports)
    if len(reports) > 1:
        failed = sum(not r.ok for r in reports)
        text += f"\n\n{len(reports)} variants checked: {len(reports) - failed} ok, {failed} failed"
    return text


def reports_json(reports: list[CheckReport]) -> dict[str, Any]:
    return {"ok": all(r.ok for r in reports), "variants": [r.to_json() for r in reports]}
