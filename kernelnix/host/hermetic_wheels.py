"""The wheels the hermetic toolchain fetches, and their lock file.

matrix.json's `hermetic` part names them: a Torch release per Torch version
(`torch-releases`), a wheel flavor per backend (`cpu`, `cu126`, `rocm7.1`,
`xpu`), the Python tag (`cp313`) and the systems; plus pinned Python packages
(`python-wheels`: the `kernels` loader). Nix's fetchurl needs each file's URL
and sha256: `kernelnix/data/wheel-lock.json` records them, and
`kernelnix lock-wheels` (`lock`) fills it on a machine with network access.

Where a wheel comes from: the package indexes of matrix.json, in order
(download.pytorch.org's `/whl/<flavor>/torch/`, then PyPI), which publish the
sha256 next to every file. A file counts when its name is the release for the
system's architecture and the Python tag, and its build is the flavor: the
local version (`2.13.0+cu126`) says so, and an untagged file (PyPI's) is
opened remotely (HTTP range requests, a few hundred kB) to read
`torch/version.py`. nix/toolchains/hermetic/select.nix computes the same list
of wheels from the same data (tests/e2e/test_hermetic.py compares them).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import re
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from kernelnix.core.fileio import write_atomic
from kernelnix.host.environments import LOCK_FILE
from kernelnix.variants.matrix import matrix_data

PYPI_SIMPLE = "https://pypi.org/simple/{name}/"
LOCK_COMMENT = (
    "Written by `kernelnix lock-wheels` (kernelnix/host/hermetic_wheels.py) from matrix.json's "
    "`hermetic` part: URL and sha256 (SRI) of every wheel the hermetic toolchain fetches. A wheel "
    "missing here is not locked yet; Nix names the command when a build needs it."
)
TIMEOUT = 120


def fill(template: str, version: str) -> str:
    """`fill("cu{major}{minor}", "12.6") == "cu126"` (missing components are 0)."""
    parts = [*version.split("."), "0", "0", "0"]
    for name, value in zip(("major", "minor", "patch"), parts, strict=False):
        template = template.replace("{" + name + "}", value)
    return template


@dataclass(frozen=True, order=True)
class TorchWheel:
    """One Torch wheel: a release for a system, of a flavor, for a Python tag."""

    release: str
    system: str
    flavor: str
    python: str

    def describe(self) -> str:
        return f"torch {self.release} {self.flavor} {self.python} {self.system}"


@dataclass(frozen=True, order=True)
class PythonWheel:
    """A pinned Python package's wheel for one system (the `kernels` loader)."""

    name: str
    version: str
    system: str
    python: str

    def describe(self) -> str:
        return f"{self.name} {self.version} {self.system}"


def needed_torch_wheels(matrix: dict[str, Any] | None = None) -> list[TorchWheel]:
    """Every Torch wheel of the hermetic toolchain: build sets of its systems
    whose backend has a wheel flavor (select.nix's `wheelKeys`)."""
    matrix = matrix or matrix_data()
    data = matrix["hermetic"]
    flavors = data["torch-wheels"]["flavor"]
    found: list[TorchWheel] = []
    for system in data["systems"]:
        for build_set in matrix["build-sets"]:
            if system not in build_set["systems"] or build_set["backend"] not in flavors:
                continue
            wheel = TorchWheel(
                release=data["torch-releases"][build_set["torch"]],
                system=system,
                flavor=fill(flavors[build_set["backend"]], build_set.get("version") or "0"),
                python=data["python"]["wheel-tag"],
            )
            if wheel not in found:
                found.append(wheel)
    return found


def needed_python_wheels(matrix: dict[str, Any] | None = None) -> list[PythonWheel]:
    matrix = matrix or matrix_data()
    data = matrix["hermetic"]
    return [
        PythonWheel(name, version, system, data["python"]["wheel-tag"])
        for name, version in sorted(data["python-wheels"].items())
        for system in data["systems"]
    ]


