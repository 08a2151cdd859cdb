"""build.toml: every edition in use, normalized to one edition-5 model.

`load_config`, `LoadedConfig` and `BuildConfig` are imported on first use: a module
that needs only the value types or the shared tables (metadata.json's model, the
build step) does not load every edition's models with this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelnix.config.load import LoadedConfig, load_config
    from kernelnix.config.model import BuildConfig

__all__ = ["BuildConfig", "LoadedConfig", "load_config"]


def __getattr__(name: str) -> Any:
    if name == "BuildConfig":
        from kernelnix.config.model import BuildConfig

        return BuildConfig
    if name in ("LoadedConfig", "load_config"):
        from kernelnix.config import load

        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
