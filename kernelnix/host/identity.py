"""What a host-toolchain build reads from the machine: its identity.

A host build's output depends on more than its inputs in the Nix store: on the
compilers, the C library and the Torch of the machine that builds it. The host
record (kernelnix-host.json) holds them as `identity`, and the host toolchain puts
the identity into every derivation it writes (nix/toolchains/host/identity.nix), so
that machines with the same identity compute the same store paths and may share
outputs through a binary cache, and a machine with another compiler gets other paths.

The builder checks the identity again before it builds (`python -m
kernelnix.host.identity EXPECTED`, from the toolchain's setup.sh): a remote builder
or a machine whose compiler changed since the record was written refuses the build
instead of producing an output its store path misdescribes. Stdlib only, and cheap:
it runs each recorded compiler's `--version`, and reads Torch's version file without
importing Torch.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from kernelnix.host.torch_probe import probe

# The record's tools (kernelnix.host.record.TOOLS) that compile code into a variant.
COMPILERS = ("c++", "g++", "clang++", "nvcc", "hipcc", "icpx")
# nvcc, hipcc and icpx print more than the one version line; copyright lines only vary
# with the year.
_SKIPPED_LINE_PREFIXES = ("Copyright", "This is free software", "warranty")


def c_library() -> str:
    """The C library the builds link against, e.g. `glibc 2.36` (macOS: its version)."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        found = None
    if found:
        return found
    mac = platform.mac_ver()[0]
    return f"macOS {mac}" if mac else f"{platform.system()} {platform.release()}"


def compiler_version(path: str) -> str:
    """The lines of `path --version` that say which compiler it is."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"cannot run: {exc.strerror}"
    lines = (line.strip() for line in (done.stdout or done.stderr).splitlines())
    kept = [
        line
        for line in lines
        if line and any(c.isdigit() for c in line) and not line.startswith(_SKIPPED_LINE_PREFIXES)
    ]
    return "\n".join(kept) or f"exit status {done.returncode}, no version"


def machine_identity(compilers: Iterable[str]) -> dict[str, Any]:
    """The identity of this machine for the named compilers (found on PATH)."""
    torch = probe()
    return {
        "c-library": c_library(),
        "compilers": {
            name: compiler_version(path) if (path := shutil.which(name)) else "not found"
            for name in sorted(compilers)
        },
        "python": f"{sys.implementation.name} {platform.python_version()}",
        "torch": torch["version"] if torch else None,
    }


def record_identity(tools: Mapping[str, str]) -> dict[str, Any]:
    """The identity for a host record whose tools are `tools` (name -> path)."""
    return machine_identity(name for name in tools if name in COMPILERS)


def mismatches(expected: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """Where `found` differs from what `expected` records, one line each (empty when
    they agree). What `expected` leaves out is not compared: the identity of a variant
    of locked wheels has no Torch, nor nvcc (nix/toolchains/host/identity.nix)."""
    lines = []
    for key in sorted(expected):
        want, have = expected.get(key), found.get(key)
        if isinstance(want, Mapping) and isinstance(have, Mapping):
            lines += [f"{key}.{line}" for line in mismatches(want, have)]
        elif want != have:
            lines.append(f"{key}: recorded {json.dumps(want)}, this machine has {json.dumps(have)}")
    return lines


def check(expected: Mapping[str, Any]) -> list[str]:
    """How this machine differs from the `expected` identity (its compilers only)."""
    return mismatches(expected, machine_identity(expected.get("compilers", {})))


def main(argv: list[str]) -> int:
    """`python -m kernelnix.host.identity EXPECTED_JSON`: exit 1, saying what differs."""
    found = check(json.loads(argv[0]))
    if not found:
        return 0
    print(
        "kernelnix (host toolchain): this machine is not the one kernelnix-host.json "
        "describes, so the output would not be what its store path says:\n  "
        + "\n  ".join(found)
        + "\nBuild on a machine with the recorded toolchain (a remote builder with the same "
        "compilers, C library and Torch), or run `kernelnix generate` here to record this "
        "machine (the variants then get new store paths).",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
