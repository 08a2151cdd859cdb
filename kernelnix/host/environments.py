"""A variant's own Torch (and CUDA toolkit), from the locked wheels.

The `host` part of kernelnix/data/wheel-lock.json (kernelnix.host.host_wheels
writes it) names, per system, Python tag and build set, the wheels a variant
builds and imports against. `kernelnix build --local` fetches each wheel once
into kernelnix's cache (its sha256 checked against the lock), unpacks it once,
and merges a build set's wheels into an environment of links
(kernelnix.host.wheel_tree), the `PYTHONPATH` of that variant's build step. The
host toolchain's Nix derivations do the same in the store
(nix/toolchains/host/wheels.nix).

Cache layout (`$KERNELNIX_CACHE`, else `$XDG_CACHE_HOME/kernelnix`, else
`~/.cache/kernelnix`): `wheels/<file>` (only complete, verified files carry
the wheel's name; a download in progress is `<file>.part`; with Nix the wheel
moves to the store path of the host toolchain's fetch of it instead),
`unpacked/<file>/`, `environments/<digest>-<build set>/`.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.host import glibc_target
from kernelnix.host.wheel_tree import TreeError, find_nvcc, merge, unpack
from kernelnix.variants.names import build_set_key as lock_key

# The one wheel lock: its `torch` and `python` parts are the hermetic toolchain's
# (kernelnix.host.hermetic_wheels), its `host` part the host toolchain's
# (kernelnix.host.host_wheels); both write it, this module reads it.
LOCK_FILE = Path(__file__).resolve().parents[1] / "data" / "wheel-lock.json"
CHUNK = 1 << 20
T = TypeVar("T")
TIMEOUT = 120


class BuildSetOf(Protocol):
    """What the lock needs of a variant (a PlanVariant has it): its build set."""

    @property
    def system(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def torch(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def backend_version(self) -> str | None: ...
    @property
    def tvm_ffi(self) -> str | None: ...


@dataclass(frozen=True)
class LockedWheel:
    """A locked file: a wheel, or one of the hermetic toolchain's artifacts (a .deb,
    an sdist, an npm tarball), and the lock and command that name it, for errors."""

    name: str
    url: str
    hash: str  # SRI: sha256-<base64> (sha512 for npm tarballs)
    label: str = ""  # what it is: "the Debian package gcc-12 12.2.0-14+deb12u1 (amd64)"
    lock: str = "the wheel lock (kernelnix/data/wheel-lock.json)"
    relock: str = "kernelnix lock-wheels"

    def describe(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class LockedEnvironment:
    """The wheels of one build set for one system and Python tag."""

    key: str
    torch: str
    wheels: tuple[LockedWheel, ...]

    def describe(self) -> str:
        """`torch 2.14.1+cu130`, `python-depends-einops`: for the build's log."""
        return f"torch {self.torch}" if self.torch else self.key

    @property
    def digest(self) -> str:
        joined = "\n".join(sorted(w.hash for w in self.wheels))
        return hashlib.sha256(joined.encode()).hexdigest()[:16]


def python_tag() -> str:
    """The wheel tag of the running interpreter (`cp311`)."""
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def build_set_key(variant: BuildSetOf) -> str:
    """How the lock names a variant's build set."""
    return lock_key(variant.torch, variant.backend, variant.backend_version)


def lock_file() -> Path:
    """kernelnix's wheel lock, or the one `KERNELNIX_WHEEL_LOCK` names (a lock
    of your own, written by `kernelnix lock-wheels --lock-file`)."""
    chosen = os.environ.get("KERNELNIX_WHEEL_LOCK")
    return Path(chosen) if chosen else LOCK_FILE


def host_lock() -> dict[str, Any]:
    return _read_host_lock(lock_file())


# The lock's part that names header dependencies' wheels (kernelnix.host.header_wheels).
HEADER_DEPENDS_KEY = "header-depends"


def header_wheel_locked(key: str) -> bool:
    """Whether the lock names a wheel of header dependency `key` (PyPI has one of its
    release) for any system."""
    by_system = host_lock().get(HEADER_DEPENDS_KEY, {})
    return any("wheel" in entries.get(key, {}) for entries in by_system.values())


@cache
def _read_host_lock(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text()).get("host", {})
    except (OSError, json.JSONDecodeError) as error:
        raise UserError.single(
            f"cannot read the wheel lock {path}: {error}",
            fix="point KERNELNIX_WHEEL_LOCK at a lock written by `kernelnix lock-wheels`, "
            "or unset it",
        ) from error
    return data


