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

from pydantic import Field

from kernelnix.host.environments import python_tag
from kernelnix.host.identity import record_identity
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.host.torch_probe import probe
from kernelnix.plan.model import Plan, PlanModel, schema_version

HOST_FILE = "kernelnix-host.json"
SCHEMA_VERSION = schema_version("host-record")

# Tools whose directories go on the builders' PATH (besides the Python's own).
TOOLS = ("c++", "g++", "clang++", "cmake", "ninja", "nvcc", "hipcc", "icpx", "xcrun")
BASE_PATH = ("/usr/bin", "/bin")


def _tools() -> dict[str, str]:
    """Tool name -> absolute path, for the tools found on PATH."""
    found = {name: shutil.which(name) for name in TOOLS}
    return {name: path for name, path in found.items() if path}


class HostRecord(PlanModel):
    """kernelnix-host.json: what the host toolchain builds on this machine, and with what."""

    schema_version: int = Field(
        description="The record's schema version (data/schema-versions.json)."
    )
    system: str = Field(description="This machine's Nix system.")
    python: str = Field(description="The Python the builders run.")
    python_tag: str = Field(
        description="Its wheel tag (`cp311`): which locked wheels the builders use."
    )
    torch_version: str | None = Field(description="Its Torch (`2.13.0`), or null.")
    tools: dict[str, str] = Field(description="Compilers and build tools found on PATH.")
    identity: dict[str, Any] = Field(
        description="What a host build reads from the machine (compilers, C library, "
        "Torch): the derivations are addressed by it (kernelnix.host.identity)."
    )
    path: list[str] = Field(description="The builders' PATH entries.")
    variants: list[str] = Field(description="The plan's variants this machine can build.")
    not_buildable: dict[str, str] = Field(description="The others, each with why not.")

    def to_json(self) -> str:
        """The canonical text: sorted keys, 2-space indent, trailing newline."""
        data = self.model_dump(mode="json", by_alias=True)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def host_record_schema() -> dict[str, Any]:
    """The JSON Schema of kernelnix-host.json (`kernelnix schema host-record`)."""
    from kernelnix.config.json_schema import document_schema

    return document_schema(HostRecord, HOST_FILE)


def probe_host(plan: Plan) -> HostRecord:
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
    return HostRecord(
        schema_version=SCHEMA_VERSION,
        system=system,
        python=sys.executable,
        python_tag=python_tag(),
        torch_version=torch["version"] if torch else None,
        tools=tools,
        identity=record_identity(tools),
        path=list(dict.fromkeys([*path, *BASE_PATH])),
        variants=[name for name, reason in reasons.items() if reason is None],
        not_buildable={name: reason for name, reason in reasons.items() if reason},
    )


def host_json(record: HostRecord) -> str:
    return record.to_json()
