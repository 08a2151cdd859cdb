"""This machine as a Nix system string."""

from __future__ import annotations

import platform


def current_system() -> str:
    """This machine as a Nix system string (`x86_64-linux`)."""
    machine = {"arm64": "aarch64", "amd64": "x86_64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return f"{machine}-{platform.system().lower()}"
