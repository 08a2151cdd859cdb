"""How a kernel is compiled in one variant: its flags resolved from build.toml and
the matrix, so that the CMake project (kernelnix.emit.cmake) only renders them.

CUDA: one `-gencode` per capability, then the kernel's `cuda-flags`; nvcc knows
`-static-global-template-stub` only from CUDA 12.8, older toolkits do not get it.
ROCm: one `--offload-arch` per arch, then `hip-flags`. XPU: SYCL compiled ahead of
time with kernel-builder's SYCL flags for the matrix's offload targets and devices
(kernels depending on `sycl_tla` target that library's devices, Crescent Island in
an image of its own when a kernel marks Xe35-only code), then `sycl-flags` and
`cxx-flags`.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelnix.config.model import CudaKernel, KernelBase, RocmKernel, XpuKernel
from kernelnix.core.version import Version
from kernelnix.plan.gencode import cuda_gencode
from kernelnix.plan.model import KernelCompile
from kernelnix.variants.matrix import Matrix

STUB_FLAG = "-static-global-template-stub"
CUDA_STUB_MIN = Version((12, 8))


def cuda_flags(kernel: CudaKernel, cuda: Version | None) -> list[str]:
    """The kernel's `cuda-flags` that nvcc `cuda` understands."""
    if cuda is not None and cuda < CUDA_STUB_MIN:
        return [f for f in kernel.cuda_flags if not f.startswith(STUB_FLAG)]
    return list(kernel.cuda_flags)


def cri_image(kernels: Iterable[KernelBase], matrix: Matrix) -> bool:
    """Whether a variant's SYCL code has its own Crescent Island image: one of its
    XPU kernels marks Xe35-only code in its `sycl-flags` (kernel-builder #734)."""
    marker = matrix.toolkits["xpu"]["cri-image"]["marker"]
    return any(
        marker in flag
        for kernel in kernels
        if isinstance(kernel, XpuKernel)
        for flag in kernel.sycl_flags
    )


def sycl_flags(kernel: XpuKernel, matrix: Matrix, cri: bool = False) -> list[str]:
    """`-fsycl`, kernel-builder's SYCL flags (IEEE fp32 division and square root,
    NaNs and infinities honoured, compressed images), the ahead-of-time targets and
    devices, then the kernel's `sycl-flags`. `cri`: see cri_image."""
    xpu = matrix.toolkits["xpu"]
    targets, devices = xpu["offload-targets"], xpu["aot-devices"]
    if "sycl_tla" in kernel.depends:
        devices = xpu["aot-devices-sycl-tla"]
        if cri:
            targets, devices = xpu["cri-image"]["offload-targets"], xpu["cri-image"]["aot-devices"]
    return [
        "-fsycl",
        *xpu["sycl-flags"],
        f"-fsycl-targets={','.join(targets)}",
        "-Xs",
        f"-device {','.join(devices)}",
        *kernel.sycl_flags,
    ]


def _gpu_flags(kernel: KernelBase, archs: list[str], backend_version: Version | None) -> list[str]:
    if isinstance(kernel, CudaKernel):
        return cuda_gencode(archs) + cuda_flags(kernel, backend_version)
    if isinstance(kernel, RocmKernel):
        return [f"--offload-arch={arch}" for arch in archs] + list(kernel.hip_flags)
    return []


def kernel_compile(
    kernel: KernelBase,
    archs: list[str] | None,
    backend_version: Version | None,
    matrix: Matrix,
    cri: bool = False,
) -> KernelCompile:
    """How `kernel` is compiled for `archs` with the variant's backend version
    (`cri`: the variant's SYCL code has its own Crescent Island image, cri_image)."""
    cxx = list(kernel.cxx_flags)
    if isinstance(kernel, XpuKernel):
        cxx = sycl_flags(kernel, matrix, cri) + cxx
    # Unvalidated: kernelnix's own flags (see kernelnix.plan.build).
    return KernelCompile.model_construct(
        cxx_flags=cxx,
        gpu_flags=_gpu_flags(kernel, archs or [], backend_version),
        dependencies=[],  # Torch's headers come with every project; nothing else yet
    )
