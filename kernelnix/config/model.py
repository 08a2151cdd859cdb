"""The models of build.toml (see kernelnix.schema for the validation rules).

Edition 5 is the ONE model the rest of kernelnix sees (`BuildConfig`). The
pre-edition v4 and v3 shapes are small subclasses that only differ in what
they allow; `kernelnix.config.upgrade` turns them into edition 5.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from kernelnix.config.types import (
    Backend,
    CudaCapability,
    Dependency,
    GitUrl,
    KernelName,
    NonNegativeInt,
    RocmArch,
    StableAbi,
    VersionStr,
)
from kernelnix.core.version import Version
from kernelnix.schema import Model, Tagged, field


class Table(Model):
    """A build.toml table: kebab-case keys, unknown keys rejected, no coercion.

    Only the kebab-case spelling is accepted (as upstream does): snake_case
    field names must not validate, or `[tvm_ffi]` would slip past the
    one-framework check and `cuda_capabilities` into a kernel table.
    """


# ---------------------------------------------------------------- [general]


class Hub(Table):
    repo_id: str | None = field(None, examples=['"my-org/my-kernel"'])
    branch: str | None = None


class KernelDependencyRef(Table):
    """Another Hub kernel this kernel needs at run time (edition 5)."""

    repo_id: str = field(examples=['"kernels-community/activation"'])
    version: NonNegativeInt | None = None
    revision: str | None = None

    def check_whole(self, context: Mapping[str, object]) -> None:
        if self.version is not None and self.revision is not None:
            raise ValueError("`version` and `revision` are mutually exclusive; keep one of them")
        if self.version is None and self.revision is None:
            raise ValueError(
                "either `version` (an integer) or `revision` (a git revision) must be specified"
            )


class BackendDepsV4(Table):
    python_depends: list[str] = field([])


class CudaV4(BackendDepsV4):
    minver: VersionStr | None = field(None, examples=['"12.6"'])
    maxver: VersionStr | None = field(None, examples=['"13.2"'])


class BackendDeps(BackendDepsV4):
    kernel_depends: list[KernelDependencyRef] = field([])


class Cuda(CudaV4, BackendDeps):
    pass


class TpuDeps(Table):
    python_depends: list[str] = field([])


class GeneralV3(Table):
    name: KernelName = field(examples=['"my-kernel"'])
    version: NonNegativeInt | None = field(None, examples=["1"])
    license: str | None = field(None, examples=['"Apache-2.0"'])
    upstream: GitUrl | None = None
    backends: list[Backend] = field(examples=['["cpu", "cuda"]'])
    python_depends: list[str] = field([])
    hub: Hub | None = None
    cuda: CudaV4 | None = None
    neuron: BackendDepsV4 | None = None
    xpu: BackendDepsV4 | None = None


class GeneralV4(GeneralV3):
    version: NonNegativeInt = field(examples=["1"])
    license: str = field(examples=['"Apache-2.0"'])
    source: GitUrl | None = None


class General(GeneralV4):
    edition: Literal[5] = field(examples=["5"])
    kernel_depends: list[KernelDependencyRef] = field([])
    cuda: Cuda | None = None
    neuron: BackendDeps | None = None
    xpu: BackendDeps | None = None
    tpu: TpuDeps | None = None

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")


# ------------------------------------------------------- framework sections


class TorchV3(Table):
    src: list[str] = field([])
    include: list[str] = field([])
    minver: VersionStr | None = field(None, examples=['"2.12"'])
    maxver: VersionStr | None = field(None, examples=['"2.13"'])
    pyext: list[str] | None = None


class TorchV4(TorchV3):
    stable_abi: VersionStr | None = field(None, examples=['"2.12"'])
    cxx_flags: list[str] = field([])


class Torch(TorchV4):
    # Edition 5 widens the field: one version, or a table of them per backend.
    stable_abi: StableAbi | None = field(None, examples=['"2.12"'])  # type: ignore[assignment]

    def stable_abi_for(self, backend: str) -> Version | None:
        """The stable-ABI target of `backend`, or None for the full ABI."""
        if isinstance(self.stable_abi, dict):
            return self.stable_abi.get(backend)
        return self.stable_abi


class TorchNoarch(Table):
    """`[torch-noarch]`: upstream spells the arch lists in snake_case; we take both."""

    pyext: list[str] | None = None
    cuda_capabilities: list[CudaCapability] | None = None
    rocm_archs: list[RocmArch] | None = None

    @classmethod
    def normalize_input(cls, data: dict[str, object]) -> dict[str, object]:
        data = dict(data)
        for kebab in ("cuda-capabilities", "rocm-archs"):
            snake = kebab.replace("-", "_")
            if snake in data and kebab in data:
                raise ValueError(
                    f"`{kebab}` and `{snake}` are the same key spelled twice; keep one "
                    f"(`{snake}` also works with upstream kernel-builder)"
                )
            if snake in data:
                data[kebab] = data.pop(snake)
        return data


class TvmFfiV3(Table):
    src: list[str] = field(examples=['["tvm-ffi-ext/binding.cpp"]'])
    include: list[str] = field([])
    pyext: list[str] | None = None


class TvmFfi(TvmFfiV3):
    cxx_flags: list[str] = field([])


# --------------------------------------------------------- [kernel.<name>]


class KernelBase(Table):
    src: list[str] = field(examples=['["my_kernel/kernel.cpp"]'])
    depends: list[Dependency] = field(examples=['["torch"]'])
    include: list[str] = field([])
    cxx_flags: list[str] = field([])


class CpuKernel(KernelBase):
    backend: Literal["cpu"]


class MetalKernel(KernelBase):
    backend: Literal["metal"]


class CudaKernel(KernelBase):
    backend: Literal["cuda"]
    cuda_capabilities: list[CudaCapability] | None = None
    cuda_flags: list[str] = field([])
    cuda_minver: VersionStr | None = None


class RocmKernel(KernelBase):
    backend: Literal["rocm"]
    rocm_archs: list[RocmArch] | None = None
    hip_flags: list[str] = field([])


class XpuKernel(KernelBase):
    backend: Literal["xpu"]
    sycl_flags: list[str] = field([])


Kernel = Annotated[
    CpuKernel | CudaKernel | MetalKernel | RocmKernel | XpuKernel,
    Tagged("backend"),
]
KERNEL_MODELS: dict[str, type[KernelBase]] = {
    "cpu": CpuKernel,
    "cuda": CudaKernel,
    "metal": MetalKernel,
    "rocm": RocmKernel,
    "xpu": XpuKernel,
}

FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")


# ------------------------------------------------------------- documents


class BuildConfigV3(Table):
    general: GeneralV3
    torch: TorchV3 | None = None
    tvm_ffi: TvmFfiV3 | None = None
    kernel: dict[str, Kernel] = field({})


class BuildConfigV4(Table):
    general: GeneralV4
    torch: TorchV4 | None = None
    torch_noarch: TorchNoarch | None = None
    tvm_ffi: TvmFfi | None = None
    kernel: dict[str, Kernel] = field({})


class BuildConfig(Table):
    """A normalized build.toml of edition 5: the only shape downstream code sees."""

    general: General
    torch: Torch | None = None
    torch_noarch: TorchNoarch | None = None
    tvm_ffi: TvmFfi | None = None
    kernel: dict[str, Kernel] = field({})

    def check_whole(self, context: Mapping[str, object]) -> None:
        # The loader reports framework problems itself, with lines; see load.py.
        if context.get("frameworks_checked"):
            return
        present = [f for f in FRAMEWORKS if getattr(self, f.replace("-", "_")) is not None]
        if len(present) != 1:
            raise ValueError(
                "exactly one framework section is required: [torch], [torch-noarch] or "
                f"[tvm-ffi]; found {len(present)}"
            )

    @property
    def framework(self) -> str:
        return next(f for f in FRAMEWORKS if getattr(self, f.replace("-", "_")) is not None)

    @property
    def backends(self) -> list[str]:
        """`general.backends` without duplicates, in file order."""
        return list(dict.fromkeys(self.general.backends))

    def kernels_for(self, backend: str) -> dict[str, KernelBase]:
        return {name: k for name, k in self.kernel.items() if k.backend == backend}

    def to_json(self) -> dict[str, object]:
        """The normalized config as plain JSON data with build.toml's key names."""
        return self.to_data(exclude_none=True)


MODELS_BY_SHAPE: dict[str, type[Table]] = {
    "5": BuildConfig,
    "v4": BuildConfigV4,
    "v3": BuildConfigV3,
}
