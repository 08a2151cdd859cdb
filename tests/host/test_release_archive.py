"""kernelnix/host/release_archive.py, the script of the fixed-output derivation that
fetches a header dependency's release: the tree it unpacks from an archive served on
127.0.0.1 has the hash Nix's own unpacking gives (what dependencies.json pins, as
kernel-builder's fetchFromGitHub does); an archive without one top folder, or a
download that fails, is one line naming it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from nix_remote import serve_directory
from paths import ROOT
from release_archives import release_archive, stand_in_release, unpacked_hash

SCRIPT = ROOT / "kernelnix" / "host" / "release_archive.py"


def fetch(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), url, str(out)], capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")
def test_the_unpacked_tree_has_the_hash_nix_s_unpacking_gives(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    release_archive(stand_in_release(tmp_path), served / "v4.0.0.tar.gz")
    out = tmp_path / "out"
    with serve_directory(served) as server:
        url = f"{server.url}/v4.0.0.tar.gz"
        done = fetch(url, out)
        assert done.returncode == 0, done.stderr
        expected = unpacked_hash(url)
    found = subprocess.run(
        ["nix", "hash", "path", str(out)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == expected
    assert (out / "include" / "cutlass" / "version.h").is_file()
    assert (out / "bin" / "tool.sh").stat().st_mode & 0o100
    assert (out / "headers").is_symlink()
    # git archive writes 0664: the store refuses group-writable files.
    assert (out / "include" / "cutlass" / "version.h").stat().st_mode & 0o777 == 0o644


def test_an_archive_without_one_top_folder_is_refused(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    for name in ("a", "b"):
        (tmp_path / name).write_text(name)
    with tarfile.open(served / "two.tar.gz", "w:gz") as tar:
        for name in ("a", "b"):
            tar.add(tmp_path / name, arcname=name)
    with serve_directory(served) as server:
        done = fetch(f"{server.url}/two.tar.gz", tmp_path / "out")
    assert done.returncode == 1
    assert "expected one top folder in the archive, found a, b" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_download_that_fails_is_one_line_naming_the_url(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    with serve_directory(served) as server:
        url = f"{server.url}/missing.tar.gz"
        done = fetch(url, tmp_path / "out")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"release_archive: cannot download {url}: HTTP Error 404")
    assert not (tmp_path / "out").exists()
