"""build.toml: every edition in use, normalized to one edition-5 model."""

from kernelnix.config.load import LoadedConfig, load_config
from kernelnix.config.model import BuildConfig

__all__ = ["BuildConfig", "LoadedConfig", "load_config"]
