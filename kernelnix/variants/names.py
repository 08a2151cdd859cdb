"""Variant names in the Hub grammar: rendering and parsing.

Names are what the `kernels` loader matches against the running system, so
they follow the reference grammar exactly:

- `torch<MAJ><MIN>-cxx11-<compute>-<cpu>-linux`, `torch<MAJ><MIN>-<compute>-<cpu>-darwin`
- `torch-stable-abi<MAJ><MIN>-<compute>-<cpu>-<os>`
- `tvm-ffi<MAJ><MIN>-<compute>-<cpu>-<os>`
- `torch-<backend>` (noarch, Python only)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelnix.core.version import Version

CPUS = ("x86_64", "aarch64")


def split_system(system: str) -> tuple[str, str]:
    """`x86_64-linux` -> ("x86_64", "linux")."""
    cpu, _, os_name = system.partition("-")
    if cpu not in CPUS or not os_name:
        raise ValueError(f"unsupported system {system!r}; expected <x86_64|aarch64>-<os>")
    return cpu, os_name


def compute_token(backend: str, version: Version | None) -> str:
    """`cu126`, `rocm71`, `xpu20253`, `cpu`, `metal`."""
    prefixes = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
    if backend in prefixes:
        if version is None:
            raise ValueError(f"backend {backend} needs a version for a variant name")
        return f"{prefixes[backend]}{version.flat()}"
    return backend


def library_suffix(kind: str, os_name: str | None) -> str:
    """The suffix of a compiled variant's library, `<ops id><suffix>`: a Python
    limited-API extension module for Torch variants (`from . import` loads it), a
    plain shared library for tvm-ffi ones (`tvm_ffi.load_module` loads it)."""
    if kind == "tvm-ffi":
        return {"windows": ".dll", "darwin": ".dylib"}.get(os_name or "", ".so")
    return ".pyd" if os_name == "windows" else ".abi3.so"


@dataclass(frozen=True)
class VariantName:
    """The parts a variant name encodes."""

    kind: str
    backend: str
    backend_version: Version | None = None
    framework_version: Version | None = None  # torch, stable ABI target or tvm-ffi version
    system: str | None = None

    def render(self) -> str:
        if self.kind == "noarch":
            return f"torch-{self.backend}"
        assert self.system is not None and self.framework_version is not None
        cpu, os_name = split_system(self.system)
        compute = compute_token(self.backend, self.backend_version)
        flat = self.framework_version.flat()
        if self.kind == "stable-abi":
            return f"torch-stable-abi{flat}-{compute}-{cpu}-{os_name}"
        if self.kind == "tvm-ffi":
            return f"tvm-ffi{flat}-{compute}-{cpu}-{os_name}"
        abi_tag = "-cxx11" if os_name == "linux" else ""
        return f"torch{flat}{abi_tag}-{compute}-{cpu}-{os_name}"


_TORCH = re.compile(r"torch(\d)(\d+)")
_STABLE = re.compile(r"abi(\d)(\d+)")
_TVM_FFI = re.compile(r"ffi(\d)(\d+)")
_VERSIONED_BACKEND = re.compile(r"(cu|rocm|xpu|cann)(\d+)(\d)")
_BACKEND_OF_PREFIX = {"cu": "cuda", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}


def _two_part(match: re.Match[str]) -> Version:
    return Version((int(match.group(1)), int(match.group(2))))


def _parse_compute(token: str) -> tuple[str, Version | None]:
    if token in ("cpu", "metal", "neuron", "tpu"):
        return token, None
    match = _VERSIONED_BACKEND.fullmatch(token)
    if not match:
        raise ValueError(f"unknown backend {token!r} in variant name")
    # The last digit is the minor, everything before it the major (as the loader reads it).
    return _BACKEND_OF_PREFIX[match.group(1)], Version((int(match.group(2)), int(match.group(3))))


def parse_variant_name(name: str) -> VariantName:
    """Parse a variant directory name the way the `kernels` loader does."""
    pieces = name.split("-")
    if pieces[0] == "torch" and len(pieces) >= 2 and pieces[1] == "stable" and len(pieces) >= 3:
        stable = _STABLE.fullmatch(pieces[2])
        if not stable:
            raise ValueError(f"invalid stable-ABI version in variant name {name!r}")
        return _arch_parts(name, "stable-abi", _two_part(stable), pieces[3:])
    if pieces[0] == "torch":
        if len(pieces) < 2:
            raise ValueError(f"variant name {name!r} has no backend")
        return VariantName("noarch", "-".join(pieces[1:]))
    if pieces[0] == "tvm" and len(pieces) >= 2:
        ffi = _TVM_FFI.fullmatch(pieces[1])
        if not ffi:
            raise ValueError(f"invalid tvm-ffi version in variant name {name!r}")
        return _arch_parts(name, "tvm-ffi", _two_part(ffi), pieces[2:])
    torch = _TORCH.fullmatch(pieces[0])
    if not torch:
        raise ValueError(f"unknown framework in variant name {name!r}")
    rest = pieces[1:]
    if rest and rest[0] in ("cxx11", "cxx98"):
        rest = rest[1:]
    return _arch_parts(name, "arch", _two_part(torch), rest)


def _arch_parts(name: str, kind: str, version: Version, rest: list[str]) -> VariantName:
    if len(rest) != 3:
        raise ValueError(f"variant name {name!r} must end in <backend>-<cpu>-<os>")
    backend, backend_version = _parse_compute(rest[0])
    return VariantName(kind, backend, backend_version, version, f"{rest[1]}-{rest[2]}")


def build_set_key(torch: str, backend: str, version: str | None) -> str:
    """How the wheel lock names a build set: `2.13-cuda-13`, `2.15-cuda-13.2`,
    `2.13-cpu`, with the version as the plan writes it (no trailing zeros).
    nix/toolchains/host/wheels.nix forms the same from a plan variant."""
    return f"{torch}-{backend}" + (f"-{Version.parse(version)}" if version else "")
