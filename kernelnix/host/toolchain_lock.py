"""The hermetic toolchain's lock (`kernelnix lock-toolchain`): every artifact that
nix/registry/ builds the toolchain from, resolved to URL, hash and size.

kernelnix/data/toolchain.json names the parts (Debian packages, the npm
bootstrap tarball, PyPI wheels and ninja's sdist); this module finds each in the
apt indexes, the npm registry and PyPI and writes kernelnix/data/toolchain-lock.json,
which Nix reads with builtins.fromJSON. Debian's mirror keeps only the versions its
current indexes name, so a lock goes stale when Debian publishes a point release:
re-running the command is the fix its fetch errors name.
"""

from __future__ import annotations

import json
import lzma
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernelnix.core.fileio import write_atomic
from kernelnix.host.hermetic_wheels import IndexFile, _open, read_index, sri
from kernelnix.host.host_wheels import Resolver, Target

DATA = Path(__file__).resolve().parent.parent / "data"
SPEC_FILE = DATA / "toolchain.json"
LOCK_FILE = DATA / "toolchain-lock.json"
LOCK_COMMAND = "kernelnix lock-toolchain"
NPM_REGISTRY = "https://registry.npmjs.org"
PYTHON_TAG = "cp311"
LOCK_COMMENT = (
    "Written by `kernelnix lock-toolchain` from kernelnix/data/toolchain.json: the "
    "artifacts nix/registry/ builds the hermetic toolchain from, per system. Do not edit "
    "by hand; re-run the command when a Debian point release drops a locked version."
)


@dataclass(frozen=True)
class DebPackage:
    """One stanza of a Debian `Packages` index."""

    name: str
    version: str
    architecture: str
    url: str
    sha256: str
    size: int


# dpkg's version order (deb-version(7)): epoch, then upstream and revision compared
# part by part, `~` sorting before everything, even the end of the string.
def _order(char: str) -> int:
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    while a or b:
        a_text = re.match(r"[^0-9]*", a).group()  # type: ignore[union-attr]
        b_text = re.match(r"[^0-9]*", b).group()  # type: ignore[union-attr]
        for k in range(max(len(a_text), len(b_text))):
            x = _order(a_text[k]) if k < len(a_text) else 0
            y = _order(b_text[k]) if k < len(b_text) else 0
            if x != y:
                return -1 if x < y else 1
        a, b = a[len(a_text) :], b[len(b_text) :]
        a_num = re.match(r"[0-9]*", a).group()  # type: ignore[union-attr]
        b_num = re.match(r"[0-9]*", b).group()  # type: ignore[union-attr]
        if int(a_num or 0) != int(b_num or 0):
            return -1 if int(a_num or 0) < int(b_num or 0) else 1
        a, b = a[len(a_num) :], b[len(b_num) :]
    return 0


def compare_debian_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as Debian version `a` sorts before, with or after `b`."""

    def split(version: str) -> tuple[int, str, str]:
        epoch, _, rest = version.rpartition(":") if ":" in version else ("0", "", version)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
        return int(epoch or 0), upstream, revision

    (ea, ua, ra), (eb, ub, rb) = split(a), split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def parse_packages(text: str, mirror: str) -> list[DebPackage]:
    """The packages of a `Packages` index whose pool is under `mirror`."""
    packages = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if {"Package", "Version", "Architecture", "Filename", "SHA256", "Size"} <= fields.keys():
            packages.append(
                DebPackage(
                    name=fields["Package"],
                    version=fields["Version"],
                    architecture=fields["Architecture"],
                    url=f"{mirror}/{urllib.parse.quote(fields['Filename'])}",
                    sha256=fields["SHA256"],
                    size=int(fields["Size"]),
                )
            )
    return packages


def mirror_of(index_url: str) -> str:
    """`http://deb.debian.org/debian/dists/bookworm/...` -> `http://deb.debian.org/debian`."""
    root, found, _ = index_url.partition("/dists/")
    if not found:
        raise ValueError(f"{index_url}: not a Debian index URL (no /dists/ in it)")
    return root


def read_debian_index(url: str) -> list[DebPackage]:
    """The packages of one `Packages.xz` (or plain `Packages`) index."""
    with _open(url) as response:
        body = response.read()
    if url.endswith(".xz"):
        body = lzma.decompress(body)
    return parse_packages(body.decode(), mirror_of(url))


def newest(packages: Iterable[DebPackage], architecture: str) -> dict[str, DebPackage]:
    """The newest version of each package built for `architecture` (or `all`)."""
    chosen: dict[str, DebPackage] = {}
    for package in packages:
        if package.architecture not in (architecture, "all"):
            continue
        old = chosen.get(package.name)
        if old is None or compare_debian_versions(package.version, old.version) > 0:
            chosen[package.name] = package
    return chosen


def _deb_entry(package: DebPackage) -> dict[str, Any]:
    return {
        "version": package.version,
        "architecture": package.architecture,
        "url": package.url,
        "sha256": package.sha256,
        "size": package.size,
    }


def npm_entry(registry: str, name: str, version: str) -> dict[str, Any]:
    """An npm tarball's URL and integrity hash (SRI) from the registry."""
    with _open(f"{registry}/{name}/{version}") as response:
        dist = json.load(response)["dist"]
    return {"name": name, "version": version, "url": dist["tarball"], "hash": dist["integrity"]}


