"""Read build.toml of every edition in use into the edition-5 `BuildConfig`.

The edition is found as the reference tool finds it (`editions/probe.py`). v4
and v3 files are upgraded in memory with a warning; unlike the reference, v3
files load when they carry what edition 5 needs. pydantic validates each
edition's model; every problem of a file is reported at once, each with its
key path, line and a fix.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelnix.config import toml_parser
from kernelnix.config.base import FileModel
from kernelnix.config.editions.probe import (
    MODELS,
    EditionError,
    declared_shape,
    upgrade_document,
)
from kernelnix.config.issues import EXPECTED, Issue, field_for_key, issues_of
from kernelnix.config.locate import KeyPath, key_lines, line_of, toml_lines
from kernelnix.config.model import FRAMEWORKS, KERNEL_MODELS, BuildConfig
from kernelnix.config.paths import ProjectFiles, declared_lists
from kernelnix.config.tables import BuildDocument
from kernelnix.config.types import BACKENDS, KERNEL_BACKENDS, EntryError, toml_type_name
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path, format_key_path

BUILD_TOML = "build.toml"


@dataclass
class LoadedConfig:
    """A validated config plus what the loader noticed on the way."""

    config: BuildConfig
    path: Path
    shape: str  # "5", "v4" or "v3": the shape the file was written in
    files: ProjectFiles  # the project's directories as listed while loading
    warnings: list[Diagnostic] = field(default_factory=list)


_KEY_PART = re.compile(r'\.?(?:("(?:[^"\\]|\\.)*")|([A-Za-z0-9_-]+))|\[(\d+)\]')


def parse_key_path(text: str) -> KeyPath:
    """The inverse of `format_key_path`: `kernel.relu.src[2]` -> ("kernel", "relu", "src", 2)."""
    parts: list[str | int] = []
    for quoted, bare, index in _KEY_PART.findall(text):
        parts.append(int(index) if index else json.loads(quoted) if quoted else bare)
    return tuple(parts)


def with_lines(loaded: LoadedConfig, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` with the line of each build.toml key path filled in."""
    file = display_path(loaded.path)
    missing = [d for d in diagnostics if d.key and d.line is None and d.file == file]
    if not missing:
        return diagnostics
    positions = key_lines(loaded.path.read_text(encoding="utf-8").removeprefix("\ufeff"))
    return [
        dataclasses.replace(d, line=line_of(positions, parse_key_path(d.key)))
        if d in missing and d.key
        else d
        for d in diagnostics
    ]


