"""Which edition a build.toml is written in, the model of each, and the upgrades
that take a pre-edition file to edition 5.

Detection follows the reference tool: `general.edition = 5` selects edition 5,
any other edition is an error, and a file without `edition` is a pre-edition
file: v4 if it validates as v4, else v3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernelnix.config.editions import v3, v4
from kernelnix.config.editions.v3 import Document
from kernelnix.config.model import BuildConfig
from kernelnix.config.tables import BuildDocument
from kernelnix.config.types import toml_type_name

SUPPORTED_EDITIONS = (5,)
PRE_EDITION_SHAPES = ("v4", "v3")  # tried in this order

# Shape -> its model: "5" is edition 5; "v4" and "v3" the pre-edition shapes.
MODELS: dict[str, type[BuildDocument]] = {
    "5": BuildConfig,
    "v4": v4.BuildConfigV4,
    "v3": v3.BuildConfigV3,
}
_UPGRADES: dict[str, tuple[Callable[[Document, Callable[[], Any]], None], ...]] = {
    "v4": (v4.upgrade,),
    "v3": (v3.upgrade, v4.upgrade),
}


class EditionError(ValueError):
    """`general.edition` is not an edition kernelnix reads; `fix` says what to write."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def declared_shape(general: Mapping[str, Any]) -> str | None:
    """The shape a [general] table declares: "5" for edition 5, None for a
    pre-edition file (only validation tells v4 from v3); EditionError for any
    other edition."""
    if "edition" not in general:
        return None
    edition = general["edition"]
    if isinstance(edition, bool) or not isinstance(edition, int):
        raise EditionError(
            f"expected an integer edition, got {toml_type_name(edition)} {edition!r}",
            "write `edition = 5`",
        )
    if edition not in SUPPORTED_EDITIONS:
        raise EditionError(
            f"unsupported build.toml edition {edition}; kernelnix supports edition "
            f"{', '.join(map(str, SUPPORTED_EDITIONS))} and pre-edition (v3/v4) files",
            "write `edition = 5`; a pre-edition file (no `edition` key) can be "
            "upgraded with `kernelnix update-build`",
        )
    return str(edition)


def upgrade_document(doc: Document, shape: str, new_table: Callable[[], Any] = dict) -> Document:
    """Upgrade `doc` (of `shape` "v3" or "v4") to edition 5 in place and return it.

    The same functions edit a plain dict (the in-memory upgrade while loading)
    and a tomlkit document (`kernelnix update-build`, which keeps comments and
    key order), so the two cannot drift apart."""
    for step in _UPGRADES[shape]:
        step(doc, new_table)
    return doc
