"""The TOML parser build.toml is read with.

rtoml (a compiled parser: Rust's `toml` crate, which kernel-builder reads
build.toml with) reads the long `src` arrays of a big kernel about ten times
faster than the standard library's `tomllib`. It reads first. What it refuses,
`tomllib` reads again: a file it wrongly refuses still loads (it refuses a
`[[general.kernel-depends]]` after dotted `general.*` keys, which TOML allows),
and a syntax error is reported with tomllib's message and position, as kernelnix
has always reported it. rtoml 0.14 and later read TOML 1.1, which neither
kernel-builder nor `tomllib` accepts, hence pyproject.toml's `<0.14`. Without
rtoml (the Nix-packaged kernelnix) `tomllib` reads alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_compiled: Callable[[str], dict[str, Any]] | None
try:
    from rtoml import loads as _compiled
except ModuleNotFoundError:
    _compiled = None


class TOMLDecodeError(ValueError):
    """Not a TOML 1.0 document; the message is tomllib's, with its `(at line L, column C)`."""


def loads(text: str) -> dict[str, Any]:
    """The TOML document `text`, or TOMLDecodeError when it is not TOML 1.0."""
    if _compiled is not None:
        try:
            return _compiled(text)
        except ValueError:  # rtoml's TomlParsingError: tomllib decides, and says why
            pass
    # Imported here: a valid file never needs it where rtoml is installed.
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TOMLDecodeError(str(exc)) from None