# The noarch variants build --local builds in a locked Torch: a CUDA one's import
# check needs a CUDA Torch; the others load in the build Python's (the lock's `cpu`
# choice is the hermetic toolchain's, which has no Torch of its own).
LOCKED_NOARCH_BACKENDS = ("cuda",)


def locked_environment(
    variant: BuildSetOf, tag: str | None = None, lock: dict[str, Any] | None = None
) -> LockedEnvironment | None:
    """The locked environment of a compiled variant, or of a noarch one of a backend
    that loads in a locked Torch (the lock's `noarch` choice: a CUDA noarch
    variant's import check and tests run in a CUDA Torch), or of a tvm-ffi
    variant (_tvm_ffi_wheels); None otherwise."""
    lock = host_lock() if lock is None else lock
    tag = tag or python_tag()
    if variant.kind == "tvm-ffi":
        names = _tvm_ffi_wheels(variant, tag, lock)
        if names is None:
            return None
        key, torch = tvm_ffi_key(variant), ""
    else:
        if variant.kind == "noarch":
            if variant.backend not in LOCKED_NOARCH_BACKENDS:
                return None
            noarch = lock.get("noarch", {}).get(variant.system, {}).get(tag, {})
            key = noarch.get(variant.backend)
            if key is None:
                return None
        else:
            key = build_set_key(variant)
        entry = _build_set_entry(lock, variant.system, tag, key)
        if entry is None:
            return None
        names, torch = [*entry["wheels"], *entry.get("toolkit", [])], entry["torch"]
    wheels = lock["wheels"]
    return LockedEnvironment(
        key=key,
        torch=torch,
        wheels=tuple(LockedWheel(n, wheels[n]["url"], wheels[n]["hash"]) for n in names),
    )


# The backends kernelnix compiles tvm-ffi kernels for: ROCm, XPU and Metal
# kernels would need their toolkits without a Torch to bring them (not done yet).
TVM_FFI_BACKENDS = ("cpu", "cuda")


def tvm_ffi_key(variant: BuildSetOf) -> str:
    """`tvm-ffi-0.1-cuda-13`: the name of a tvm-ffi variant's environment
    (nix/toolchains/host/wheels.nix's entryKey forms the same)."""
    return f"tvm-ffi-{lock_key(variant.tvm_ffi or '', variant.backend, variant.backend_version)}"


def _tvm_ffi_wheels(variant: BuildSetOf, tag: str, lock: dict[str, Any]) -> list[str] | None:
    """A tvm-ffi variant builds against apache-tvm-ffi, not Torch: the lock's
    python-depends `tvm-ffi` wheels, for CUDA with the toolkit of the build set of
    the Torch entry the variant comes from; None for other backends or what the
    lock lacks (nix/toolchains/host/wheels.nix's tvmFfiEntry picks the same)."""
    if variant.backend not in TVM_FFI_BACKENDS:
        return None
    framework = _tvm_ffi_framework(variant.system, tag, lock)
    if framework is None or variant.backend == "cpu":
        return framework
    build_set = _build_set_entry(lock, variant.system, tag, build_set_key(variant))
    return None if build_set is None else [*framework, *build_set.get("toolkit", [])]


def _tvm_ffi_framework(system: str, tag: str, lock: dict[str, Any]) -> list[str] | None:
    """The lock's apache-tvm-ffi wheels (and what they require), or None."""
    depends = lock.get(PYTHON_DEPENDS_KEY, {}).get(system, {}).get(tag, {})
    wheels: list[str] | None = depends.get(TVM_FFI_DEPENDS, {}).get("wheels")
    return wheels


def _build_set_entry(
    lock: dict[str, Any], system: str, tag: str, key: str
) -> dict[str, Any] | None:
    """The lock's environment of a build set (`2.12-cuda-13`), or None."""
    environments = lock.get("environments", {}).get(system, {}).get(tag, {})
    entry: dict[str, Any] | None = environments.get(key)
    return entry


PYTHON_DEPENDS_KEY = "python-depends"
# The python-depends name of apache-tvm-ffi: a tvm-ffi variant's framework.
TVM_FFI_DEPENDS = "tvm-ffi"


