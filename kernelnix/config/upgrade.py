"""Upgrade pre-edition build.toml documents to edition 5.

The same functions edit a plain dict (in-memory upgrade while loading) and a
tomlkit document (`kernelnix update-build`, which keeps comments and key
order), so both paths cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

Document = MutableMapping[str, Any]


def _upgrade_v4(doc: Document, new_table: Callable[[], Any]) -> None:
    """v4 -> 5 is one-to-one; a string stable-abi already means every backend."""
    doc["general"]["edition"] = 5


def _upgrade_v3(doc: Document, new_table: Callable[[], Any]) -> None:
    """v3 -> 5: version defaults to 1; no framework section meant noarch."""
    general = doc["general"]
    if "version" not in general:
        general["version"] = 1
    if not any(section in doc for section in ("torch", "tvm-ffi", "torch-noarch")):
        doc["torch-noarch"] = new_table()
    _upgrade_v4(doc, new_table)


UPGRADES: dict[str, Callable[[Document, Callable[[], Any]], None]] = {
    "v4": _upgrade_v4,
    "v3": _upgrade_v3,
}


def upgrade_document(doc: Document, shape: str, new_table: Callable[[], Any] = dict) -> Document:
    """Upgrade `doc` (of `shape` "v3" or "v4") to edition 5 in place and return it."""
    UPGRADES[shape](doc, new_table)
    return doc
