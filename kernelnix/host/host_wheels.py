"""The wheels each variant of the host toolchain builds against, and their lock.

A variant builds against its own Torch, not the build Python's: the Torch wheel
of its build set with everything it requires, as `pip install torch` gives it
(the `nvidia-*` libraries Torch loads, Triton for CUDA, its pure-Python
requirements), and for CUDA the toolkit of the variant's CUDA version (nvcc,
its headers and cudart, as NVIDIA's wheels).
`kernelnix lock-wheels` resolves them on PyPI (and the PyTorch index where it
is reachable) and writes the `host` part of kernelnix/data/wheel-lock.json:

    wheels:        file name -> {url, hash (SRI sha256), size}
    environments:  system -> Python tag -> build set key -> {torch, wheels, toolkit}
    missing:       system -> Python tag -> build set key -> why it is not locked
    noarch:        system -> Python tag -> backend -> the build set a noarch
                   variant of that backend loads in (noarch_build_sets)
    glibc-target:  system -> {glibc, wheel}: the ziglang wheel its glibc sysroot
                   is made from (lock_glibc_targets)

Each part is relocked on its own (`kernelnix lock-wheels --only PART`) into the
file's other parts: `update_host_part` keeps the wheels the others name.

A build set key is `<torch>-<backend>[-<version>]` (`2.13-cuda-13`), the
same string nix/toolchains/host/wheels.nix forms from a plan variant. A CPU
build set without a CPU wheel uses the CUDA wheel of the same Torch release:
same headers, same libtorch_cpu and c10 (a CPU variant links nothing else).
"""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kernelnix.core.fileio import write_atomic
from kernelnix.host.environments import HEADER_DEPENDS_KEY
from kernelnix.host.hermetic_wheels import (
    IndexFile,
    LockResult,
    open_wheel,
    read_index,
    read_lock,
    sri,
    torch_build_version,
)
from kernelnix.variants.matrix import matrix_data
from kernelnix.variants.names import build_set_key

# What a CUDA build needs of NVIDIA's `cuda-toolkit` wheel, as its extras.
TOOLKIT_EXTRAS = ("nvcc", "cudart", "cccl", "crt", "nvvm")
SUPPORTED_BACKENDS = ("cpu", "cuda")
# The systems whose environments, python-depends and glibc target the lock holds:
# the host toolchain's and the hermetic toolchain's Linux systems.
LOCK_SYSTEMS = ("x86_64-linux", "aarch64-linux")
DEFAULT_PYTHON_TAGS = ("cp311", "cp312", "cp313")
LOCK_COMMAND = "kernelnix lock-wheels"


# Python packages Torch's CUDA wheels require and its CPU wheels do not, which
# `import torch` does not need (tests/host/test_python_wheels.py compares the
# two builds' metadata).
CUDA_PYTHON_PACKAGES = ("triton", "cuda-bindings")


def every_project(name: str) -> bool:
    """Follow every requirement: an environment holds what `pip install` gives."""
    return True


def not_cuda_python(name: str) -> bool:
    """Follow every requirement but CUDA_PYTHON_PACKAGES."""
    return str(canonicalize_name(name)) not in CUDA_PYTHON_PACKAGES


@dataclass(frozen=True)
class Target:
    """The platform a wheel set is resolved for."""

    system: str
    python: str  # cp311

    @property
    def arch(self) -> str:
        return self.system.partition("-")[0]

    def marker_environment(self, extra: str = "") -> dict[str, str]:
        version = f"{self.python[2]}.{self.python[3:]}"
        environment = {str(k): str(v) for k, v in default_environment().items()}
        environment.update(
            python_version=version,
            python_full_version=f"{version}.0",
            sys_platform="linux",
            platform_system="Linux",
            platform_machine=self.arch,
            os_name="posix",
            implementation_name="cpython",
            platform_python_implementation="CPython",
            extra=extra,
        )
        return environment

    def accepts(self, filename: str) -> bool:
        """Whether a wheel file installs on this target."""
        try:
            _, _, _, tags = parse_wheel_filename(filename)
        except ValueError:
            return False
        return any(
            self._runs(tag.interpreter, tag.abi)
            and (tag.platform == "any" or _linux_platform(tag.platform, self.arch))
            for tag in tags
        )

    def _runs(self, interpreter: str, abi: str) -> bool:
        """Whether an interpreter and ABI tag pair runs on this Python: its own,
        pure Python, or a stable-ABI wheel (`cp36-abi3`) of an older CPython."""
        if abi == "abi3":
            return interpreter.startswith("cp") and _cpython(interpreter) <= _cpython(self.python)
        return interpreter in (self.python, "py3", "py2.py3") and abi in (self.python, "none")


