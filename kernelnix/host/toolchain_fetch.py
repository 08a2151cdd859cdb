"""The hermetic toolchain's artifacts fetched into the Nix store before Nix needs them.

nix/registry/ fetches every artifact of kernelnix/data/toolchain-lock.json with
Nix's builtin fetchurl, whose errors name a URL and a hash, not what is wrong or
how to fix it. kernelnix's Nix commands fetch them first with
`environments.fetch_wheel` (resumed downloads, hash checked, nothing half-written),
into the store paths Nix's fetches would make, so that a file gone from Debian's
mirror, a hash mismatch or an interrupted download is one clear error, and Nix
then finds every path present. A file gone from its registry is taken from an
archive where one is named (`kernelnix archive`, `--archive`): a binary cache
whose copy Nix checks by the file's hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelnix.core.diagnostics import UserError
from kernelnix.host.environments import LOCK_FILE as WHEEL_LOCK_FILE
from kernelnix.host.environments import LockedWheel, cache_dir, fetch_wheel
from kernelnix.host.hermetic_wheels import sri
from kernelnix.host.toolchain_lock import LOCK_COMMAND, LOCK_FILE

LOCK_NAME = "the toolchain lock (kernelnix/data/toolchain-lock.json)"


def _locked(name: str, url: str, hash: str, label: str) -> LockedWheel:
    return LockedWheel(name, url, hash, label=label, lock=LOCK_NAME, relock=LOCK_COMMAND)


def check_architectures(system: str, entry: dict[str, Any]) -> None:
    """Refuse a lock whose .deb of `system` is built for another architecture."""
    wanted = entry["debian-arch"]
    wrong = [
        f"{name} {deb['version']} is built for {deb['architecture']}"
        for name, deb in sorted(entry["debs"].items())
        if deb["architecture"] not in (wanted, "all")
    ]
    if wrong:
        raise UserError.single(
            f"{LOCK_NAME} holds Debian packages for another architecture than {system} "
            f"({wanted}): {'; '.join(wrong)}",
            fix=f"run `{LOCK_COMMAND}` and commit the lock; do not edit it by hand",
        )


def toolchain_files(
    system: str, lock: dict[str, Any], wheel_lock: dict[str, Any]
) -> list[LockedWheel]:
    """Every file nix/registry/ fetches for `system`, named as its fetches name them."""
    systems = lock.get("systems", {})
    if system not in systems:
        raise UserError.single(
            f"{LOCK_NAME} has no toolchain for {system} (it has {', '.join(sorted(systems))})",
            fix=f"add {system} to kernelnix/data/toolchain.json and run `{LOCK_COMMAND}`",
        )
    entry = systems[system]
    check_architectures(system, entry)
    arch = entry["debian-arch"]
    files = [
        _locked(
            f"{name}.deb",
            deb["url"],
            sri(deb["sha256"]),
            f"the Debian package {name} {deb['version']} ({arch})",
        )
        for name, deb in sorted(entry["debs"].items())
    ]
    npm = entry["npm"]
    files.append(
        _locked(
            f"{npm['name']}-{npm['version']}.tgz",
            npm["url"],
            npm["hash"],
            f"the npm package {npm['name']} {npm['version']}",
        )
    )
    for item in [*entry["tools"].values(), *entry["python"]]:
        files.append(_locked(item["filename"], item["url"], item["hash"], item["filename"]))
    target = wheel_lock.get("host", {}).get("glibc-target", {}).get(system)
    if target is not None:
        wheel = wheel_lock["host"]["wheels"][target["wheel"]]
        files.append(LockedWheel(target["wheel"], wheel["url"], wheel["hash"]))
    return files


def prefetch_toolchain(
    system: str,
    log: Callable[[str], None],
    lock_file: Path = LOCK_FILE,
    wheel_lock_file: Path = WHEEL_LOCK_FILE,
    cache: Path | None = None,
    archives: Sequence[str] = (),
) -> list[Path]:
    """Fetch the toolchain's files of `system` (each once per machine): their paths;
    a file its registry no longer has comes from `archives` (binary caches)."""
    lock = json.loads(lock_file.read_text())
    wheel_lock = json.loads(wheel_lock_file.read_text())
    where = cache or cache_dir()
    files = toolchain_files(system, lock, wheel_lock)
    return [fetch_wheel(f, where, log, archives) for f in files]