class _Reporter:
    """Builds diagnostics for one file, resolving key paths to lines."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text

    @cached_property
    def file(self) -> str:
        # Resolving paths takes a system call per part: valid files skip it too.
        return display_path(self.path)

    @cached_property
    def positions(self) -> dict[KeyPath, int]:
        # Only needed to report a problem: valid files skip the scan.
        positions = key_lines(self.text)
        # [torch-noarch] may spell its keys in snake_case; diagnostics use the kebab spelling.
        for path, line in list(positions.items()):
            if len(path) > 1 and path[0] == "torch-noarch" and isinstance(path[1], str):
                positions.setdefault((path[0], path[1].replace("_", "-"), *path[2:]), line)
        return positions

    def at(
        self, key: KeyPath, message: str, fix: str | None = None, severity: str = "error"
    ) -> Diagnostic:
        return Diagnostic(
            message,
            file=self.file,
            key=format_key_path(key) or None,
            line=line_of(self.positions, key),
            fix=fix,
            severity=severity,
        )

    def source_line(self, key: KeyPath) -> str:
        line = line_of(self.positions, key)
        return toml_lines(self.text)[line - 1] if line else ""


def build_toml_path(directory: Path) -> Path:
    """`<directory>/build.toml`; a path to a build.toml file is taken as it is."""
    return directory if directory.is_file() else directory / BUILD_TOML


def read_build_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The text and the parsed TOML of a build.toml, or a UserError."""
    if not path.exists():
        parent = display_path(path.parent)
        raise UserError.single(
            f"no {BUILD_TOML} in {parent}",
            file=display_path(path),
            fix="pass the kernel's directory, or create a project with `kernelnix init`",
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError.single(
            f"cannot read {BUILD_TOML}: {exc.strerror or exc}",
            file=display_path(path),
            fix=f"{BUILD_TOML} must be a readable file",
        ) from None
    try:
        # A UTF-8 byte-order mark is allowed, as upstream allows it.
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError.single(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            file=display_path(path),
            line=line,
            fix="build.toml must be a UTF-8 TOML text file",
        ) from None
    try:
        return text, toml_parser.loads(text)
    except toml_parser.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        error_line = int(match.group(1)) if match else len(toml_lines(text)) or None
        reason = message[: match.start()].strip() if match else message
        column = f", column {match.group(2)}" if match else ""
        raise UserError.single(
            f"TOML syntax error{column}: {reason}",
            file=display_path(path),
            line=error_line,
            fix="see https://toml.io for the syntax; strings need quotes, tables [brackets]",
        ) from None


def load_config(directory: Path) -> LoadedConfig:
    """Load and normalize `<directory>/build.toml` (or a build.toml path)."""
    path = build_toml_path(directory)
    text, raw = read_build_toml(path)
    return load_config_text(path, text, raw)


def load_config_text(path: Path, text: str, raw: dict[str, Any]) -> LoadedConfig:
    reporter = _Reporter(path, text)
    nul = [
        reporter.at(
            key,
            "a NUL character (\\u0000) is not allowed: no compiler argument, file name or "
            "Nix string can hold one (Nix would cut the value short)",
            fix="remove the \\u0000 escape",
        )
        for key in (_paths_with_nul(raw) if _may_hold_nul(text) else ())
    ]
    if nul:
        raise UserError(nul)
    general = raw.get("general")
    if not isinstance(general, dict):
        found = (
            "the [general] table is missing"
            if general is None
            else f"`general` must be a table, not {_a(toml_type_name(general))}"
        )
        raise UserError(
            [
                reporter.at(
                    ("general",),
                    found,
                    fix="start the file with [general] holding name, version, license, backends "
                    "and edition = 5 (see docs/build-toml.md)",
                )
            ]
        )
    try:
        shape = declared_shape(general)
    except EditionError as exc:
        raise UserError([reporter.at(("general", "edition"), str(exc), fix=exc.fix)]) from None
    if shape is None:
        return _load_pre_edition(reporter, raw)
    config, errors = _validate(reporter, raw, shape)
    if errors:
        raise UserError(errors)
    assert isinstance(config, BuildConfig)
    return _finish(reporter, config, shape, [])


def _may_hold_nul(text: str) -> bool:
    """Whether a value parsed from `text` may hold a NUL: only an escape writes one
    (TOML refuses the raw control character), so a file without one needs no search."""
    return "\\u0000" in text or "\\U00000000" in text or "\0" in text


def _paths_with_nul(value: Any, path: KeyPath = ()) -> Iterator[KeyPath]:
    """Key paths of every string (value or key) holding a NUL character."""
    if isinstance(value, str):
        if "\0" in value:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from [(*path, key)] if "\0" in key else _paths_with_nul(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths_with_nul(item, (*path, index))


def _load_pre_edition(reporter: _Reporter, raw: dict[str, Any]) -> LoadedConfig:
    _, v4_errors = _validate(reporter, raw, "v4")
    shape = "v4"
    if v4_errors:  # not v4: v3, or an edition-5 file without its `edition`
        v3, v3_errors = _validate(reporter, raw, "v3")
        if v3_errors:
            _, v5_errors = _validate(
                reporter, {**raw, "general": {**raw["general"], "edition": 5}}, "5"
            )
            if len(v5_errors) < len(v4_errors):
                # Fewer problems as edition 5: the author wrote edition 5 and forgot the key.
                raise UserError(
                    [
                        reporter.at(
                            ("general",),
                            "this file uses edition-5 features but has no `edition` key",
                            fix="add `edition = 5` to the [general] table",
                        ),
                        *v5_errors,
                    ]
                )
            raise UserError(v4_errors)
        shape = "v3"
        if v3.general.license is None:  # type: ignore[union-attr]
            raise UserError(
                [
                    reporter.at(
                        ("general",),
                        "this pre-edition (v3) file has no `license`, which edition 5 requires",
                        fix='add `license = "Apache-2.0"` (or your kernel\'s license) to '
                        "[general], then run `kernelnix update-build`",
                    )
                ]
            )
    upgraded = upgrade_document(copy.deepcopy(raw), shape)
    config, errors = _validate(reporter, upgraded, "5")
    if errors:  # the upgrade itself went wrong: a bug, but report it like input
        raise UserError(errors)
    assert isinstance(config, BuildConfig)
    # kernel-builder still reads v4 files, but no longer v3 ones.
    refused = "; kernel-builder refuses this format" if shape == "v3" else ""
    warning = reporter.at(
        (),
        f"build.toml uses the pre-edition {shape} format; it was upgraded to edition 5 in "
        f"memory{refused}",
        fix="run `kernelnix update-build` to write the upgrade (it keeps your comments)",
        severity="warning",
    )
    return _finish(reporter, config, shape, [warning])


def _finish(
    reporter: _Reporter, config: BuildConfig, shape: str, warnings: list[Diagnostic]
) -> LoadedConfig:
    """Checks that need the whole config and the project directory."""
    files = ProjectFiles(reporter.path.parent)
    errors = _escaping_paths(reporter, config, files)
    if errors:
        raise UserError(errors)
    return LoadedConfig(
        config,
        reporter.path,
        shape,
        files,
        [*warnings, *_edition5_warnings(reporter, config)],
    )


def _escaping_paths(
    reporter: _Reporter, config: BuildConfig, files: ProjectFiles
) -> list[Diagnostic]:
    return [
        reporter.at(
            (*key, index),
            f"path {values[index]!r} is outside the kernel project: {reason}",
            fix="use a path relative to the directory of build.toml, inside it",
        )
        for key, values, _ in declared_lists(config)
        for index, reason in files.escaping(values)
    ]


def _edition5_warnings(reporter: _Reporter, config: BuildConfig) -> list[Diagnostic]:
    warnings = []
    torch = config.torch
    if torch is not None and isinstance(torch.stable_abi, dict):
        for backend in torch.stable_abi:
            if backend not in config.backends:
                warnings.append(
                    reporter.at(
                        ("torch", "stable-abi", backend),
                        f"stable-abi entry for backend {backend!r}, which is not in "
                        "general.backends; it is ignored",
                        fix=f"add {backend!r} to general.backends or drop this entry",
                        severity="warning",
                    )
                )
    for name, kernel in config.kernel.items():
        if kernel.backend not in config.backends:
            warnings.append(
                reporter.at(
                    ("kernel", name, "backend"),
                    f"kernel {name!r} is for backend {kernel.backend!r}, which is not in "
                    "general.backends; it is not built",
                    fix=f"add {kernel.backend!r} to general.backends to build it",
                    severity="warning",
                )
            )
    return warnings


# ------------------------------------------------------------ validation


def _framework_problems(
    reporter: _Reporter,
    raw: Mapping[str, Any],
    model: type[BuildDocument],
) -> tuple[Mapping[str, Any], list[Diagnostic]]:
    """Check the framework sections; drop extra ones so they are reported once."""
    present = [f for f in model.frameworks if f in raw]
    if len(present) > 1:
        keep, *extra = present
        diagnostics = [
            reporter.at(
                (name,),
                f"[{name}] conflicts with [{keep}]: a kernel has exactly one framework section",
                fix=f"remove [{name}] or [{keep}]",
            )
            for name in extra
        ]
        return {k: v for k, v in raw.items() if k not in extra}, diagnostics
    if not present and model.framework_required:
        return raw, [
            reporter.at(
                (),
                "no framework section: add one of [torch] (compiled kernels), "
                "[torch-noarch] (Python-only kernels) or [tvm-ffi]",
                fix="add a [torch] table with src = [...] for a compiled kernel, or an empty "
                "[torch-noarch] table for a Python-only kernel",
            )
        ]
    return raw, []


def _validate(
    reporter: _Reporter,
    raw: Mapping[str, Any],
    shape: str,
) -> tuple[FileModel | None, list[Diagnostic]]:
    model = MODELS[shape]
    data, problems = _framework_problems(reporter, raw, model)
    try:
        config = model.validate(data)
    except ValidationError as exc:
        problems += [_diagnose(reporter, issue) for issue in issues_of(exc, model)]
        return None, _sorted_unique(problems)
    return (None, problems) if problems else (config, [])


def _sorted_unique(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(dict.fromkeys(diagnostics), key=lambda d: d.line or 0)


def _diagnose(reporter: _Reporter, issue: Issue) -> Diagnostic:
    loc, kind, value = issue.loc, issue.kind, issue.value
    if kind == "extra_forbidden":
        return _unknown_key(reporter, issue)
    if kind == "missing":
        return _missing_key(reporter, issue)
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        kernel = loc[:2]
        found = value.get("backend") if isinstance(value, dict) else None
        detail = "has no `backend` key" if found is None else f"has backend {found!r}"
        return reporter.at(
            (*kernel, "backend"),
            f"kernel {kernel[-1]!r} {detail}; expected one of: {', '.join(KERNEL_BACKENDS)}",
            fix='set `backend = "cuda"` (or cpu, metal, rocm, xpu) in the kernel table',
        )
    if kind == "literal_error":
        return _bad_choice(reporter, loc, value, issue.choices)
    if kind == "value_error":
        if isinstance(issue.error, EntryError):  # a problem with one entry of a table value
            loc, value = (*loc, issue.error.key), issue.error.value
        return reporter.at(loc, issue.message, fix=_float_fix(reporter, loc, value))
    if kind in EXPECTED:
        fix = _float_fix(reporter, loc, value) if kind == "string_type" else None
        if kind == "int_type" and isinstance(value, float) and value.is_integer():
            fix = f"write a whole number without a decimal point: {loc[-1]} = {int(value)}"
        return reporter.at(loc, issue.message, fix=fix)
    if kind == "greater_than_equal":
        return reporter.at(loc, f"expected a non-negative integer, got {value!r}")
    return reporter.at(loc, issue.message)


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _float_fix(reporter: _Reporter, loc: KeyPath, value: object) -> str | None:
    """For `minver = 12.10`, show the quoted spelling from the source line ("12.10")."""
    if not isinstance(value, float):
        return None
    if loc and isinstance(loc[-1], int):  # an array element
        return f'quote each element: "{value!r}"'
    line = reporter.source_line(loc)
    key = str(loc[-1]) if loc else ""
    # `key = 12.10` anywhere on the line: also inside an inline table `{cuda = 2.10}`.
    literal = re.search(rf"(?:^|[\s{{,.]){re.escape(key)}\s*=\s*([-+0-9._eE]+)", line)
    text = literal.group(1) if literal else repr(value)
    return f'quote it: {key} = "{text}"'


def _bad_choice(
    reporter: _Reporter, loc: KeyPath, value: object, literals: tuple[object, ...]
) -> Diagnostic:
    choices = [str(c) for c in literals]
    if not isinstance(value, str):
        return reporter.at(
            loc,
            f"expected a string, one of: {', '.join(choices)}; got "
            f"{toml_type_name(value)} {value!r}",
        )
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.5)
    what = "backend" if set(choices) <= set(BACKENDS) else "value"
    if "depends" in loc:
        what = "dependency"
    return reporter.at(
        loc,
        f"unknown {what} {value!r}; expected one of: {', '.join(choices)}",
        fix=f"did you mean {close[0]!r}?" if close else None,
    )


# ------------------------------------------------- unknown and missing keys


def _keys_of(model: type[FileModel]) -> list[str]:
    return [k for k in model.file_keys() if k != "backend"]


def _unknown_key(reporter: _Reporter, issue: Issue) -> Diagnostic:
    loc = issue.loc
    key = str(loc[-1])
    valid = _keys_of(issue.owner) if issue.owner else []
    table = format_key_path(loc[:-1])
    where = f"[{table}]" if table else "the top level"
    if not loc[:-1]:
        valid = ["general", *FRAMEWORKS, "kernel"]
    message = f"unknown key `{key}` in {where}"
    if loc[0] == "kernel" and len(loc) == 3:
        owners = [b for b, m in KERNEL_MODELS.items() if key in _keys_of(m)]
        if owners:
            message += f"; `{key}` applies only to {' and '.join(owners)} kernels"
    hint = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if not hint and "_" in key and key.replace("_", "-") in valid:
        hint = [key.replace("_", "-")]
    fix = f"did you mean `{hint[0]}`? " if hint else ""
    return reporter.at(loc, message, fix=fix + f"valid keys here: {', '.join(valid)}")


def _missing_key(reporter: _Reporter, issue: Issue) -> Diagnostic:
    loc = issue.loc
    key = str(loc[-1])
    info = field_for_key(issue.owner, key) if issue.owner is not None else None
    example = info.examples[0] if info is not None and info.examples else None
    table = format_key_path(loc[:-1])
    # The examples are JSON values; those of build.toml's keys are spelled the same in TOML.
    fix = f"add `{key} = {json.dumps(example)}` to [{table}]" if example and table else None
    if not table:
        fix = f"add a [{key}] table"
    return reporter.at(
        loc, f"required key `{key}` is missing" + (f" in [{table}]" if table else ""), fix=fix
    )
