"""flake.nix of a kernel project, rendered from kernelnix/templates/flake/flake.nix.j2.

Its first line records the settings it was rendered with and the sha256 of the
rest, so an edited flake.nix is recognised (`pristine_settings`) and kept unless
`kernelnix generate --force` (kernelnix.project.generate writes it). Values reach
flake.nix only through `nix_string`; everything from build.toml reaches Nix
through the plan's JSON.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from kernelnix.core.diagnostics import UserError
from kernelnix.emit.escape import nix_string
from kernelnix.emit.render import render
from kernelnix.variants.matrix import TOOLCHAINS

FLAKE_FILE = "flake.nix"
FLAKE_TEMPLATE = "flake/flake.nix.j2"
HEADER_PREFIX = "# kernelnix-generated: "
DEFAULT_KERNELNIX_URL = "kernelnix"  # a flake registry name
# Every variant in the Nix sandbox from locked registry artifacts (docs/hermetic.md);
# "host" (this machine's compilers and Python) is the opt-in for speed.
DEFAULT_TOOLCHAIN = "hermetic"


@dataclass(frozen=True)
class FlakeSettings:
    kernelnix_url: str = DEFAULT_KERNELNIX_URL
    toolchain: str = DEFAULT_TOOLCHAIN


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def render_flake(settings: FlakeSettings) -> str:
    """The text of flake.nix: the header line, then the rendered template."""
    if settings.toolchain not in TOOLCHAINS:
        raise UserError.single(
            f"unknown toolchain {settings.toolchain!r}", fix=f"use one of: {', '.join(TOOLCHAINS)}"
        )
    body = render(
        FLAKE_TEMPLATE,
        {
            "kernelnix_url": nix_string(settings.kernelnix_url),
            "toolchain": nix_string(settings.toolchain),
        },
    )
    header = {
        "kernelnix-url": settings.kernelnix_url,
        "toolchain": settings.toolchain,
        "sha256": _digest(body),
    }
    return HEADER_PREFIX + json.dumps(header, sort_keys=True) + "\n" + body


def pristine_settings(text: str) -> FlakeSettings | None:
    """The settings of a flake.nix kernelnix generated and nobody edited since, else None."""
    first, _, body = text.partition("\n")
    if not first.startswith(HEADER_PREFIX):
        return None
    try:
        header = json.loads(first[len(HEADER_PREFIX) :])
        if header["sha256"] != _digest(body):
            return None
        return FlakeSettings(str(header["kernelnix-url"]), str(header["toolchain"]))
    except (ValueError, KeyError, TypeError):
        return None
