"""Run an interactive program on a pseudo-terminal, typing its input: shells read
their rc files (elvish's edit: module, `nix develop`'s environment) only there."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence


def run_on_terminal(
    argv: Sequence[str], typed: str, env: Mapping[str, str], timeout: float = 120
) -> tuple[int, str]:
    """Start `argv` on a new terminal, type `typed`, read until it exits; its exit
    code and everything it wrote (the typed text echoed too)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        list(argv), stdin=follower, stdout=follower, stderr=follower, env=dict(env)
    )
    os.close(follower)
    os.write(leader, typed.encode())
    output = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([leader], [], [], 0.2)[0]:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # the program exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    if process.poll() is None:
        process.kill()
    return process.wait(timeout=10), output.decode(errors="replace")
