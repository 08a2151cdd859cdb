"""`kernelnix archive`: the downloads a bundle's build used, kept in a binary cache.

A hermetic build takes every tool and wheel from registries, each a fixed-output
download Nix checks by its hash. PyPI and npm keep their files; Debian's pool
drops a version when a point release supersedes it, and re-locking the
toolchain changes the bytes of every variant built after. An archive keeps the
files: every fixed-output derivation of the bundle's build closure is realised
and its output copied (`nix copy`) into a Nix binary cache: a folder, or an
HTTP server that accepts uploads (PUT). Their store paths are content-addressed,
so Nix takes them from any cache, unsigned, and checks them by hash. `--archive
CACHE` (or flake.nix's nixConfig `extra-substituters`) names it to the build,
reproduce and the toolchain's prefetch, which use it where a registry no longer
has a file.

By default the archive holds everything but PyPI's files (Debian's packages,
npm's bootstrap tarball, Hub files of kernel dependencies); `--wheels` adds
PyPI's (the Torch and CUDA wheels are gigabytes).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelnix.core.diagnostics import UserError
from kernelnix.project.nix import FlakeProject, NixOptions, nix_command, prepare, run

PYPI_FILES = re.compile(r"^https?://files\.pythonhosted\.org/")


@dataclass(frozen=True)
class Download:
    """A fixed-output derivation of the build: its output and where it comes from."""

    drv: str
    output: str
    url: str

    @property
    def from_pypi(self) -> bool:
        return bool(PYPI_FILES.match(self.url))


def downloads(drvs: dict[str, dict[str, object]]) -> list[Download]:
    """The fixed-output derivations among `drvs` (`nix show-derivation -r`'s JSON)."""
    found = []
    for drv, facts in sorted(drvs.items()):
        outputs = facts.get("outputs")
        env = facts.get("env")
        if not isinstance(outputs, dict) or not isinstance(env, dict):
            continue
        out = outputs.get("out")
        if isinstance(out, dict) and out.get("hash"):
            url = env.get("url") or " ".join(str(u) for u in env.get("urls", []))
            found.append(Download(drv, str(out["path"]), str(url)))
    return found


@dataclass(frozen=True)
class Archived:
    cache: str
    downloads: list[Download]


def _closure_downloads(project: FlakeProject) -> list[Download]:
    drv = run(
        nix_command("eval", "--raw", project.ref("bundle.drvPath"), *project.nix_args),
        capture=True,
    ).strip()
    shown = json.loads(run(nix_command("show-derivation", "--recursive", drv), capture=True))
    return downloads(shown)


def archive(directory: Path, cache: str, *, wheels: bool, options: NixOptions) -> Archived:
    """Realise the fixed-output downloads of DIRECTORY's bundle build and copy them
    to `cache`, a store URL (file://, http(s)://)."""
    if "://" not in cache:
        raise UserError.single(
            f"{cache!r} names no binary cache",
            key="--to",
            fix="pass a folder, file:///path or http(s)://host/path",
        )
    project = prepare(directory, options.archives)
    chosen = [d for d in _closure_downloads(project) if wheels or not d.from_pypi]
    if not chosen:
        raise UserError.single("the bundle's build downloads nothing to archive", key="--to")
    # Fetched where they are not in the store yet, from their registries (or an archive).
    realise = shutil.which("nix-store") or "nix-store"
    command = [realise, "--realise", *(d.drv for d in chosen), *project.substituters]
    run(command, capture=True)
    run(nix_command("copy", "--to", cache, *(d.output for d in chosen)))
    return Archived(cache, chosen)