def locked_python_depends(
    names: list[str], system: str, tag: str | None = None, lock: dict[str, Any] | None = None
) -> list[LockedEnvironment]:
    """The environments of a variant's python-depends `names` (their wheels and
    what they require; kernelnix.host.python_wheels locks them), the preferred
    first, then one per further release a name's lock holds (`alternatives`),
    the others' preferred ones beside it; none without python-depends. A
    UserError names each name the lock has no wheels of."""
    if not names:
        return []
    lock = host_lock() if lock is None else lock
    tag = tag or python_tag()
    entries = lock.get(PYTHON_DEPENDS_KEY, {}).get(system, {}).get(tag, {})
    problems = []
    releases: list[list[list[str]]] = []
    for name in names:
        entry = entries.get(name, {})
        if "wheels" in entry:
            releases.append([entry["wheels"], *entry.get("alternatives", [])])
            continue
        why = entry.get("missing") or f"the lock has no python-depends for {tag} on {system}"
        problems.append(
            Diagnostic(
                f"python-depends {name!r}: the wheel lock {lock_file()} holds no wheels of it "
                f"for {tag} on {system}: {why}",
                key="general.python-depends",
                fix="run `kernelnix lock-wheels` (with `--python "
                f"{tag}` if the lock lacks this Python), then build again",
            )
        )
    if problems:
        raise UserError(problems)
    wheels = lock["wheels"]
    key = f"{PYTHON_DEPENDS_KEY}-{'-'.join(sorted(names))}"
    found = []
    for index, chosen in enumerate(each_release(releases)):
        files = dict.fromkeys(f for release in chosen for f in release)
        found.append(
            LockedEnvironment(
                key=key if index == 0 else f"{key}-alternative-{index}",
                torch="",
                wheels=tuple(LockedWheel(n, wheels[n]["url"], wheels[n]["hash"]) for n in files),
            )
        )
    return found


def each_release(choices: Sequence[Sequence[T]]) -> list[list[T]]:
    """Release i of several things, each with its releases in order of preference:
    each thing's i-th, or its last where it has fewer (one release of nothing
    without things). nix/toolchains/host/wheels.nix's releaseWheels picks the same."""
    count = max(map(len, choices), default=1)
    return [[c[min(i, len(c) - 1)] for c in choices] for i in range(count)]


def not_locked_reason(
    variant: BuildSetOf, tag: str | None = None, lock: dict[str, Any] | None = None
) -> str:
    """Why the lock holds no environment for `variant` with this Python."""
    lock = host_lock() if lock is None else lock
    tag = tag or python_tag()
    system = variant.system
    if variant.kind == "tvm-ffi":
        return _tvm_ffi_not_locked(variant, tag, lock)
    recorded = lock.get("missing", {}).get(system, {}).get(tag, {}).get(build_set_key(variant))
    if recorded:
        return str(recorded)
    if tag not in lock.get("environments", {}).get(system, {}):
        locked = sorted(lock.get("environments", {}).get(system, {})) or ["none"]
        return (
            f"the wheel lock has no environments for {tag} (this Python) on {system}, "
            f"only for {', '.join(locked)}; run `kernelnix lock-wheels --python {tag}` "
            "or build with one of those Pythons"
        )
    return f"the wheel lock has no {build_set_key(variant)} environment for {tag} on {system}"


def _tvm_ffi_not_locked(variant: BuildSetOf, tag: str, lock: dict[str, Any]) -> str:
    """Why _tvm_ffi_wheels found nothing (wheels.nix's tvmFfiMissing says the same)."""
    if variant.backend not in TVM_FFI_BACKENDS:
        return (
            f"kernelnix builds tvm-ffi kernels for {' and '.join(TVM_FFI_BACKENDS)} only, "
            f"not {variant.backend} yet"
        )
    if _tvm_ffi_framework(variant.system, tag, lock) is None:
        return (
            f"the wheel lock holds no python-depends {TVM_FFI_DEPENDS!r} (apache-tvm-ffi) "
            f"for {tag} on {variant.system}; run `kernelnix lock-wheels`"
        )
    return (
        f"the wheel lock has no {build_set_key(variant)} environment for {tag} on "
        f"{variant.system} to take the CUDA toolkit from"
    )


def cache_dir() -> Path:
    chosen = os.environ.get("KERNELNIX_CACHE")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelnix"


