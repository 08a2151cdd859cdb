"""A package index served on 127.0.0.1 for lock tests: PEP 691 JSON pages and
real wheel files (zip files with METADATA), with HTTP range requests, as
`kernelnix lock-wheels` reads PyPI."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

Wheel = tuple[str, bytes]  # file name, contents


def wheel(name: str, version: str, tag: str, requires: list[str], files: dict[str, str]) -> Wheel:
    """A wheel of `name` with its Requires-Dist lines and `files` (path -> text)."""
    dist = f"{name.replace('-', '_')}-{version}"
    filename = f"{dist}-{tag}.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        metadata = [
            f"Name: {name}",
            f"Version: {version}",
            *(f"Requires-Dist: {r}" for r in requires),
        ]
        archive.writestr(f"{dist}.dist-info/METADATA", "\n".join(metadata) + "\n")
        for path, text in files.items():
            archive.writestr(path, text)
    return filename, buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def serve_index(packages: Mapping[str, list[Wheel]]) -> Iterator[str]:
    """The index of `packages` (project -> wheels): its URL template, `{name}` to fill."""
    files = {name: data for wheels in packages.values() for name, data in wheels}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self.do_GET(head=True)

        def do_GET(self, head: bool = False) -> None:
            parts = self.path.strip("/").split("/")
            if parts[0] == "simple":
                project = packages.get(parts[1], [])
                listed = [
                    {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": sha256(d)}}
                    for n, d in project
                ]
                page = {"meta": {"api-version": "1.0"}, "name": parts[1], "files": listed}
                body = json.dumps(page).encode()
                status, headers = 200, {"Content-Type": "application/vnd.pypi.simple.v1+json"}
            else:
                data = files[parts[1]]
                start, end = 0, len(data) - 1
                if "Range" in self.headers:
                    first, last = self.headers["Range"].removeprefix("bytes=").split("-")
                    start, end = int(first), min(int(last), len(data) - 1)
                body, status, headers = (
                    data[start : end + 1],
                    206 if "Range" in self.headers else 200,
                    {},
                )
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(files[parts[1]]) if head else len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/{{name}}/"
    finally:
        server.shutdown()