def _cpython(tag: str) -> tuple[int, int]:
    """`cp311` -> (3, 11)."""
    digits = tag.removeprefix("cp")
    return (int(digits[0]), int(digits[1:] or 0)) if digits.isdigit() else (0, 0)


def _linux_platform(platform: str, arch: str) -> bool:
    return bool(re.fullmatch(rf"(manylinux_\d+_\d+|manylinux\d+|linux)_{arch}", platform))


@dataclass
class Resolution:
    """One environment: file names of the wheels, in install order."""

    torch: str
    wheels: list[str] = field(default_factory=list)
    toolkit: list[str] = field(default_factory=list)


class Resolver:
    """Finds wheels on the simple index pages and follows their requirements."""

    def __init__(self, pypi: str, log: Callable[[str], None]) -> None:
        self.pypi = pypi
        self.log = log
        self.files: dict[str, IndexFile] = {}

    def index(self, name: str) -> list[IndexFile]:
        return read_index(self.pypi.replace("{name}", str(canonicalize_name(name))))

    def metadata(self, file: IndexFile) -> list[str]:
        return requires_dist(file.url)

    def best(self, name: str, specifier: SpecifierSet, target: Target) -> IndexFile | None:
        """The newest wheel of `name` that `specifier` allows and `target` installs."""
        found: list[tuple[Version, IndexFile]] = []
        for file in self.index(name):
            if not file.filename.endswith(".whl") or not target.accepts(file.filename):
                continue
            try:
                version = parse_wheel_filename(file.filename)[1]
            except (ValueError, InvalidVersion):
                continue
            if specifier.contains(version, prereleases=True):
                found.append((version, file))
        # A final release over a newer pre-release, unless only pre-releases match.
        return (
            max(found, key=lambda item: (not item[0].is_prerelease, item[0]))[1] if found else None
        )

    def closure(
        self,
        roots: Iterable[Requirement],
        target: Target,
        chosen: dict[str, str],
        follows: Callable[[str], bool] = every_project,
    ) -> list[str] | str:
        """The wheels of `roots` and of what they require (the projects `follows`
        accepts), one version per project: those already `chosen` (name -> file
        name) stay when they satisfy a later requirement. The new file names in
        the order found, or the reason one cannot be found."""
        added: list[str] = []
        pending = list(roots)
        while pending:
            requirement = pending.pop(0)
            name = str(canonicalize_name(requirement.name))
            if name in chosen:
                version = parse_wheel_filename(chosen[name])[1]
                if not requirement.specifier.contains(version, prereleases=True):
                    return f"{requirement} conflicts with {chosen[name]}"
                if requirement.extras:
                    # Extras asked for now (cuda-toolkit[nvcc]) add requirements.
                    lines = self.metadata(self.files[chosen[name]])
                    pending.extend(self.requirements(lines, target, requirement.extras, follows))
                continue
            file = self.best(requirement.name, requirement.specifier, target)
            if file is None:
                return f"no wheel of {requirement} for {target.python} {target.system} on PyPI"
            self.files.setdefault(file.filename, file)
            chosen[name] = file.filename
            added.append(file.filename)
            pending.extend(
                self.requirements(self.metadata(file), target, requirement.extras, follows)
            )
        return added

    def requirements(
        self,
        lines: Iterable[str],
        target: Target,
        extras: Iterable[str] = (),
        follows: Callable[[str], bool] = every_project,
    ) -> list[Requirement]:
        """The requirements among `lines` that apply to `target` and that `follows` accepts."""
        chosen = []
        for line in lines:
            requirement = Requirement(line)
            if not follows(requirement.name):
                continue
            marker = requirement.marker
            if marker is None or any(
                marker.evaluate(target.marker_environment(extra)) for extra in ("", *extras)
            ):
                chosen.append(requirement)
        return chosen


