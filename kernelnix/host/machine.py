"""What this machine can build: its system, its Torch, its compilers.

`why_not_buildable` answers for one variant of the plan with a sentence a
user can act on, or None when the variant can be built here.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

from kernelnix.checks.policy import policy_names
from kernelnix.core.version import Version
from kernelnix.host.environments import TVM_FFI_BACKENDS, locked_environment, not_locked_reason
from kernelnix.host.system import current_system
from kernelnix.host.torch_probe import probe
from kernelnix.plan.model import PlanVariant

# The compiler each GPU backend needs, and how to read its version.
COMPILERS = {"cuda": "nvcc", "rocm": "hipcc", "xpu": "icpx"}
_RELEASE = re.compile(r"release (\d+\.\d+)|HIP version: (\d+\.\d+)|(\d{4}\.\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class HostTorch:
    """The Torch of the build's Python interpreter (see kernelnix.host.torch_probe)."""

    version: Version
    cuda: str | None
    hip: str | None
    xpu: str | None

    @classmethod
    def from_probe(cls, found: dict[str, Any]) -> HostTorch:
        return cls(
            version=release(found["version"]),
            cuda=found["cuda"],
            hip=found["hip"],
            xpu=found["xpu"],
        )

    def backend_version(self, backend: str) -> str | None:
        return {"cuda": self.cuda, "rocm": self.hip, "xpu": self.xpu}.get(backend)


def release(text: str) -> Version:
    """The leading dotted numbers of a version string (`7.1.52802-26aae43` -> 7.1.52802)."""
    match = re.match(r"\d+(\.\d+)*", text)
    return Version.parse(match.group(0) if match else "0")


@cache
def host_torch() -> HostTorch | None:
    found = probe()
    return HostTorch.from_probe(found) if found else None


@cache
def compiler_version(backend: str) -> tuple[str, Version | None] | None:
    """(path, version) of the backend's compiler on PATH, or None."""
    path = shutil.which(COMPILERS[backend])
    if path is None:
        return None
    done = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    match = _RELEASE.search(done.stdout + done.stderr)
    version = next((g for g in match.groups() if g), None) if match else None
    return path, Version.parse(version) if version else None


def host_check_policy() -> str | None:
    """The check policy a non-redistributable build meets: this machine's own glibc.

    `manylinux_2_<minor>` of the running glibc (the newest such policy the
    checks know that is not newer); None on a system without glibc.
    """
    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    if not libc or not libc.startswith("glibc "):
        return None
    host = release(libc.removeprefix("glibc "))
    known = [
        (release(name.removeprefix("manylinux_").replace("_", ".")), name)
        for name in policy_names()
        if name.startswith("manylinux_")
    ]
    fitting = [(version, name) for version, name in known if version <= host]
    return max(fitting)[1] if fitting else None


def _same_minor(a: Version, b: Version) -> bool:
    return (a.major, a.minor) == (b.major, b.minor)


def _torch_reason(variant: PlanVariant, torch: HostTorch) -> str | None:
    wanted = Version.parse(variant.torch)
    if variant.kind == "stable-abi" and variant.stable_abi is not None:
        abi = Version.parse(variant.stable_abi)
        if torch.version < abi:
            return f"needs Torch {abi.major_minor()} or newer; Torch {torch.version} is installed"
    elif not _same_minor(torch.version, wanted):
        return f"needs Torch {wanted.major_minor()}; Torch {torch.version} is installed"
    return None


def _backend_reason(variant: PlanVariant, torch: HostTorch) -> str | None:
    backend = variant.backend
    if backend == "cpu":
        return None
    if backend == "metal":
        return None if current_system().endswith("darwin") else "Metal builds need macOS"
    if backend not in COMPILERS or variant.backend_version is None:
        return f"kernelnix cannot compile {backend} kernels"
    wanted = Version.parse(variant.backend_version)
    have = torch.backend_version(backend)
    if have is None:
        return f"needs a Torch built for {backend}; the installed Torch {torch.version} is not"
    if backend != "xpu" and not _same_minor(release(have), wanted):
        return (
            f"needs a Torch built for {backend} {wanted.major_minor()}; "
            f"the installed one is built for {backend} {have}"
        )
    return _compiler_reason(backend, wanted)


def _compiler_reason(backend: str, wanted: Version) -> str | None:
    """Why the backend's compiler on PATH does not fit `wanted`, or None."""
    compiler = compiler_version(backend)
    if compiler is None:
        return f"needs {COMPILERS[backend]} ({backend} {wanted.major_minor()}) on PATH"
    path, version = compiler
    if backend != "xpu" and (version is None or not _same_minor(version, wanted)):
        return (
            f"needs {backend} {wanted.major_minor()}; {path} is {version or 'of unknown version'}"
        )
    return None


def host_tvm_ffi() -> Version | None:
    """The apache-tvm-ffi release the build's Python imports, or None."""
    try:
        return release(importlib.metadata.version("apache-tvm-ffi"))
    except importlib.metadata.PackageNotFoundError:
        return None


def _tvm_ffi_reason(variant: PlanVariant, locked_wheels: bool) -> str | None:
    """Why a tvm-ffi variant cannot be built here: its backend, else neither its
    locked environment (apache-tvm-ffi, for CUDA with its toolkit) nor the build
    Python's apache-tvm-ffi of its version (and for CUDA nvcc on PATH)."""
    backend = variant.backend
    if backend not in TVM_FFI_BACKENDS:
        return not_locked_reason(variant)
    if locked_wheels and locked_environment(variant) is not None:
        return None
    wanted, have = Version.parse(variant.tvm_ffi or "0"), host_tvm_ffi()
    if have is None:
        reason = f"{sys.executable} has no apache-tvm-ffi"
    elif not _same_minor(have, wanted):
        reason = f"needs apache-tvm-ffi {wanted.major_minor()}; {have} is installed"
    elif backend == "cuda":
        reason = _compiler_reason(backend, Version.parse(variant.backend_version or "0")) or ""
    else:
        reason = ""
    if reason and locked_wheels:
        return f"{reason}, and {not_locked_reason(variant)}"
    return reason or None


def why_not_buildable(variant: PlanVariant, *, locked_wheels: bool = True) -> str | None:
    """Why `variant` cannot be built on this machine, or None.

    A variant whose wheels are locked (kernelnix.host.environments) builds
    against them; with `locked_wheels=False`, or without them, it needs the
    build Python's own Torch (and the toolkit on PATH) to fit: the build step's
    rule, which runs inside the variant's environment.
    """
    if variant.system != current_system():
        return f"it is for {variant.system}; this machine is {current_system()}"
    if variant.kind == "noarch":
        return None
    if variant.kind == "tvm-ffi":
        return _tvm_ffi_reason(variant, locked_wheels)
    if locked_wheels and locked_environment(variant) is not None:
        return None
    torch = host_torch()
    reason = (
        f"{sys.executable} has no Torch"
        if torch is None
        else _torch_reason(variant, torch) or _backend_reason(variant, torch)
    )
    if reason and locked_wheels:
        return f"{reason}, and {not_locked_reason(variant)}"
    return reason