def python_roots(spec: dict[str, Any]) -> list[Requirement]:
    """What the toolchain's Python needs: kernelnix's dependencies (extras left out)
    and the spec's packages (the `kernels` loader of the import check)."""
    own = [
        Requirement(line)
        for line in metadata.requires("kernelnix") or []
        if "extra ==" not in line.replace('extra=="', 'extra == "')
    ]
    return [*own, *(Requirement(line) for line in spec["pypi"]["python"])]


def _file_entry(file: IndexFile) -> dict[str, str]:
    if file.sha256 is None:
        raise OSError(f"{file.url}: the index publishes no sha256 for it")
    return {"filename": file.filename, "url": file.url, "hash": sri(file.sha256)}


def sdist_entry(pypi: str, line: str) -> dict[str, str] | str:
    """A pinned sdist (`ninja==1.13.0`) from the index, or why not."""
    requirement = Requirement(line)
    name = str(canonicalize_name(requirement.name))
    for file in read_index(pypi.replace("{name}", name)):
        stem = file.filename.removesuffix(".tar.gz")
        version = stem.rpartition("-")[2]
        if file.filename.endswith(".tar.gz") and requirement.specifier.contains(version):
            return _file_entry(file)
    return f"no sdist of {line} on {pypi}"


def lock_system(
    spec: dict[str, Any],
    system: str,
    indexes: dict[str, list[DebPackage]],
    resolver: Resolver,
    pypi: str,
    npm: str,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """One system's lock entry, and what could not be found."""
    facts = spec["systems"][system]
    available = newest(
        (p for url in spec["debian"]["indexes"] for p in indexes[fill(url, facts)]),
        facts["debian-arch"],
    )
    missing: list[str] = []
    groups: dict[str, list[str]] = {}
    debs: dict[str, Any] = {}
    for group, names in spec["debs"].items():
        groups[group] = [fill(name, facts) for name in names]
        for name in groups[group]:
            if name in available:
                debs[name] = _deb_entry(available[name])
            else:
                missing.append(f"{system}: Debian package {name} ({facts['debian-arch']})")
    target = Target(system, PYTHON_TAG)
    tools: dict[str, Any] = {}
    for line in spec["pypi"]["tools"]:
        log(f"resolving {line} for {system}")
        file = resolver.best(Requirement(line).name, Requirement(line).specifier, target)
        if file is None:
            missing.append(f"{system}: no wheel of {line} for {system}")
        else:
            tools[str(canonicalize_name(Requirement(line).name))] = _file_entry(file)
    source = sdist_entry(pypi, spec["pypi"]["ninja-source"])
    if isinstance(source, str):
        missing.append(source)
    else:
        tools["ninja-source"] = source
    log(f"resolving the Python packages for {PYTHON_TAG} {system}")
    found = resolver.closure(python_roots(spec), target, {})
    python: list[dict[str, str]] = []
    if isinstance(found, str):
        missing.append(f"{system}: {found}")
    else:
        python = [_file_entry(resolver.files[name]) for name in found]
    bootstrap = spec["npm"]["bootstrap"]
    entry = {
        "debian-arch": facts["debian-arch"],
        "npm-arch": facts["npm-arch"],
        "groups": groups,
        "debs": dict(sorted(debs.items())),
        "npm": npm_entry(npm, bootstrap["name"], bootstrap["version"]),
        "tools": tools,
        "python-tag": PYTHON_TAG,
        "python": python,
    }
    return entry, missing


def fill(template: str, facts: dict[str, str]) -> str:
    """`binutils-{binutils-arch}-linux-gnu` with a system's facts filled in."""
    return re.sub(r"\{([a-z-]+)\}", lambda m: facts[m.group(1)], template)


def lock_toolchain(
    spec_file: Path,
    lock_file: Path,
    pypi: str,
    npm: str,
    log: Callable[[str], None],
) -> list[str]:
    """Write the lock of every system in the spec; what could not be found."""
    spec = json.loads(spec_file.read_text())
    systems = spec["systems"].values()
    index_urls = sorted({fill(u, facts) for u in spec["debian"]["indexes"] for facts in systems})
    indexes = {}
    for url in index_urls:
        log(f"reading {url}")
        indexes[url] = read_debian_index(url)
    resolver = Resolver(pypi, log)
    locked: dict[str, Any] = {}
    missing: list[str] = []
    for system in spec["systems"]:
        locked[system], lacking = lock_system(spec, system, indexes, resolver, pypi, npm, log)
        missing.extend(lacking)
    text = json.dumps({"comment": LOCK_COMMENT, "systems": locked}, indent=1) + "\n"
    write_atomic(lock_file, text)
    return missing
