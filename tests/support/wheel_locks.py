"""Wheel locks with fewer host environments, for tests that build with real Nix.

A kernel's bundle holds every variant whose wheels are locked
(kernelnix/data/wheel-lock.json, `host`): with the whole lock, each test
project would fetch about 6 GB and build six variants. Tests build from a copy
of the lock that keeps only the build sets they are about (none by default:
then only the variants of the build Python's own Torch are offered, as
without a lock), through KERNELNIX_WHEEL_LOCK (Python) and the kernelnix
clone's own lock file (Nix).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from paths import ROOT

from kernelnix.host.host_wheels import noarch_build_sets
from kernelnix.variants.matrix import matrix_data

LOCK = ROOT / "kernelnix" / "data" / "wheel-lock.json"


def lock_with(dest: Path, build_sets: Collection[str] = ()) -> Path:
    """Write to `dest` kernelnix's wheel lock with only `build_sets` (`2.14-cuda-13`),
    and the noarch variants' build sets chosen among them, as `lock-wheels` would."""
    data = json.loads(LOCK.read_text())
    host = data.get("host", {})
    for tags in host.get("environments", {}).values():
        for sets in tags.values():
            for key in [k for k in sets if k not in build_sets]:
                del sets[key]
    host["noarch"] = noarch_build_sets(matrix_data(), host.get("environments", {}))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return dest


# What a kernel may import at load time (kernelnix/data/python-imports.json,
# written by `lock-wheels`): the figures messages quote, read rather than repeated.
IMPORTS = json.loads((ROOT / "kernelnix" / "data" / "python-imports.json").read_text())
LOADER = IMPORTS["loader"]["kernels"]


def torch_range(backend: str) -> str:
    """`2.11.0 to 2.15.0`: the Torch releases the lock holds for `backend`."""
    releases = sorted(
        {
            entry["torch"].partition("+")[0]
            for by_key in IMPORTS["torch"].values()
            for key, entry in by_key.items()
            if key.split("-")[1] == backend
        },
        key=lambda v: tuple(int(p) for p in v.split(".")),
    )
    return f"{releases[0]} to {releases[-1]}"
