"""The build variants of a config, from the version matrix.

The matrix lives in `kernelnix/data/matrix.json`, read by this module and by
the Nix library alike. The variant rules follow the reference builder:

1. Keep a build set when its backend is in `general.backends`, its CUDA version
   is within `general.cuda.minver..maxver` and its Torch within
   `torch.minver..maxver` (inclusive); tvm-ffi kernels need a tvm-ffi version.
2. Per backend, the kind: noarch for `[torch-noarch]` or when no
   `[kernel.*]` targets the backend; stable-abi when `[torch].stable-abi`
   applies (build sets with Torch older than the target are dropped, then
   only the newest Torch per backend version is kept); tvm-ffi; else arch.
3. Collision rule: when several build sets give one name, the one that sorts
   first wins: bundle first, then the newest Torch, then the newest backend
   version. A noarch variant (`torch-cuda`) is built once, from that build
   set, by definition; any other collision (`tvm-ffi01-cu132` from two Torch
   versions) is recorded and reported, never silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelnix.config.model import BuildConfig
from kernelnix.core.version import Version
from kernelnix.variants.matrix import BuildSet, Matrix, load_matrix
from kernelnix.variants.names import VariantName


@dataclass(frozen=True)
class Variant:
    """One build variant: a name, the build set it is built from, its system."""

    name: str
    kind: str
    system: str
    build_set: BuildSet
    stable_abi: Version | None = None

    @property
    def backend(self) -> str:
        return self.build_set.backend

    @property
    def bundle(self) -> bool:
        return self.build_set.bundle


@dataclass(frozen=True)
class Collision:
    """Several build sets produced one variant name; `kept` won by the collision rule."""

    name: str
    system: str
    kept: BuildSet
    dropped: tuple[BuildSet, ...]

    def describe(self) -> str:
        dropped = "; ".join(b.describe() for b in self.dropped)
        return (
            f"{self.name} ({self.system}): {len(self.dropped) + 1} build sets give this "
            f"name; using {self.kept.describe()} (bundle first, then newest Torch, then "
            f"newest backend version); not used: {dropped}"
        )


@dataclass
class VariantSet:
    variants: list[Variant] = field(default_factory=list)
    collisions: list[Collision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [v.name for v in self.variants]


def within(value: Version, low: Version | None, high: Version | None) -> bool:
    """Whether `value` lies in the inclusive bounds (None: unbounded)."""
    return (low is None or value >= low) and (high is None or value <= high)


def _applies(config: BuildConfig, build_set: BuildSet) -> bool:
    if build_set.backend not in config.backends:
        return False
    if config.framework == "tvm-ffi" and build_set.tvm_ffi is None:
        return False
    cuda = config.general.cuda
    if (
        build_set.backend == "cuda"
        and cuda is not None
        and build_set.version is not None
        and not within(build_set.version, cuda.minver, cuda.maxver)
    ):
        return False
    torch = config.torch
    return torch is None or within(build_set.torch, torch.minver, torch.maxver)


def _kind(config: BuildConfig, build_set: BuildSet) -> tuple[str, Version | None]:
    if config.framework == "tvm-ffi":
        return "tvm-ffi", None
    if config.torch is None or not config.kernels_for(build_set.backend):
        return "noarch", None
    abi = config.torch.stable_abi_for(build_set.backend)
    return ("stable-abi", abi) if abi is not None else ("arch", None)


def _preference(build_set: BuildSet) -> tuple[object, ...]:
    """Sort key of the collision rule: bundle, newest Torch, newest backend version."""
    version = build_set.version.descending() if build_set.version else ()
    return (not build_set.bundle, build_set.torch.descending(), version)


def _name(kind: str, build_set: BuildSet, system: str, abi: Version | None) -> str:
    framework_version = {
        "arch": build_set.torch,
        "stable-abi": abi,
        "tvm-ffi": build_set.tvm_ffi,
    }.get(kind)
    return VariantName(
        kind, build_set.backend, build_set.version, framework_version, system
    ).render()


def variants_for_system(
    config: BuildConfig, system: str, matrix: Matrix | None = None
) -> VariantSet:
    """The variants of `config` on one system, in matrix order."""
    matrix = matrix or load_matrix()
    result = VariantSet()
    candidates: dict[str, list[tuple[BuildSet, str, Version | None]]] = {}
    for build_set in matrix.build_sets:
        if system not in build_set.systems or not _applies(config, build_set):
            continue
        kind, abi = _kind(config, build_set)
        if kind == "stable-abi" and abi is not None and build_set.torch < abi:
            result.notes.append(
                f"{system}: {build_set.describe()} is skipped: Torch "
                f"{build_set.torch.major_minor()} is older than the stable-ABI target {abi}"
            )
            continue
        candidates.setdefault(_name(kind, build_set, system, abi), []).append(
            (build_set, kind, abi)
        )
    for name, group in candidates.items():
        group.sort(key=lambda item: _preference(item[0]))
        kept, kind, abi = group[0]
        result.variants.append(Variant(name, kind, system, kept, abi))
        # Noarch variants are built once from the preferred build set by definition.
        if len(group) > 1 and kind != "noarch":
            result.collisions.append(
                Collision(name, system, kept, tuple(item[0] for item in group[1:]))
            )
    for backend in config.backends:
        if not any(b.backend == backend for b in matrix.build_sets):
            result.notes.append(
                f"backend {backend!r} has no build set in the matrix; no variant is built for it"
            )
    return result


def best_variant(variants: list[Variant], matrix: Matrix | None = None) -> Variant | None:
    """The variant `ci-test` uses: bundle first, then CUDA, ROCm, XPU, Metal, CPU,
    then the newest Torch, then the oldest backend version (widest compatibility)."""
    order = (matrix or load_matrix()).backend_order

    def key(variant: Variant) -> tuple[object, ...]:
        build_set = variant.build_set
        rank = order.index(variant.backend) if variant.backend in order else len(order)
        version = build_set.version.parts if build_set.version else ()
        return (not build_set.bundle, rank, build_set.torch.descending(), version)

    return min(variants, key=key, default=None)