@functools.cache
def requires_dist(url: str) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA (read remotely)."""
    with open_wheel(url) as wheel:
        name = next((n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")), None)
        if name is None:
            raise ValueError(f"{url} has no .dist-info/METADATA: not a wheel")
        text = wheel.read(name).decode()
    return [
        line.removeprefix("Requires-Dist:").strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def torch_files(resolver: Resolver, release: str, target: Target) -> list[tuple[str, IndexFile]]:
    """(build version, file) of every Torch wheel of `release` for `target` on PyPI."""
    pattern = re.compile(rf"torch-{re.escape(release)}(-\d+)?-.*\.whl")
    found = []
    for file in resolver.index("torch"):
        name = urllib.parse.unquote(file.filename)
        if not pattern.fullmatch(name) or not target.accepts(name):
            continue
        try:
            built = torch_build_version(file.url)
        except (OSError, zipfile.BadZipFile) as error:
            resolver.log(f"  {file.url}: cannot read torch/version.py: {error}")
            continue
        if built:
            found.append((built, file))
    return found


def resolve_build_set(
    resolver: Resolver,
    build_set: dict[str, Any],
    release: str,
    target: Target,
) -> Resolution | str:
    """The environment of one build set, or why it cannot be locked."""
    backend, version = build_set["backend"], build_set.get("version")
    wanted = f"cu{version.replace('.', '')}" if backend == "cuda" and version else None
    torches = torch_files(resolver, release, target)
    flavors = {built.partition("+")[2] or "cpu": file for built, file in torches}
    if wanted is not None:
        file = flavors.get(wanted)
    else:
        # A CPU wheel when there is one; else the CUDA build of the same release.
        file = flavors.get("cpu") or next(iter(sorted(flavors.items())), (None, None))[1]
    if file is None:
        served = ", ".join(sorted(flavors)) or "none"
        wheel = f"torch {release}+{wanted or 'cpu'} ({target.python})"
        return (
            f"{wheel} is not locked: PyPI serves {served} for {target.system}; "
            f"run `{LOCK_COMMAND}` on a machine that reaches the PyTorch index"
        )
    built = next(b for b, f in torches if f is file)
    resolver.files[file.filename] = file
    chosen = {"torch": file.filename}
    # A CPU set on the CUDA wheel: its libraries (`import torch` loads them), not
    # the Python packages the CPU build lacks.
    follows = every_project if backend == "cuda" or "+cu" not in built else not_cuda_python
    requirements = resolver.requirements(resolver.metadata(file), target, follows=follows)
    resolution = Resolution(torch=built, wheels=[file.filename])
    if backend == "cuda":
        # The toolkit first: its pins win over the libraries' looser requirements.
        toolkit = _toolkit(resolver, built, version or "", requirements, target, chosen)
        if isinstance(toolkit, str):
            return toolkit
        resolution.toolkit = toolkit
    libraries = resolver.closure(requirements, target, chosen, follows=follows)
    if isinstance(libraries, str):
        return libraries
    resolution.wheels.extend(libraries)
    return resolution


def _toolkit(
    resolver: Resolver,
    built: str,
    version: str,
    requirements: list[Requirement],
    target: Target,
    chosen: dict[str, str],
) -> list[str] | str:
    """The nvcc wheels of the cuda-toolkit release Torch pins, or why not."""
    pins = [r for r in requirements if r.name == "cuda-toolkit"]
    if not pins:
        return f"torch {built} names no cuda-toolkit version to take nvcc from"
    pin = pins[0].specifier
    compiler = Requirement(f"cuda-toolkit[{','.join(TOOLKIT_EXTRAS)}]{pin}")
    toolkit = resolver.closure([compiler], target, chosen)
    if isinstance(toolkit, str):
        return toolkit
    nvcc = next((n for n in toolkit if n.startswith("nvidia_cuda_nvcc")), None)
    nvcc_version = str(parse_wheel_filename(nvcc)[1]) if nvcc else "none"
    if not nvcc_version.startswith(f"{version}."):
        return f"torch {built} pins cuda-toolkit {pin}, whose nvcc is {nvcc_version}"
    return toolkit


def lock_host(
    matrix: dict[str, Any],
    resolver: Resolver,
    python_tags: Iterable[str],
    log: Callable[[str], None],
    systems: Iterable[str] = LOCK_SYSTEMS,
) -> dict[str, Any]:
    """The build-set environments of `systems` for the `host` part of the wheel
    lock, resolved anew: `environments`, `missing` and `noarch` (the wheels are in
    `resolver.files`)."""
    releases = matrix["hermetic"]["torch-releases"]
    environments: dict[str, Any] = {}
    missing: dict[str, Any] = {}
    for system in systems:
        for python in python_tags:
            target = Target(system, python)
            for build_set in matrix["build-sets"]:
                if system not in build_set["systems"]:
                    continue
                if build_set["backend"] not in SUPPORTED_BACKENDS:
                    continue
                key = build_set_key(
                    build_set["torch"], build_set["backend"], build_set.get("version")
                )
                log(f"resolving {key} for {python} {system}")
                try:
                    found = resolve_build_set(
                        resolver, build_set, releases[build_set["torch"]], target
                    )
                except (ValueError, zipfile.BadZipFile) as error:
                    found = f"cannot resolve its wheels: {error}"
                if isinstance(found, str):
                    missing.setdefault(system, {}).setdefault(python, {})[key] = found
                    continue
                environments.setdefault(system, {}).setdefault(python, {})[key] = {
                    "torch": found.torch,
                    "wheels": found.wheels,
                    "toolkit": found.toolkit,
                }
    return {
        "environments": environments,
        "missing": missing,
        "noarch": noarch_build_sets(matrix, environments),
    }


# Backends whose noarch variants load in a locked Torch: a CUDA one's needs a
# CUDA Torch (the build Python's is for the CPU), a CPU one's any Torch, which the
# hermetic toolchain has only from the lock (build --local and the host toolchain
# take the build Python's: environments.LOCKED_NOARCH_BACKENDS).
NOARCH_BACKENDS = ("cpu", "cuda")


def noarch_build_sets(
    matrix: dict[str, Any], environments: dict[str, Any]
) -> dict[str, dict[str, dict[str, str]]]:
    """system -> Python tag -> backend -> the build set whose environment a noarch
    variant of that backend is import-checked and tested in: the newest bundled
    one the lock holds (newest Torch, then newest backend version)."""
    chosen: dict[str, dict[str, dict[str, str]]] = {}
    for system, tags in environments.items():
        for python, sets in tags.items():
            for backend in NOARCH_BACKENDS:
                candidates = [
                    build_set
                    for build_set in matrix["build-sets"]
                    if build_set["backend"] == backend
                    and build_set.get("bundle", False)
                    and system in build_set["systems"]
                    and _key(build_set) in sets
                ]
                if candidates:
                    newest = max(candidates, key=_newest_first)
                    chosen.setdefault(system, {}).setdefault(python, {})[backend] = _key(newest)
    return chosen


def _key(build_set: dict[str, Any]) -> str:
    return build_set_key(build_set["torch"], build_set["backend"], build_set.get("version"))


def _newest_first(build_set: dict[str, Any]) -> tuple[Version, Version]:
    return (Version(build_set["torch"]), Version(build_set.get("version") or "0"))


def lock_glibc_targets(
    resolver: Resolver, settings: dict[str, Any], systems: Iterable[str] = LOCK_SYSTEMS
) -> tuple[dict[str, Any], dict[str, str]]:
    """Per system of matrix.json's `glibc-target`, the glibc release and the
    ziglang wheel its sysroot is made from; and per system PyPI has no such
    wheel for, why. Every system counts, not only the host toolchain's: the
    hermetic toolchain assembles its sysroot from the same wheel."""
    locked: dict[str, Any] = {}
    missing: dict[str, str] = {}
    wanted = SpecifierSet(f"=={settings['ziglang']}")
    for system in (system for system in settings["systems"] if system in systems):
        try:
            # The wheel is py3-none: any Python tag selects it.
            file = resolver.best("ziglang", wanted, Target(system, DEFAULT_PYTHON_TAGS[0]))
        except (OSError, ValueError) as error:
            missing[system] = f"cannot read the ziglang wheels on PyPI: {error}"
            continue
        if file is None:
            missing[system] = f"PyPI has no ziglang {settings['ziglang']} wheel for it"
            continue
        resolver.files.setdefault(file.filename, file)
        locked[system] = {"glibc": settings["glibc"], "wheel": file.filename}
    return locked, missing


def _used_wheels(host: dict[str, Any]) -> set[str]:
    """The wheels the host part names: the environments' (toolkits included),
    the glibc targets', the python-depends' (alternatives included) and the
    header dependencies' (kernelnix.host.header_wheels)."""
    used = {entry["wheel"] for entry in host.get("glibc-target", {}).values()}
    for by_key in host.get(HEADER_DEPENDS_KEY, {}).values():
        used.update(entry["wheel"] for entry in by_key.values() if "wheel" in entry)
    for kind in ("environments", "python-depends"):
        for by_tag in host.get(kind, {}).values():
            for entries in by_tag.values():
                for entry in entries.values():
                    used.update(
                        entry.get("wheels", []),
                        entry.get("toolkit", []),
                        *entry.get("alternatives", []),
                    )
    return used


