"""A stand-in for a CUTLASS release, as GitHub serves a tag: a git repository with
CUTLASS 4.0's version header (and a header under tools/util/include, an
executable file, a symbolic link), and its `git archive` (one top folder, a pax
header naming the commit). No CUTLASS release can be fetched here."""

from __future__ import annotations

import subprocess
from pathlib import Path

VERSION_H = "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 0\n#define CUTLASS_PATCH 0\n"
UTIL_H = "#define KERNELNIX_FROM_THE_RELEASE 1\n"


def stand_in_release(where: Path) -> Path:
    """The repository's checkout: the tree its archive unpacks to, plus `.git`."""
    tree = where / "cutlass"
    (tree / "include" / "cutlass").mkdir(parents=True)
    (tree / "include" / "cutlass" / "version.h").write_text(VERSION_H)
    util = tree / "tools" / "util" / "include" / "cutlass" / "util"
    util.mkdir(parents=True)
    (util / "kernelnix_release.h").write_text(UTIL_H)
    script = tree / "bin" / "tool.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (tree / "headers").symlink_to("include")
    # A tree of its own each time: its store path is new, so a build must fetch it.
    (tree / "stand-in").write_text(f"{where}\n")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "v4.0.0"], check=True)
    return tree


def release_archive(tree: Path, dest: Path) -> Path:
    """`dest` (a .tar.gz): the archive of `tree`'s commit in a folder `cutlass-4.0.0`."""
    subprocess.run(
        ["git", "-C", str(tree), "archive", "--prefix=cutlass-4.0.0/", "-o", str(dest), "HEAD"],
        check=True,
    )
    return dest


def unpacked_hash(url: str) -> str:
    """The SRI sha256 of the tree Nix's own unpacking of the archive at `url` gives
    (`nix-prefetch-url --unpack`, the hash fetchTarball and fetchFromGitHub pin)."""
    base32 = subprocess.run(
        ["nix-prefetch-url", "--unpack", "--type", "sha256", url],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return subprocess.run(
        ["nix", "hash", "to-sri", "--type", "sha256", base32],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
