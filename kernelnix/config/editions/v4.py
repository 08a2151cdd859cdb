"""The pre-edition v4 shape of build.toml, and its upgrade to edition 5.

v4 is edition 5 without `edition`, `kernel-depends`, `[general.tpu]` and the
per-backend `stable-abi` table; the upgrade only adds `edition = 5`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, model_validator

from kernelnix.config.base import FileModel
from kernelnix.config.editions.v3 import Document, GeneralV3, TorchV3, TvmFfiV3
from kernelnix.config.tables import PYEXT, BuildDocument, Kernel
from kernelnix.config.types import CudaCapability, GitUrl, NonNegativeInt, RocmArch, VersionStr

FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")
_SNAKE_CASE_KEYS = ("cuda-capabilities", "rocm-archs")


class GeneralV4(GeneralV3):
    version: NonNegativeInt = Field(
        description="The kernel's major version; uploads go to the branch `v<version>`.",
        examples=[1],
    )
    license: str = Field(description="The license, as a Hub license id.", examples=["Apache-2.0"])
    source: GitUrl | None = Field(
        None, description="The repository of the kernel project itself (Hub card)."
    )


class TorchV4(TorchV3):
    stable_abi: VersionStr | None = Field(None, examples=["2.12"])
    cxx_flags: list[str] = Field([], description="C++ compiler flags of the binding's sources.")


def _both_spellings(schema: dict[str, Any]) -> None:
    """The snake_case keys in the schema too, each exclusive with its kebab-case twin."""
    properties = schema["properties"]
    for kebab in _SNAKE_CASE_KEYS:
        properties[kebab.replace("-", "_")] = properties[kebab]
    schema["allOf"] = [
        {"not": {"required": [kebab, kebab.replace("-", "_")]}} for kebab in _SNAKE_CASE_KEYS
    ]


class TorchNoarch(FileModel):
    """`[torch-noarch]`: a Python-only kernel; an empty table is usual."""

    # Upstream reads the arch lists in snake_case (and documents kebab-case): we
    # take both spellings, and refuse a key spelled both ways.

    model_config = ConfigDict(json_schema_extra=_both_spellings)

    pyext: list[str] | None = Field(None, description=PYEXT)
    cuda_capabilities: list[CudaCapability] | None = Field(
        None,
        description="The CUDA archs written to metadata.json; `cuda_capabilities` works too.",
    )
    rocm_archs: list[RocmArch] | None = Field(
        None, description="The ROCm archs written to metadata.json; `rocm_archs` works too."
    )

    @model_validator(mode="before")
    @classmethod
    def _snake_case_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for kebab in _SNAKE_CASE_KEYS:
            snake = kebab.replace("-", "_")
            if snake in data and kebab in data:
                raise ValueError(
                    f"`{kebab}` and `{snake}` are the same key spelled twice; keep one "
                    f"(`{snake}` also works with upstream kernel-builder)"
                )
            if snake in data:
                data[kebab] = data.pop(snake)
        return data


class TvmFfi(TvmFfiV3):
    cxx_flags: list[str] = Field([], description="C++ compiler flags of the binding's sources.")


class BuildConfigV4(BuildDocument):
    frameworks: ClassVar[tuple[str, ...]] = FRAMEWORKS

    general: GeneralV4
    torch: TorchV4 | None = None
    torch_noarch: TorchNoarch | None = None
    tvm_ffi: TvmFfi | None = None
    kernel: dict[str, Kernel] = Field({})


def upgrade(doc: Document, new_table: Callable[[], Any]) -> None:
    """v4 -> 5 in place; a string stable-abi already means every backend."""
    doc["general"]["edition"] = 5
