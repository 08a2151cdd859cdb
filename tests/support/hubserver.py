"""A fake Hugging Face Hub on 127.0.0.1 for upload tests.

It speaks the endpoints huggingface_hub's `whoami`, `create_repo` (and its
repo-info fallback), `list_repo_refs`, `create_branch`, `list_repo_files` (tree),
`repo_info` at a revision (snapshot_download's) and `create_commit` (README
check, preupload, NDJSON commit, pull requests) call,
plus its user-agent detection, and the file downloads (`resolve`, HEAD and GET) of
`hf_hub_download`. It keeps repositories in memory and records
every request and commit. Every file is a regular (non-LFS) file.

Bounded: it listens on a random loopback port, refuses bodies over
`MAX_BODY` bytes and shuts itself down after `LIFETIME` seconds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN = "hf_fake_kernelnix_token"
USER = "kernelnix-tester"  # whoami's answer for TOKEN
LIFETIME = 120.0
MAX_BODY = 16 << 20
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}
TYPES = {f"{kind}s": kind for kind in URL_PREFIXES}


@dataclass
class RecordedCommit:
    repo: str
    revision: str
    summary: str
    adds: list[str]
    deletes: list[str]
    create_pr: bool


@dataclass
class Ref:
    files: dict[str, bytes]
    head: str


@dataclass
class FakeRepo:
    kind: str
    private: bool
    branches: dict[str, Ref] = field(default_factory=dict)
    pull_requests: dict[str, Ref] = field(default_factory=dict)

    def ref(self, revision: str) -> Ref | None:
        named = self.branches.get(revision) or self.pull_requests.get(revision)
        by_commit = (ref for ref in self.branches.values() if ref.head == revision)
        return named or next(by_commit, None)


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, **extra: object) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.extra = extra


def _oid(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


class FakeHub:
    """The server and its state; use as a context manager (`with FakeHub() as hub:`)."""

    def __init__(self, lifetime: float = LIFETIME) -> None:
        self.repos: dict[tuple[str, str], FakeRepo] = {}
        self.commits: list[RecordedCommit] = []
        self.requests: list[tuple[str, str]] = []
        self.unexpected: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._timer = threading.Timer(lifetime, self._server.shutdown)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> FakeHub:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # -------------------------------------------------------- test helpers

    def seed(
        self,
        kind: str,
        repo_id: str,
        branches: dict[str, dict[str, bytes]],
        *,
        private: bool = False,
    ) -> None:
        """An existing repository with these branches and files; a private one
        answers only requests with TOKEN, as the Hub does."""
        repo = FakeRepo(kind, private=private)
        for name, files in branches.items():
            repo.branches[name] = Ref(dict(files), _oid(repo_id, name, "seed"))
        self.repos[(kind, repo_id)] = repo

    def files(self, kind: str, repo_id: str, revision: str) -> dict[str, bytes]:
        ref = self.repos[(kind, repo_id)].ref(revision)
        assert ref is not None, f"no revision {revision}"
        return ref.files

    def writes(self) -> list[tuple[str, str]]:
        return [(method, path) for method, path in self.requests if method != "GET"]

    # ----------------------------------------------------------- endpoints

    def create_repo(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = body.get("type") or "model"
        repo_id = f"{body['organization']}/{body['name']}"
        url = f"{self.url}/{URL_PREFIXES[kind]}{repo_id}"
        if (kind, repo_id) in self.repos:
            raise HubError(409, "You already created this repo", url=url)
        repo = FakeRepo(kind, private=body.get("visibility") == "private")
        attributes = b"*.so filter=lfs diff=lfs merge=lfs -text\n"
        repo.branches["main"] = Ref({".gitattributes": attributes}, _oid(repo_id, "init"))
        self.repos[(kind, repo_id)] = repo
        return {"url": url}

    def whoami(self, authorization: str | None) -> dict[str, Any]:
        if authorization != f"Bearer {TOKEN}":
            raise HubError(401, "Invalid credentials in Authorization header")
        return {"type": "user", "name": USER, "orgs": []}

    def repo(self, kind: str, repo_id: str) -> FakeRepo:
        repo = self.repos.get((kind, repo_id))
        if repo is None:
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return repo

    def refs(self, repo: FakeRepo) -> dict[str, Any]:
        branches = [
            {"name": name, "ref": f"refs/heads/{name}", "targetCommit": ref.head}
            for name, ref in sorted(repo.branches.items())
        ]
        return {"branches": branches, "converts": [], "tags": [], "pullRequests": []}

    def create_branch(self, repo: FakeRepo, branch: str, body: dict[str, Any]) -> dict[str, Any]:
        if branch in repo.branches:
            raise HubError(409, f"Branch {branch} already exists")
        start = repo.ref(body.get("startingPoint") or "main")
        if start is None:
            raise HubError(404, "Invalid starting point", "RevisionNotFound")
        repo.branches[branch] = Ref(dict(start.files), start.head)
        return {}

    def existing_ref(self, repo: FakeRepo, revision: str) -> Ref:
        ref = repo.ref(revision)
        if ref is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return ref

    def revision_info(self, repo: FakeRepo, repo_id: str, revision: str) -> dict[str, Any]:
        """`repo_info` at a revision: snapshot_download resolves a branch to its commit."""
        ref = self.existing_ref(repo, revision)
        siblings = [{"rfilename": name} for name in sorted(ref.files)]
        return {"id": repo_id, "sha": ref.head, "private": repo.private, "siblings": siblings}

    def tree(self, repo: FakeRepo, revision: str, path: str, recursive: bool) -> list[Any]:
        ref = self.existing_ref(repo, revision)
        prefix = f"{path}/" if path else ""
        names = sorted(name for name in ref.files if name.startswith(prefix))
        if path and not names:
            raise HubError(404, f"{path} does not exist", "EntryNotFound")
        entries: dict[str, dict[str, Any]] = {}
        for name in names:
            parts = name[len(prefix) :].split("/")
            for depth in range(1, (len(parts) if recursive else 1) + 1):
                entry = prefix + "/".join(parts[:depth])
                if depth < len(parts):
                    entries[entry] = {"type": "directory", "path": entry, "oid": _oid(entry)}
                else:
                    size, oid = len(ref.files[name]), _oid(ref.files[name])
                    entries[entry] = {"type": "file", "path": entry, "size": size, "oid": oid}
        return [entries[key] for key in sorted(entries)]

    def preupload(self, body: dict[str, Any]) -> dict[str, Any]:
        files = [
            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
            for f in body["files"]
        ]
        return {"files": files}

    def commit(
        self, repo: FakeRepo, repo_id: str, revision: str, lines: list[Any], create_pr: bool
    ) -> dict[str, Any]:
        base = repo.ref(revision)
        if base is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        header = lines[0]["value"]
        files = dict(base.files)
        adds, deletes = [], []
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
                adds.append(value["path"])
            elif key == "deletedFile":
                if files.pop(value["path"], None) is None:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                deletes.append(value["path"])
            else:
                raise HubError(400, f"fake hub: unsupported commit operation {key!r}")
        oid = _oid(repo_id, revision, len(self.commits), header["summary"])
        self.commits.append(
            RecordedCommit(repo_id, revision, header["summary"], adds, deletes, create_pr)
        )
        web = f"{self.url}/{URL_PREFIXES[repo.kind]}{repo_id}"
        answer = {"commitUrl": f"{web}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None}
        if create_pr:
            number = len(repo.pull_requests) + 1
            repo.pull_requests[f"refs/pr/{number}"] = Ref(files, oid)
            answer["pullRequestUrl"] = f"{web}/discussions/{number}"
        else:
            base.files, base.head = files, oid
        return answer


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def _serve(self, method: str) -> None:
            split = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(split.query).items()}
            segments = [unquote(s) for s in split.path.split("/")[1:]]
            with hub.lock:
                hub.requests.append((method, split.path))
                try:
                    self._authorize(method)
                    if "resolve" in segments[:4]:
                        return self._send_file(method, segments)
                    body = self._body()
                    self._reply(200, self._route(method, segments, query, body))
                except HubError as exc:
                    self._reply(exc.status, {"error": str(exc), **exc.extra}, exc.code)

        def _authorize(self, method: str) -> None:
            if (
                method not in ("GET", "HEAD")
                and self.headers.get("authorization") != f"Bearer {TOKEN}"
            ):
                raise HubError(401, "Invalid credentials in Authorization header")

        def _visible(self, kind: str, repo_id: str) -> FakeRepo:
            """The repo, unless it is private and the request has no TOKEN: then the
            Hub's answer to an anonymous request, 401 as for a missing repo."""
            repo = hub.repo(kind, repo_id)
            if repo.private and self.headers.get("authorization") != f"Bearer {TOKEN}":
                raise HubError(401, f"Repository {repo_id} not found", "RepoNotFound")
            return repo

        def _body(self) -> bytes:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                raise HubError(413, "Payload too large")
            return self.rfile.read(length)

        def _route(
            self, method: str, segments: list[str], query: dict[str, str], body: bytes
        ) -> Any:
            if method == "POST" and segments == ["api", "repos", "create"]:
                return hub.create_repo(json.loads(body))
            if method == "POST" and segments == ["api", "validate-yaml"]:
                return {"errors": [], "warnings": []}
            if method == "GET" and segments == ["api", "whoami-v2"]:
                return hub.whoami(self.headers.get("authorization"))
            if method == "GET" and segments == ["api", "agent-harnesses"]:
                return {"standardEnvVars": [], "harnesses": {}}  # user-agent detection
            if (
                method == "GET"
                and len(segments) == 4
                and segments[:2] == ["api", segments[1]]
                and segments[1] in TYPES
            ):
                repo_id = f"{segments[2]}/{segments[3]}"
                repo = self._visible(TYPES[segments[1]], repo_id)
                return {"id": repo_id, "sha": repo.branches["main"].head, "private": repo.private}
            if len(segments) >= 5 and segments[0] == "api" and segments[1] in TYPES:
                return self._repo_route(method, segments, query, body)
            hub.unexpected.append((method, self.path))
            raise HubError(404, f"fake hub: no endpoint {method} {self.path}")

        def _repo_route(
            self, method: str, segments: list[str], query: dict[str, str], body: bytes
        ) -> Any:
            kind, repo_id = TYPES[segments[1]], f"{segments[2]}/{segments[3]}"
            repo = self._visible(kind, repo_id)
            action, rest = segments[4], segments[5:]
            if (method, action) == ("GET", "refs"):
                return hub.refs(repo)
            if (method, action) == ("POST", "branch") and len(rest) == 1:
                return hub.create_branch(repo, rest[0], json.loads(body or b"{}"))
            if (method, action) == ("GET", "revision") and len(rest) == 1:
                return hub.revision_info(repo, repo_id, rest[0])
            if (method, action) == ("GET", "tree") and rest:
                recursive = query.get("recursive", "false").lower() == "true"
                return hub.tree(repo, rest[0], "/".join(rest[1:]), recursive)
            if (method, action) == ("POST", "preupload") and len(rest) == 1:
                return hub.preupload(json.loads(body))
            if (method, action) == ("POST", "commit") and len(rest) == 1:
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                return hub.commit(repo, repo_id, rest[0], lines, query.get("create_pr") == "1")
            hub.unexpected.append((method, self.path))
            raise HubError(404, f"fake hub: no endpoint {method} {self.path}")

        def _send_file(self, method: str, segments: list[str]) -> None:
            """`/[kernels/]org/name/resolve/REVISION/PATH`: a file's bytes, with the
            commit and ETag headers hf_hub_download reads from its HEAD request."""
            kind = "kernel" if segments[0] == "kernels" else "model"
            start = 1 if kind == "kernel" else 0
            repo_id = "/".join(segments[start : start + 2])
            revision, path = segments[start + 3], "/".join(segments[start + 4 :])
            ref = self._visible(kind, repo_id).ref(revision)
            if ref is None or path not in ref.files:
                raise HubError(404, f"{path} not found at {revision}", "EntryNotFound")
            data = ref.files[path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("ETag", f'"{_oid(data)}"')
            self.send_header("X-Repo-Commit", ref.head)
            self.end_headers()
            if method == "GET":
                self.wfile.write(data)

        def _reply(self, status: int, payload: Any, code: str | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code:
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", str(payload.get("error", "")))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def repository_files(bundle: Path) -> dict[str, bytes]:
    """`build/<variant>/<file>` for every file of a bundle, as `upload` lays them out."""
    return {
        f"build/{path.relative_to(bundle).as_posix()}": path.read_bytes()
        for path in sorted(bundle.rglob("*"))
        if path.is_file()
    }


@contextmanager
def serving_downloads(monkeypatch: Any, cache: Path) -> Iterator[FakeHub]:
    """A FakeHub that huggingface_hub reaches for API calls and downloads (HF_ENDPOINT and
    the URL template it made of the endpoint at import), with a download cache of its own;
    no request it could not answer."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    with FakeHub() as server:
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        template = f"{server.url}/{{repo_id}}/resolve/{{revision}}/{{filename}}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server
    assert server.unexpected == []
