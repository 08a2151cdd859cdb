"""The pydantic models of build.toml.

Edition 5 is the ONE model the rest of kernelnix sees (`BuildConfig`). The
pre-edition v4 and v3 shapes are small subclasses that only differ in what
they allow; `kernelnix.config.upgrade` turns them into edition 5.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

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
from kernelnix.version import Version


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class Table(BaseModel):
    """A build.toml table: kebab-case keys, unknown keys rejected, no coercion.

    Only the kebab-case spelling is accepted (as upstream does): snake_case
    field names must not validate, or `[tvm_ffi]` would slip past the
    one-framework check and `cuda_capabilities` into a kernel table.
    """

    model_config = ConfigDict(
        alias_generator=_kebab,
        populate_by_name=False,
        extra="forbid",
        strict=True,
        frozen=True,
        arbitrary_types_allowed=True,
        # Build validators on first use: a run only needs the models of one edition.
        defer_build=True,
    )


# ---------------------------------------------------------------- [general]


class Hub(Table):
    repo_id: str | None = Field(None, examples=['"my-org/my-kernel"'])
    branch: str | None = None


class KernelDependencyRef(Table):
    """Another Hub kernel this kernel needs at run time (edition 5)."""

    repo_id: str = Field(examples=['"kernels-community/activation"'])
    version: NonNegativeInt | None = None
    revision: str | None = None

    @model_validator(mode="after")
    def _version_xor_revision(self) -> KernelDependencyRef:
        if self.version is not None and self.revision is not None:
            raise ValueError("`version` and `revision` are mutually exclusive; keep one of them")
        if self.version is None and self.revision is None:
            raise ValueError(
                "either `version` (an integer) or `revision` (a git revision) must be specified"
            )
        return self


class BackendDepsV4(Table):
    python_depends: list[str] = []


class CudaV4(BackendDepsV4):
    minver: VersionStr | None = Field(None, examples=['"12.6"'])
    maxver: VersionStr | None = Field(None, examples=['"13.2"'])


class BackendDeps(BackendDepsV4):
    kernel_depends: list[KernelDependencyRef] = []


class Cuda(CudaV4, BackendDeps):
    pass


class TpuDeps(Table):
    python_depends: list[str] = []


class GeneralV3(Table):
    name: KernelName = Field(examples=['"my-kernel"'])
    version: NonNegativeInt | None = Field(None, examples=["1"])
    license: str | None = Field(None, examples=['"Apache-2.0"'])
    upstream: GitUrl | None = None
    backends: list[Backend] = Field(examples=['["cpu", "cuda"]'])
    python_depends: list[str] = []
    hub: Hub | None = None
    cuda: CudaV4 | None = None
    neuron: BackendDepsV4 | None = None
    xpu: BackendDepsV4 | None = None


class GeneralV4(GeneralV3):
    version: NonNegativeInt = Field(examples=["1"])
    license: str = Field(examples=['"Apache-2.0"'])
    source: GitUrl | None = None


class General(GeneralV4):
    edition: Literal[5] = Field(examples=["5"])
    kernel_depends: list[KernelDependencyRef] = []
    cuda: Cuda | None = None
    neuron: BackendDeps | None = None
    xpu: BackendDeps | None = None
    tpu: TpuDeps | None = None

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")


# ------------------------------------------------------- framework sections


class TorchV3(Table):
    src: list[str] = []
    include: list[str] = []
    minver: VersionStr | None = Field(None, examples=['"2.12"'])
    maxver: VersionStr | None = Field(None, examples=['"2.13"'])
    pyext: list[str] | None = None


class TorchV4(TorchV3):
    stable_abi: VersionStr | None = Field(None, examples=['"2.12"'])
    cxx_flags: list[str] = []


class Torch(TorchV4):
    stable_abi: StableAbi | None = Field(None, examples=['"2.12"'])

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

    @model_validator(mode="before")
    @classmethod
    def _accept_snake_case(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
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
    src: list[str] = Field(examples=['["tvm-ffi-ext/binding.cpp"]'])
    include: list[str] = []
    pyext: list[str] | None = None


class TvmFfi(TvmFfiV3):
    cxx_flags: list[str] = []


# --------------------------------------------------------- [kernel.<name>]


class KernelBase(Table):
    src: list[str] = Field(examples=['["my_kernel/kernel.cpp"]'])
    depends: list[Dependency] = Field(examples=['["torch"]'])
    include: list[str] = []
    cxx_flags: list[str] = []


class CpuKernel(KernelBase):
    backend: Literal["cpu"]


class MetalKernel(KernelBase):
    backend: Literal["metal"]


class CudaKernel(KernelBase):
    backend: Literal["cuda"]
    cuda_capabilities: list[CudaCapability] | None = None
    cuda_flags: list[str] = []
    cuda_minver: VersionStr | None = None


class RocmKernel(KernelBase):
    backend: Literal["rocm"]
    rocm_archs: list[RocmArch] | None = None
    hip_flags: list[str] = []


class XpuKernel(KernelBase):
    backend: Literal["xpu"]
    sycl_flags: list[str] = []


Kernel = Annotated[
    CpuKernel | CudaKernel | MetalKernel | RocmKernel | XpuKernel,
    Field(discriminator="backend"),
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
    kernel: dict[str, Kernel] = {}


class BuildConfigV4(Table):
    general: GeneralV4
    torch: TorchV4 | None = None
    torch_noarch: TorchNoarch | None = None
    tvm_ffi: TvmFfi | None = None
    kernel: dict[str, Kernel] = {}


class BuildConfig(Table):
    """A normalized build.toml of edition 5: the only shape downstream code sees."""

    general: General
    torch: Torch | None = None
    torch_noarch: TorchNoarch | None = None
    tvm_ffi: TvmFfi | None = None
    kernel: dict[str, Kernel] = {}

    @model_validator(mode="after")
    def _exactly_one_framework(self, info: ValidationInfo) -> BuildConfig:
        # The loader reports framework problems itself, with lines; see load.py.
        if info.context and info.context.get("frameworks_checked"):
            return self
        present = [f for f in FRAMEWORKS if getattr(self, f.replace("-", "_")) is not None]
        if len(present) != 1:
            raise ValueError(
                "exactly one framework section is required: [torch], [torch-noarch] or "
                f"[tvm-ffi]; found {len(present)}"
            )
        return self

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
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


MODELS_BY_SHAPE: dict[str, type[Table]] = {
    "5": BuildConfig,
    "v4": BuildConfigV4,
    "v3": BuildConfigV3,
}