def update_host_part(
    path: Path, parts: dict[str, Any], systems: Iterable[str], resolver: Resolver
) -> dict[str, Any]:
    """Write `parts` (keys of the host part, each system -> ...) for `systems`
    into the lock file at `path`; other systems and the rest of the file stay. A
    wheel `resolver` looked up is recorded as its index gives it now, one it did
    not keeps its locked URL and hash, and one that no part names any more goes.
    The lock as written."""
    data = read_lock(path)
    host = data.setdefault("host", {})
    for name, by_system in parts.items():
        kept = {s: entry for s, entry in host.get(name, {}).items() if s not in systems}
        host[name] = dict(sorted({**kept, **by_system}.items()))
    locked = host.get("wheels", {})
    host["wheels"] = {
        name: _locked_file(resolver.files[name]) if name in resolver.files else locked[name]
        for name in sorted(_used_wheels(host))
    }
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def lock_host_file(
    path: Path,
    pypi: str,
    python_tags: Iterable[str],
    log: Callable[[str], None],
    matrix: dict[str, Any] | None = None,
    systems: Iterable[str] = LOCK_SYSTEMS,
) -> LockResult:
    """Resolve the build-set environments of `systems` in the lock file at `path`
    anew and write them. Locked environments, and the build sets not locked with why."""
    systems = tuple(systems)
    resolver = Resolver(pypi, log)
    parts = lock_host(matrix or matrix_data(), resolver, python_tags, log, systems)
    data = update_host_part(path, parts, systems, resolver)
    result = LockResult(data, [], [], [])
    for system, tags in parts["environments"].items():
        for python, sets in tags.items():
            result.locked.extend(f"{key} {python} {system} environment" for key in sets)
    for system, tags in parts["missing"].items():
        for python, sets in tags.items():
            result.missing.extend(f"{key} {python} {system}: {why}" for key, why in sets.items())
    return result


def lock_glibc_target_file(
    path: Path,
    pypi: str,
    log: Callable[[str], None],
    matrix: dict[str, Any] | None = None,
    systems: Iterable[str] = LOCK_SYSTEMS,
) -> list[str]:
    """Lock the glibc targets' ziglang wheels of `systems` into the lock file at
    `path`; the systems without one, with why."""
    systems = tuple(systems)
    resolver = Resolver(pypi, log)
    settings = (matrix or matrix_data())["glibc-target"]
    locked, missing = lock_glibc_targets(resolver, settings, systems)
    update_host_part(path, {"glibc-target": locked}, systems, resolver)
    return [f"glibc-target {system}: {why}" for system, why in missing.items()]


def _locked_file(file: IndexFile) -> dict[str, str]:
    if file.sha256 is None:
        raise OSError(f"{file.url}: the index publishes no sha256 for it")
    return {"url": file.url, "hash": sri(file.sha256)}
