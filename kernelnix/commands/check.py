"""`kernelnix check`: the post-build checks over a variant or a build tree."""

from __future__ import annotations

from kernelnix.checks.command import check
from kernelnix.cli import main

main.add_command(check)
