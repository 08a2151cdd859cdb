"""`kernelnix update-build`: rewrite a pre-edition build.toml as edition 5.

The file is edited with tomlkit, so comments and key order survive, and is
replaced atomically (temp file + rename): a failed run leaves it untouched.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from kernelnix.config.editions.probe import upgrade_document
from kernelnix.config.load import (
    BUILD_TOML,
    build_toml_path,
    load_config_text,
    read_build_toml,
)
from kernelnix.core.diagnostics import UserError, display_path
from kernelnix.core.fileio import write_atomic


@dataclass(frozen=True)
class BuildUpdate:
    path: Path
    shape: str
    old_text: str
    new_text: str

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    def diff(self) -> str:
        name = display_path(self.path)
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )


def plan_update(directory: Path) -> BuildUpdate:
    """Work out the edition-5 text of a build.toml; raises UserError for bad input."""
    path = build_toml_path(directory)
    text, raw = read_build_toml(path)
    loaded = load_config_text(path, text, raw)
    if loaded.shape == "5":
        return BuildUpdate(path, loaded.shape, text, text)
    document = tomlkit.parse(text)
    upgrade_document(document, loaded.shape, new_table=tomlkit.table)
    new_text = tomlkit.dumps(document)
    if "\r\n" in text:  # tomlkit writes added lines with "\n"; keep the file's CRLF style
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    # The rewrite must load as edition 5 with the same meaning.
    rewritten = load_config_text(path, new_text, tomlkit.parse(new_text).unwrap())
    assert rewritten.config == loaded.config, "update-build changed the meaning of build.toml"
    return BuildUpdate(path, loaded.shape, text, new_text)


def apply_update(update: BuildUpdate) -> None:
    if not update.changed:
        return
    try:
        write_atomic(update.path, update.new_text)
    except OSError as exc:  # read-only directory, full disk: the old file is still intact
        raise UserError.single(
            f"cannot write {BUILD_TOML}: {exc.strerror or exc}; the file was left unchanged",
            file=display_path(update.path),
        ) from None
