"""Running the long commands underneath kernelnix (compiles, Nix, git in `init`).

Each is shown as `+ <command>` on stderr before it runs, so that a user can
see, and re-run by hand, what a slow or failing step did.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def shown(args: Sequence[str]) -> str:
    """`+ <command>` as printed: the program by its name (its absolute path is noise)."""
    return "+ " + shlex.join([Path(args[0]).name, *args[1:]])


def run_shown(args: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """Print `+ <command>` on stderr, then run it (text mode, no check); `options`
    go to subprocess.run."""
    print(shown(args), file=sys.stderr, flush=True)
    return subprocess.run(list(args), text=True, check=False, **options)
