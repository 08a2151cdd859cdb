"""The TOML parser build.toml is read with.

tomli 2.2 is the code of the standard library's `tomllib` (TOML 1.0, the same
errors), and its wheels for CPython are compiled with mypyc: it parses the long
`src` arrays of a big kernel 3 to 5 times faster. Where it is not installed (the
Nix-packaged kernelnix: nixpkgs builds it uncompiled), `tomllib` does the same
work. tomli 2.3 and later read TOML 1.1, which neither `tomllib` nor
kernel-builder accepts, hence pyproject.toml's `<2.3`.
"""

from __future__ import annotations

try:
    from tomli import TOMLDecodeError, loads
except ModuleNotFoundError:
    from tomllib import TOMLDecodeError, loads  # type: ignore[assignment,unused-ignore]

__all__ = ["TOMLDecodeError", "loads"]
