"""This machine as a Nix system string."""

from __future__ import annotations

import os


def current_system() -> str:
    """This machine as a Nix system string (`x86_64-linux`)."""
    # os.uname, not the platform module (what it answers here, on POSIX, at a
    # fraction of the import).
    uname = os.uname()
    machine = {"arm64": "aarch64", "amd64": "x86_64"}.get(
        uname.machine.lower(), uname.machine.lower()
    )
    return f"{machine}-{uname.sysname.lower()}"
