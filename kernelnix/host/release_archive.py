"""Fetch a release archive, a `.tar.gz` with one top folder as GitHub serves a tag's,
and unpack that folder's contents into OUT: the tree Nix's `fetchTarball` and
nixpkgs' `fetchFromGitHub` make, whose hash kernelnix/data/dependencies.json pins.

Run by a fixed-output derivation (nix/toolchains/host/wheels.nix, `fetchedRelease`)
with the standard library only: `python release_archive.py URL OUT`. Nix checks
the tree against the pinned hash, so the download does not verify TLS
certificates: the sandbox has no CA bundle, and the hash is the stronger check.
"""

from __future__ import annotations

import os
import shutil
import ssl
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path


def download(url: str, into: Path) -> Path:
    archive = into / "archive.tar.gz"
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=context) as response, archive.open("wb") as file:
        shutil.copyfileobj(response, file)
    return archive


def unpack(archive: Path, out: Path, work: Path) -> None:
    """The contents of `archive`'s single top folder as `out`."""
    unpacked = work / "unpacked"
    with tarfile.open(archive) as tar:
        # Python's own safety filter where it has one (3.11.4 on): no absolute
        # paths, no links out of the tree.
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(unpacked, filter="tar")
        else:
            tar.extractall(unpacked)
    _canonical_modes(unpacked)
    entries = list(unpacked.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        names = ", ".join(sorted(e.name for e in entries)) or "nothing"
        raise SystemExit(f"release_archive: expected one top folder in the archive, found {names}")
    shutil.move(str(entries[0]), out)


def _canonical_modes(tree: Path) -> None:
    """0755 or 0644, as the store keeps them: an archive's group-writable files
    (`git archive` writes 0664) are refused as a build output, and the tree's hash
    sees only whether a file is executable."""
    for folder, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = Path(folder, name)
            if not path.is_symlink():
                executable = path.is_dir() or path.stat().st_mode & 0o100
                path.chmod(0o755 if executable else 0o644)


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: release_archive.py URL OUT")
    url, out = argv
    with tempfile.TemporaryDirectory() as work:
        try:
            archive = download(url, Path(work))
        except OSError as error:  # urllib's errors too: no network, 404, a reset
            raise SystemExit(
                f"release_archive: cannot download {url}: {error}; build where it can be "
                "reached, or copy its unpacked tree into this store (`nix copy --from` a "
                "cache that holds it)"
            ) from None
        unpack(archive, Path(out), Path(work))


if __name__ == "__main__":
    main(sys.argv[1:])
