"""What every edition of build.toml shares: the base of a whole document (its
framework sections), `[general.hub]`, and the kernel tables `[kernel.<name>]`,
one model per backend."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from kernelnix.config.base import FileModel
from kernelnix.config.types import (
    CudaCapability,
    Dependency,
    NonNegativeInt,
    RocmArch,
    VersionStr,
)

# The description of `pyext`, a key of every framework section.
PYEXT = 'File extensions packaged with the Python code. Default: `["py", "pyi"]`.'


def _one_framework(schema: dict[str, Any], document: type[Any]) -> None:
    """The JSON Schema of "exactly one" (or "at most one") framework section."""
    if document.framework_required:
        schema["oneOf"] = [{"required": [name]} for name in document.frameworks]
    else:
        schema["not"] = {"required": list(document.frameworks)}


class BuildDocument(FileModel):
    """The base of a whole build.toml of one edition."""

    # The loader checks the framework sections itself, to report them with lines;
    # `_one_framework` says the rule in the JSON Schema.
    model_config = ConfigDict(json_schema_extra=_one_framework)

    frameworks: ClassVar[tuple[str, ...]]  # the sections of this edition
    framework_required: ClassVar[bool] = True  # else none is allowed too


class Hub(FileModel):
    """`[general.hub]`: where `kernelnix upload` puts the kernel."""

    repo_id: str | None = Field(
        None,
        description="The Hub repository; `--repo-id` overrides it.",
        examples=["my-org/my-kernel"],
    )
    branch: str | None = Field(
        None, description="The branch; `--branch` overrides it. Default: `v<version>`."
    )


# --------------------------------------------------------- [kernel.<name>]

_BACKEND = "The backend the kernel is compiled for."


class KernelBase(FileModel):
    src: list[str] = Field(
        description="The kernel's sources, relative to build.toml.",
        examples=[["my_kernel/kernel.cpp"]],
    )
    depends: list[Dependency] = Field(
        description="Libraries the sources are compiled against; may be `[]`.",
        examples=[["torch"]],
    )
    include: list[str] = Field([], description="Include directories, relative to build.toml.")
    cxx_flags: list[str] = Field([], description="C++ compiler flags for the kernel's sources.")


class CpuKernel(KernelBase):
    backend: Literal["cpu"] = Field(description=_BACKEND)


class MetalKernel(KernelBase):
    backend: Literal["metal"] = Field(description=_BACKEND)


class CudaKernel(KernelBase):
    backend: Literal["cuda"] = Field(description=_BACKEND)
    cuda_capabilities: list[CudaCapability] | None = Field(
        None, description="The CUDA archs to compile for. Default: every supported arch."
    )
    cuda_flags: list[str] = Field([], description="nvcc flags.")
    cuda_minver: VersionStr | None = Field(
        None, description="The kernel is skipped for CUDA versions below this one."
    )


class RocmKernel(KernelBase):
    backend: Literal["rocm"] = Field(description=_BACKEND)
    rocm_archs: list[RocmArch] | None = Field(
        None, description="The ROCm archs to compile for. Default: every supported arch."
    )
    hip_flags: list[str] = Field([], description="HIP compiler flags.")


class XpuKernel(KernelBase):
    backend: Literal["xpu"] = Field(description=_BACKEND)
    sycl_flags: list[str] = Field([], description="SYCL compiler flags.")


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


def _version_or_revision(schema: dict[str, Any]) -> None:
    schema["oneOf"] = [{"required": ["version"]}, {"required": ["revision"]}]


class KernelDependencyRef(FileModel):
    """Another Hub kernel this kernel needs at run time: exactly one of `version`
    and `revision`."""

    model_config = ConfigDict(title="kernel dependency", json_schema_extra=_version_or_revision)

    repo_id: str = Field(
        description="The kernel's Hub repository.", examples=["kernels-community/activation"]
    )
    version: NonNegativeInt | None = Field(None, description="Its major version.")
    revision: str | None = Field(None, description="A git revision of it.")

    @model_validator(mode="after")
    def _version_xor_revision(self) -> KernelDependencyRef:
        if self.version is not None and self.revision is not None:
            raise ValueError("`version` and `revision` are mutually exclusive; keep one of them")
        if self.version is None and self.revision is None:
            raise ValueError(
                "either `version` (an integer) or `revision` (a git revision) must be specified"
            )
        return self