def sri_sha256(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return f"{algorithm}-" + base64.b64encode(digest.digest()).decode()


def _download(url: str, part: Path) -> None:
    """Append the rest of `url` to `part` (a new file, or one an interrupted
    download left: the server is asked for the remaining bytes)."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "kernelnix", **({"Range": f"bytes={have}-"} if have else {})}
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        if error.code == 416:  # nothing left to fetch: the file is complete
            return
        raise
    with response:
        # 206: the rest; 200: the server ignored the range and sends it all.
        mode = "ab" if have and response.status == 206 else "wb"
        length = response.headers.get("Content-Length")
        with open(part, mode) as out:
            start = out.tell()
            shutil.copyfileobj(response, out, CHUNK)
            received = out.tell() - start
    # http.client returns a short body when the connection closes early: the
    # part is kept for the next try to resume.
    if length is not None and received < int(length):
        raise OSError(f"the connection closed after {received} of {length} bytes")


def nix_store(*args: str) -> str | None:
    """`nix-store ARGS`' output, or None without Nix (or when it fails)."""
    program = shutil.which("nix-store")
    if program is None:
        return None
    done = subprocess.run([program, *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def store_path(wheel: LockedWheel) -> Path | None:
    """Where Nix keeps the wheel (the host toolchain's fixed-output fetch of it)."""
    algorithm, _, encoded = wheel.hash.partition("-")
    digest = base64.b64decode(encoded).hex()
    found = nix_store("--print-fixed-path", algorithm, digest, wheel.name)
    return Path(found) if found else None


def fetch_wheel(
    wheel: LockedWheel, cache: Path, log: Callable[[str], None], archives: Sequence[str] = ()
) -> Path:
    """The wheel, downloaded when missing and checked against the lock: in the
    Nix store where Nix is (so `nix build` and `build --local` fetch it once per
    machine), else in the cache. One its server no longer has comes from the
    first of `archives` (binary caches) that holds its store path."""
    path = cache / "wheels" / wheel.name
    if path.exists():
        return path
    stored = store_path(wheel)
    if stored is not None and stored.exists():
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    log(f"+ fetch {wheel.url}")
    try:
        _download(wheel.url, part)
    except (OSError, http.client.HTTPException) as error:
        if _gone(error) and stored is not None and _from_archives(stored, archives, log):
            return stored
        raise _fault(error, f"fetching {wheel.url} into {part}", wheel, archives) from error
    algorithm = wheel.hash.partition("-")[0]
    found = sri_sha256(part, algorithm)
    if found != wheel.hash:
        part.unlink()
        raise UserError.single(
            f"{wheel.describe()} from {wheel.url} has {algorithm} {found}, but {wheel.lock} "
            f"records {wheel.hash}; the download was removed",
            fix="run it again (a broken download is fetched anew); if it persists, the "
            f"file on the server changed: run `{wheel.relock}` and review the lock's diff",
        )
    os.replace(part, path)
    if stored is not None and nix_store("--add-fixed", algorithm, str(path)) == str(stored):
        path.unlink()
        return stored
    return path


def _gone(error: Exception) -> bool:
    return isinstance(error, urllib.error.HTTPError) and error.code in (404, 410)


def _from_archives(stored: Path, archives: Sequence[str], log: Callable[[str], None]) -> bool:
    """Substitute `stored` (a fixed-output path) from the archives: Nix checks it
    against its hash, so no signature is needed."""
    if not archives:
        return False
    log(f"+ nix-store --realise {stored} (from {' '.join(archives)})")
    nix_store("--realise", str(stored), "--option", "extra-substituters", " ".join(archives))
    return stored.exists()


def _fault(
    error: Exception, doing: str, wheel: LockedWheel, archives: Sequence[str] = ()
) -> UserError:
    if _gone(error) and isinstance(error, urllib.error.HTTPError):
        tried = f", and no archive holds it ({', '.join(archives)})" if archives else ""
        return UserError.single(
            f"{wheel.describe()} is gone from {wheel.url} (HTTP {error.code}){tried}; "
            f"{wheel.lock} names a file the server no longer has (Debian's mirror keeps only "
            "the versions its current indexes name)",
            fix=f"run `{wheel.relock}` on a machine with network access and commit the lock, "
            "or name an archive of the build's downloads (kernelnix archive) with --archive "
            "or in flake.nix's nixConfig",
        )
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return UserError.single(
            f"no space left on the device while {doing}; nothing unfinished was kept",
            fix="free disk space, or point KERNELNIX_CACHE at a larger disk, and run it again",
        )
    return UserError.single(
        f"cannot fetch {wheel.describe()} ({doing}): {error}",
        fix="check the network and run it again: a partial download resumes where it stopped",
    )


def _unpacked(wheel: LockedWheel, cache: Path, log: Callable[[str], None]) -> Path:
    """The wheel unpacked in the cache, fetched and unpacked when missing."""
    archive = fetch_wheel(wheel, cache, log)
    target = cache / "unpacked" / wheel.name.removesuffix(".whl")
    if target.is_dir():
        return target
    log(f"+ unpack {wheel.name}")
    try:
        unpack(archive, target)
    except OSError as error:
        raise _fault(error, f"unpacking {archive} into {target}", wheel) from error
    except TreeError as error:
        _discard(archive)
        raise UserError.single(
            f"{archive}: {error}; the file was removed", fix="run it again"
        ) from error
    return target


def _discard(archive: Path) -> None:
    """Remove a downloaded file found broken: from the cache, or from the Nix store
    through Nix (a store path is not a file to unlink)."""
    if nix_store("--delete", str(archive)) is None and archive.exists():
        archive.unlink()


def materialize(
    environment: LockedEnvironment, cache: Path | None = None, log: Callable[[str], None] = print
) -> Path:
    """The environment's directory in the cache, made when missing."""
    cache = cache or cache_dir()
    dest = cache / "environments" / f"{environment.digest}-{environment.key}"
    if dest.is_dir():
        return dest
    unpacked = [_unpacked(wheel, cache, log) for wheel in environment.wheels]
    log(f"+ merge {len(unpacked)} wheels into {dest}")
    merge(dest, unpacked)
    return dest


@dataclass(frozen=True)
class LockedGlibcTarget:
    """The glibc release Linux variants of a system target, and the ziglang wheel
    that makes its sysroot (kernelnix.host.glibc_target)."""

    system: str
    glibc: str
    wheel: LockedWheel

    @property
    def arch(self) -> str:
        return self.system.split("-")[0]

    @property
    def digest(self) -> str:
        """Names the assembled sysroot: the wheel and the assembler that made it."""
        script = Path(glibc_target.__file__).read_bytes()
        joined = f"{self.wheel.hash}\n{self.glibc}\n".encode() + script
        return hashlib.sha256(joined).hexdigest()[:16]


GLIBC_TARGET_KEY = "glibc-target"


def locked_glibc_target(system: str, lock: dict[str, Any] | None = None) -> LockedGlibcTarget:
    """The lock's glibc target of `system`; a UserError when it has none."""
    lock = host_lock() if lock is None else lock
    entry = lock.get(GLIBC_TARGET_KEY, {}).get(system)
    if entry is None or entry.get("wheel") not in lock.get("wheels", {}):
        locked = sorted(lock.get(GLIBC_TARGET_KEY, {})) or ["none"]
        raise UserError.single(
            f"the wheel lock {lock_file()} has no glibc target for {system} (it has one for "
            f"{', '.join(locked)}), so a publishable variant cannot be built here",
            fix="run `kernelnix lock-wheels` to lock it, or build with --host-glibc (a build "
            "for this machine only, which `upload` refuses)",
        )
    wheel = lock["wheels"][entry["wheel"]]
    return LockedGlibcTarget(
        system, entry["glibc"], LockedWheel(entry["wheel"], wheel["url"], wheel["hash"])
    )


def materialize_glibc_target(
    target: LockedGlibcTarget, cache: Path | None = None, log: Callable[[str], None] = print
) -> Path:
    """The target's sysroot in the cache, assembled once per machine when missing."""
    cache = cache or cache_dir()
    dest = cache / "glibc" / f"{target.digest}-glibc-{target.glibc}-{target.system}"
    if dest.is_dir():
        return dest
    zig = _unpacked(target.wheel, cache, log)
    log(f"+ assemble the glibc {target.glibc} target of {target.system} into {dest}")
    try:
        glibc_target.assemble(zig, dest, target.glibc, target.arch)
    except glibc_target.TargetError as error:
        raise UserError.single(
            f"cannot assemble the glibc {target.glibc} target from {target.wheel.name}: {error}",
            fix="check the wheel lock's glibc-target entry for this system (`kernelnix "
            "lock-wheels` writes it), or build with --host-glibc",
        ) from error
    except OSError as error:
        raise _fault(error, f"assembling {dest}", target.wheel) from error
    return dest


def environment_variables(roots: list[Path], base: dict[str, str]) -> dict[str, str]:
    """`base` with the environments first on PYTHONPATH, in order (Torch's, then the
    python-depends'), and an nvcc of theirs first on PATH."""
    kernelnix_root = str(Path(__file__).resolve().parents[2])
    python_path = [*map(str, roots), kernelnix_root, *filter(None, [base.get("PYTHONPATH")])]
    variables = {**base, "PYTHONPATH": os.pathsep.join(python_path)}
    nvcc = next(filter(None, map(find_nvcc, roots)), None)
    if nvcc is not None:
        variables["PATH"] = os.pathsep.join([str(nvcc.parent), base.get("PATH", "")])
    return variables
