"""Edition 5 of build.toml: `BuildConfig`, the one model the rest of kernelnix sees.

Each table extends its pre-edition shape (`kernelnix.config.editions`), so the
keys of every edition are declared once; the tables no edition changed come
from `kernelnix.config.tables`. Pre-edition files are upgraded to this shape
before they are validated as it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kernelnix.config.editions.v3 import BackendDepsV3, CudaV3
from kernelnix.config.editions.v4 import (
    FRAMEWORKS,
    GeneralV4,
    TorchNoarch,
    TorchV4,
    TvmFfi,
)
from kernelnix.config.tables import (
    KERNEL_MODELS,
    BuildDocument,
    CpuKernel,
    CudaKernel,
    Hub,
    Kernel,
    KernelBase,
    KernelDependencyRef,
    MetalKernel,
    RocmKernel,
    XpuKernel,
)
from kernelnix.config.types import StableAbi
from kernelnix.core.version import Version

__all__ = [
    "FRAMEWORKS",
    "KERNEL_MODELS",
    "BackendDeps",
    "BuildConfig",
    "CpuKernel",
    "Cuda",
    "CudaKernel",
    "General",
    "Hub",
    "Kernel",
    "KernelBase",
    "KernelDependencyRef",
    "MetalKernel",
    "RocmKernel",
    "Torch",
    "TorchNoarch",
    "TpuDeps",
    "TvmFfi",
    "XpuKernel",
]

# ---------------------------------------------------------------- [general]


_KERNEL_DEPENDS = "Hub kernels the kernel needs at run time on this backend."


class BackendDeps(BackendDepsV3):
    kernel_depends: list[KernelDependencyRef] = Field([], description=_KERNEL_DEPENDS)


class Cuda(CudaV3, BackendDeps):
    pass


class TpuDeps(BackendDepsV3):
    """`[general.tpu]`: no kernel dependencies."""


class General(GeneralV4):
    # An integral float (5.0) would pass the Literal: the probe refuses it first.
    edition: Literal[5] = Field(
        description="The build.toml edition; any other value is an error.", examples=[5]
    )
    kernel_depends: list[KernelDependencyRef] = Field(
        [], description="Hub kernels the kernel needs at run time, on every backend."
    )
    cuda: Cuda | None = Field(None, description="CUDA bounds and dependencies.")
    neuron: BackendDeps | None = Field(None, description="Neuron dependencies.")
    xpu: BackendDeps | None = Field(None, description="XPU dependencies.")
    tpu: TpuDeps | None = Field(None, description="TPU dependencies.")

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")


# ------------------------------------------------------- framework sections


class Torch(TorchV4):
    """`[torch]`: a compiled Torch extension."""

    # Edition 5 widens the field: one version, or a table of them per backend.
    stable_abi: StableAbi | None = Field(  # type: ignore[assignment]
        None,
        description="Build against Torch's stable ABI of this version: one for every backend, "
        "or a table `backend = version` (edition 5 only); a backend left out of the table "
        "gets the full ABI.",
        examples=["2.12"],
    )

    def stable_abi_for(self, backend: str) -> Version | None:
        """The stable-ABI target of `backend`, or None for the full ABI."""
        if isinstance(self.stable_abi, dict):
            return self.stable_abi.get(backend)
        return self.stable_abi


# ------------------------------------------------------------- the document


class BuildConfig(BuildDocument):
    """A build.toml of edition 5: `[general]`, one framework section, the kernels."""

    # The only shape downstream code sees.
    frameworks: ClassVar[tuple[str, ...]] = FRAMEWORKS

    general: General = Field(description="The kernel: name, version, license, backends.")
    torch: Torch | None = Field(None, description="A compiled Torch extension.")
    torch_noarch: TorchNoarch | None = Field(None, description="A Python-only kernel.")
    tvm_ffi: TvmFfi | None = Field(None, description="A TVM FFI extension.")
    kernel: dict[str, Kernel] = Field(
        {}, description="The compiled components: one table per kernel, any name."
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
