"""Code run in a fresh interpreter, as a user's program would load a kernel."""

from __future__ import annotations

import os
import subprocess
import sys


def run_python(code: str, *args: str) -> str:
    """Run `code` in a fresh interpreter (offline Hub); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
