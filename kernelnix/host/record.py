"""The host toolchain's record of this machine: kernelnix-host.json.

Flake evaluation is pure: it cannot ask which Python has torch or which
compilers exist. `kernelnix generate` asks instead, from the Python it runs in,
and writes the answer next to flake.nix: the variants of the plan this machine
can build (kernelnix.host.machine decides, as for `kernelnix build --local`),
why the others cannot be built, the Python and PATH entries the
builders use, and the machine's identity (kernelnix.host.identity: compilers, C
library, Torch), which addresses the host toolchain's derivations.
nix/toolchains/host/default.nix reads it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from kernelnix.host.environments import python_tag
from kernelnix.host.identity import record_identity
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.host.torch_probe import probe
from kernelnix.plan.model import Plan

HOST_FILE = "kernelnix-host.json"
SCHEMA_VERSION = 1

# Tools whose directories go on the builders' PATH (besides the Python's own).
TOOLS = ("c++", "g++", "clang++", "cmake", "ninja", "nvcc", "hipcc", "icpx", "xcrun")
BASE_PATH = ("/usr/bin", "/bin")


def _tools() -> dict[str, str]:
    """Tool name -> absolute path, for the tools found on PATH."""
    found = {name: shutil.which(name) for name in TOOLS}
    return {name: path for name, path in found.items() if path}


def probe_host(plan: Plan) -> dict[str, Any]:
    """This machine, as the host toolchain needs it, for the variants of `plan`."""
    system = current_system()
    # This Python's own Torch only: the variants of locked wheels are offered by
    # nix/toolchains/host from the lock of the kernelnix that builds them.
    reasons = {
        name: why_not_buildable(variant, locked_wheels=False)
        for name, variant in plan.variants.get(system, {}).items()
    }
    tools = _tools()
    path = [str(Path(sys.executable).parent), *(str(Path(p).parent) for p in tools.values())]
    torch = probe()
    return {
        "schema-version": SCHEMA_VERSION,
        "system": system,
        "python": sys.executable,
        # Which locked environments (wheel-lock.json `host`) the builders use.
        "python-tag": python_tag(),
        "torch-version": torch["version"] if torch else None,
        "tools": tools,
        "identity": record_identity(tools),
        "path": list(dict.fromkeys([*path, *BASE_PATH])),
        "variants": [name for name, reason in reasons.items() if reason is None],
        "not-buildable": {name: reason for name, reason in reasons.items() if reason},
    }


def host_json(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=True) + "\n"
