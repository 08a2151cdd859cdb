"""Where the Nix library of the running kernelnix is, as a flake URL.

A wheel carries a copy of the kernelnix flake in `kernelnix/data/flake/`
(setup.py puts it there); a source checkout (an editable install, or
PYTHONPATH) is the flake itself. Either way the flake is exactly the version of
the Python code running, so `kernelnix build` can hand it to Nix as the
kernel flake's `kernelnix` input (kernelnix.project.nix), and no `nix registry
add` is needed.
"""

from __future__ import annotations

from pathlib import Path

import kernelnix
from kernelnix.core.diagnostics import UserError

PACKAGE = Path(kernelnix.__file__).resolve().parent
INSTALLED = PACKAGE / "data" / "flake"


def _is_flake(directory: Path) -> bool:
    return (directory / "flake.nix").is_file() and (directory / "nix" / "lib").is_dir()


def library_dir() -> Path:
    """The kernelnix flake of this kernelnix: the installed copy, or the checkout."""
    for candidate in (INSTALLED, PACKAGE.parent):
        if _is_flake(candidate):
            return candidate
    raise UserError.single(
        f"this kernelnix ({PACKAGE}) has no Nix library: neither {INSTALLED} nor a source "
        "checkout around it holds flake.nix and nix/lib",
        fix="reinstall kernelnix from its wheel (`pip install kernelnix`), or pass "
        "--kernelnix-url to `kernelnix generate`",
    )


def library_url() -> str:
    """The flake URL of `library_dir()`.

    A git checkout is read through git (tracked files only, as Nix reads every
    git flake: build outputs and virtual environments beside it are not
    copied); an installed copy through `path:`.
    """
    directory = library_dir()
    if directory == PACKAGE.parent and (directory / ".git").exists():
        return f"git+file://{directory}"
    return f"path:{directory}"
