"""GPU architectures a kernel is compiled for, per variant.

CUDA: a kernel's `cuda-capabilities` are intersected with what the variant's
CUDA toolkit supports (its default list, `+PTX` removed), loosely, like the
reference CMake: a capability is kept when the toolkit has an arch of the same
major version that is not older (`8.6` runs on an `8.9` target) and the
toolkit still compiles for it (not older than its oldest arch); an `a`
(arch-specific) capability needs that exact arch; `+PTX` may cross major
versions because PTX is JIT-compiled forward. Without `cuda-capabilities` the
toolkit's default list is used. ROCm: `rocm-archs` intersected with the
toolkit's archs. An empty result is an error naming the kernel and toolkit.
"""

from __future__ import annotations

from functools import cache

from kernelnix.config.model import CudaKernel, KernelBase, RocmKernel
from kernelnix.config.types import parse_capability
from kernelnix.core.diagnostics import ConfigValueError, format_key_path
from kernelnix.core.version import Version
from kernelnix.variants.matrix import Matrix


class EmptyArchsError(ConfigValueError):
    """No architecture of a kernel is supported by a variant's toolkit."""


def _strip_ptx(arch: str) -> str:
    return arch.removesuffix("+PTX")


def _supported(capability: str, targets: tuple[Version, ...]) -> bool:
    version, suffix, ptx = parse_capability(capability)
    if version < min(targets):  # the toolkit dropped this arch (CUDA 13 has no sm_70)
        return False
    if suffix == "a":
        return version in targets
    if ptx:
        return any(version <= target for target in targets)
    return any(t.major == version.major and version <= t for t in targets)


def cuda_capability_supported(capability: str, cuda: Version, matrix: Matrix) -> bool:
    """Whether CUDA `cuda` builds `capability` (see the module doc)."""
    return _supported(capability, _arch_versions(tuple(matrix.cuda_default_archs(cuda))))


@cache
def _arch_versions(archs: tuple[str, ...]) -> tuple[Version, ...]:
    # Parsed once per toolkit: a plan asks for each capability of each variant.
    return tuple(Version.parse(_strip_ptx(a)) for a in archs)


def cuda_archs(kernel: CudaKernel, cuda: Version, matrix: Matrix, kernel_name: str) -> list[str]:
    defaults = matrix.cuda_default_archs(cuda)
    if kernel.cuda_capabilities is None:
        return defaults
    kept = [c for c in kernel.cuda_capabilities if cuda_capability_supported(c, cuda, matrix)]
    if not kept:
        raise EmptyArchsError(
            f"kernel {kernel_name!r}: none of its cuda-capabilities "
            f"({', '.join(kernel.cuda_capabilities)}) is supported by CUDA {cuda}, which "
            f"builds for {', '.join(defaults)}",
            key=format_key_path(("kernel", kernel_name, "cuda-capabilities")),
            fix=f'add a supported capability, or set cuda-minver = "X.Y" on the kernel '
            f"(or general.cuda.minver) to skip CUDA {cuda}",
        )
    return list(dict.fromkeys(kept))


def rocm_archs(kernel: RocmKernel, rocm: Version, matrix: Matrix, kernel_name: str) -> list[str]:
    supported = matrix.rocm_archs()
    if kernel.rocm_archs is None:
        return supported
    kept = [a for a in kernel.rocm_archs if a.split(":")[0] in supported]
    if not kept:
        raise EmptyArchsError(
            f"kernel {kernel_name!r}: none of its rocm-archs ({', '.join(kernel.rocm_archs)}) "
            f"is supported by ROCm {rocm}, which builds for {', '.join(supported)}",
            key=format_key_path(("kernel", kernel_name, "rocm-archs")),
            fix="add a supported arch",
        )
    return list(dict.fromkeys(kept))


def kernel_archs(
    kernel: KernelBase, backend_version: Version | None, matrix: Matrix, kernel_name: str
) -> list[str] | None:
    """The archs to compile `kernel` for, or None for backends without arch lists."""
    if isinstance(kernel, CudaKernel) and backend_version is not None:
        return cuda_archs(kernel, backend_version, matrix, kernel_name)
    if isinstance(kernel, RocmKernel) and backend_version is not None:
        return rocm_archs(kernel, backend_version, matrix, kernel_name)
    return None


def metadata_archs(archs: list[str]) -> list[str]:
    """The union written to metadata.json: deduplicated, sorted as strings (like upstream)."""
    return sorted(set(archs))