# --- package indexes ---------------------------------------------------------


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _open(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> Any:
    request = urllib.request.Request(
        url, headers={"User-Agent": "kernelnix", **(headers or {})}, method=method
    )
    return urllib.request.urlopen(request, timeout=TIMEOUT)


@functools.cache
def read_index(url: str) -> list[IndexFile]:
    """The files of a simple-API project page (PEP 691 JSON or PEP 503 HTML)."""
    accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.5"
    with _open(url, {"Accept": accept}) as response:
        body = response.read().decode()
    if body.lstrip().startswith("{"):
        return [
            IndexFile(f["filename"], urllib.parse.urljoin(url, f["url"]), f["hashes"].get("sha256"))
            for f in json.loads(body)["files"]
        ]
    parser = _Anchors()
    parser.feed(body)
    files = []
    for href, text in parser.links:
        absolute, _, fragment = urllib.parse.urljoin(url, href).partition("#")
        sha256 = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        name = text or urllib.parse.unquote(absolute.rsplit("/", 1)[-1])
        files.append(IndexFile(name, absolute, sha256))
    return files


def _platform_matches(platform: str, arch: str) -> bool:
    tag = re.compile(rf"(manylinux_\d+_\d+|manylinux\d+|linux)_{re.escape(arch)}")
    return any(tag.fullmatch(part) for part in platform.split("."))


def torch_candidates(files: Iterable[IndexFile], wheel: TorchWheel, arch: str) -> list[IndexFile]:
    """Files of an index that may be `wheel`: the release, the Python tag, the
    architecture, and the flavor as local version or none."""
    pattern = re.compile(
        rf"torch-{re.escape(wheel.release)}(?:\+(?P<local>[^-]+))?-"
        rf"{wheel.python}-{wheel.python}-(?P<platform>[^-]+)\.whl"
    )
    found = []
    for file in files:
        match = pattern.fullmatch(urllib.parse.unquote(file.filename))
        if not match or not _platform_matches(match["platform"], arch):
            continue
        if match["local"] in (None, wheel.flavor):
            found.append(file)
    return found


class _RangeFile(io.RawIOBase):
    """A remote file read with HTTP range requests (for zipfile)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        with _open(url, method="HEAD") as response:
            self.size = int(response.headers["Content-Length"])

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer: Any) -> int:
        if self.pos >= self.size:
            return 0
        end = min(self.pos + len(buffer), self.size) - 1
        with _open(self.url, {"Range": f"bytes={self.pos}-{end}"}) as response:
            data = response.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def open_wheel(url: str) -> zipfile.ZipFile:
    """A wheel on disk (file://) or read remotely, member by member."""
    if url.startswith("file://"):
        return zipfile.ZipFile(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    return zipfile.ZipFile(io.BufferedReader(_RangeFile(url), buffer_size=1 << 20))


@functools.cache
def torch_build_version(url: str) -> str | None:
    """`__version__` of torch/version.py inside a remote wheel (`2.13.0+cu130`)."""
    with open_wheel(url) as wheel:
        name = next((n for n in wheel.namelist() if n.endswith("torch/version.py")), None)
        if name is None:
            return None
        text = wheel.read(name).decode()
    match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return match[1] if match else None


def wheel_requirements(url: str) -> list[str]:
    """The unconditional requirements of a wheel (METADATA's Requires-Dist without
    a marker), as nixpkgs attribute names (`huggingface-hub`)."""
    with open_wheel(url) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        text = wheel.read(name).decode()
    names = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:") and ";" not in line:
            requirement = line.removeprefix("Requires-Dist:").strip()
            found = re.match(r"[A-Za-z0-9._-]+", requirement)
            if found:
                names.append(re.sub(r"[._]", "-", found[0].lower()))
    return sorted(set(names))


def sri(sha256_hex: str) -> str:
    return "sha256-" + base64.b64encode(bytes.fromhex(sha256_hex)).decode()


def download_sha256(url: str) -> str:
    digest = hashlib.sha256()
    with _open(url) as response:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- locking -----------------------------------------------------------------


@dataclass
class LockResult:
    lock: dict[str, Any]
    locked: list[str]
    kept: list[str]
    missing: list[str]


def _arch(matrix: dict[str, Any], system: str) -> str:
    return str(matrix["hermetic"]["torch-wheels"]["platforms"][system])


def lock_torch_wheel(
    wheel: TorchWheel, indexes: list[str], arch: str, log: Callable[[str], None]
) -> dict[str, Any] | None:
    for template in indexes:
        index = template.replace("{flavor}", wheel.flavor)
        try:
            files = read_index(index)
        except OSError as error:
            log(f"  {index}: {error}")
            continue
        for file in torch_candidates(files, wheel, arch):
            source = index
            if f"+{wheel.flavor}" not in urllib.parse.unquote(file.filename):
                # An untagged file (PyPI's): its build says which flavor it is.
                try:
                    built = torch_build_version(file.url)
                except (OSError, zipfile.BadZipFile) as error:
                    log(f"  {file.url}: cannot read torch/version.py: {error}")
                    continue
                if built != f"{wheel.release}+{wheel.flavor}":
                    continue
                source = f"{index} (torch/version.py: {built})"
            sha256 = file.sha256 or download_sha256(file.url)
            return {"url": file.url, "hash": sri(sha256), "python": wheel.python, "source": source}
    return None


def lock_python_wheel(
    wheel: PythonWheel, pypi: str, arch: str, log: Callable[[str], None]
) -> dict[str, Any] | None:
    index = pypi.replace("{name}", wheel.name)
    try:
        files = read_index(index)
    except OSError as error:
        log(f"  {index}: {error}")
        return None
    prefix = f"{wheel.name.replace('-', '_')}-{wheel.version}-"
    ranked: list[tuple[int, IndexFile]] = []
    for file in files:
        if not (file.filename.startswith(prefix) and file.filename.endswith(".whl")):
            continue
        python, abi, platform = file.filename.removesuffix(".whl").split("-")[-3:]
        if platform == "any" and abi == "none":
            ranked.append((0, file))
        elif abi == "abi3" and _platform_matches(platform, arch):
            ranked.append((1, file))
        elif python == wheel.python and abi == wheel.python and _platform_matches(platform, arch):
            ranked.append((2, file))
    if not ranked:
        return None
    file = min(ranked, key=lambda item: item[0])[1]
    sha256 = file.sha256 or download_sha256(file.url)
    return {
        "url": file.url,
        "hash": sri(sha256),
        "dependencies": wheel_requirements(file.url),
        "source": index,
    }


def read_lock(path: Path = LOCK_FILE) -> dict[str, Any]:
    if not path.exists():
        return {"comment": LOCK_COMMENT, "torch": {}, "python": {}}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def lock(
    *,
    path: Path = LOCK_FILE,
    indexes: list[str] | None = None,
    pypi: str = PYPI_SIMPLE,
    refresh: bool = False,
    matrix: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
) -> LockResult:
    """Lock every needed wheel: entries already locked are kept (unless
    `refresh`), entries no longer needed are dropped, the others are looked up."""
    matrix = matrix or matrix_data()
    indexes = indexes or list(matrix["hermetic"]["torch-wheels"]["indexes"])
    old = read_lock(path)
    new: dict[str, Any] = {"comment": LOCK_COMMENT, "torch": {}, "python": {}}
    result = LockResult(new, [], [], [])
    for wheel in needed_torch_wheels(matrix):
        entry = old.get("torch", {}).get(wheel.release, {}).get(wheel.system, {}).get(wheel.flavor)
        if entry and entry.get("hash") and entry.get("python") == wheel.python and not refresh:
            result.kept.append(wheel.describe())
        else:
            log(f"locking {wheel.describe()}")
            entry = lock_torch_wheel(wheel, indexes, _arch(matrix, wheel.system), log)
        if entry is None:
            result.missing.append(wheel.describe())
            continue
        if wheel.describe() not in result.kept:
            result.locked.append(wheel.describe())
        new["torch"].setdefault(wheel.release, {}).setdefault(wheel.system, {})[wheel.flavor] = (
            entry
        )
    for pywheel in needed_python_wheels(matrix):
        old_python = old.get("python", {}).get(pywheel.name, {}).get(pywheel.version, {})
        entry = old_python.get(pywheel.system)
        if entry and entry.get("hash") and not refresh:
            result.kept.append(pywheel.describe())
        else:
            log(f"locking {pywheel.describe()}")
            entry = lock_python_wheel(pywheel, pypi, _arch(matrix, pywheel.system), log)
            if entry is None:
                result.missing.append(pywheel.describe())
                continue
            result.locked.append(pywheel.describe())
        versions = new["python"].setdefault(pywheel.name, {})
        versions.setdefault(pywheel.version, {})[pywheel.system] = entry
    if "host" in old:
        new["host"] = old["host"]  # kernelnix.host.host_wheels locks it
    write_atomic(path, json.dumps(new, indent=2, sort_keys=True) + "\n")
    return result
