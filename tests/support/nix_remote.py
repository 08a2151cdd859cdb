"""Servers on 127.0.0.1 for the distributed-build and reproduce tests
(tests/e2e/test_distributed.py, test_reproduce.py): a static HTTP server over a Nix
binary cache directory that records what it was asked for, a cache entry written
by hand (a copy the derivation does not build), and an sshd with keys made for
the test, which Nix reaches as an ssh-ng remote builder whose daemon builds into a
store of its own.
"""

from __future__ import annotations

import functools
import getpass
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SSHD = Path("/usr/sbin/sshd")


@dataclass
class CacheServer:
    url: str
    requests: list[str] = field(default_factory=list)


@contextmanager
def serve_directory(directory: Path) -> Iterator[CacheServer]:
    """`directory` over HTTP on a free loopback port, uploads (PUT) written into it;
    every request's path is recorded."""
    server_state = CacheServer(url="")

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            server_state.requests.append(self.path)
            super().do_GET()

        def do_PUT(self) -> None:
            """An upload (`nix copy --to http://...`): the file, under the directory."""
            server_state.requests.append(f"PUT {self.path}")
            target = directory / self.path.split("?")[0].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    handler = functools.partial(Handler, directory=str(directory))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        server_state.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server_state
        finally:
            server.shutdown()


@dataclass(frozen=True)
class SshBuilder:
    """An sshd on 127.0.0.1 and what Nix needs to use it as a remote builder."""

    host: str  # user@127.0.0.1
    key: Path
    ssh_options: str  # NIX_SSHOPTS: the port, the key, no host key checks
    pid: int  # the listening sshd: each session, and the daemon it runs, below it

    def store_url(self, remote_store: Path, daemon: Path) -> str:
        """ssh-ng URL of a remote daemon (`daemon`) that builds into `remote_store`."""
        return f"ssh-ng://{self.host}?remote-store={remote_store}&remote-program={daemon}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited ({process.returncode}): {log.read_text()}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port}: {log.read_text()}")


@contextmanager
def sshd(work: Path) -> Iterator[SshBuilder]:
    """An sshd on a free loopback port that lets this user in with a key made here."""
    work.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / name)], check=True
        )
    authorized = work / "authorized_keys"
    shutil.copy(work / "client_key.pub", authorized)
    authorized.chmod(0o600)
    port = free_port()
    config = work / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {work / 'host_key'}\n"
        f"AuthorizedKeysFile {authorized}\nPidFile {work / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    log = work / "sshd.log"
    process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config), "-E", str(log)])
    try:
        _wait_for_port(port, process, log)
        options = (
            f"-p {port} -i {work / 'client_key'} -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
        )
        yield SshBuilder(
            f"{getpass.getuser()}@127.0.0.1", work / "client_key", options, process.pid
        )
    finally:
        process.terminate()
        process.wait(timeout=10)


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`, and its command name."""
    children: dict[int, list[int]] = {}
    names = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended
        name = text[text.index("(") + 1 : text.rindex(")")]
        parent = int(text[text.rindex(")") + 2 :].split()[1])
        names[int(stat.parent.name)] = name
        children.setdefault(parent, []).append(int(stat.parent.name))
    found: dict[int, str] = {}
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        found[child] = names[child]
        pending += children.get(child, [])
    return found


def remote_daemon(path: Path, sandbox_paths: list[str]) -> Path:
    """A `remote-program` for ssh-ng: nix-daemon with the sandbox on, which a store of
    its own (`remote-store=`) needs, and the host directories the host toolchain's
    builders read bound into it. Written here: the remote's nix.conf stays as it is."""
    config = "\n".join(
        [
            "experimental-features = nix-command flakes",
            "substituters =",
            "sandbox = true",
            f"sandbox-paths = {' '.join(sandbox_paths)}",
        ]
    )
    path.write_text(f"#!/bin/sh\nexport NIX_CONFIG='{config}'\nexec nix-daemon \"$@\"\n")
    path.chmod(0o755)
    return path


def nix_base32(digest_hex: str) -> str:
    """A sha256 in the base32 form narinfo files use."""
    return subprocess.run(
        ["nix", "--extra-experimental-features", "nix-command", "hash", "to-base32",
         "--type", "sha256", digest_hex],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def cache_entry(cache: Path, store_path: str, tree: Path) -> None:
    """Make the binary cache directory `cache` serve `tree`'s files as `store_path`
    (uncompressed, unsigned, no references): what a cache that holds a copy other
    than the one the derivation builds looks like to Nix."""
    import hashlib

    (cache / "nar").mkdir(parents=True, exist_ok=True)
    (cache / "nix-cache-info").write_text("StoreDir: /nix/store\nWantMassQuery: 1\nPriority: 10\n")
    nar = subprocess.run(["nix-store", "--dump", str(tree)], capture_output=True, check=True).stdout
    digest = nix_base32(hashlib.sha256(nar).hexdigest())
    (cache / "nar" / f"{digest}.nar").write_bytes(nar)
    name = Path(store_path).name
    (cache / f"{name.split('-', 1)[0]}.narinfo").write_text(
        f"StorePath: {store_path}\nURL: nar/{digest}.nar\nCompression: none\n"
        f"FileHash: sha256:{digest}\nFileSize: {len(nar)}\n"
        f"NarHash: sha256:{digest}\nNarSize: {len(nar)}\nReferences: \n"
    )
