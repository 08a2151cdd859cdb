"""The pre-edition v3 shape of build.toml, and its upgrade to v4.

v3 has no `edition`, `source`, `cxx-flags` nor `[torch-noarch]`, and `version`
and `license` are optional. Upstream no longer reads v3 files; kernelnix does
when they have a `license`, which edition 5 needs.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from kernelnix.config.base import FileModel
from kernelnix.config.tables import PYEXT, BuildDocument, Hub, Kernel
from kernelnix.config.types import Backend, GitUrl, KernelName, NonNegativeInt, VersionStr

Document = MutableMapping[str, Any]


def _license_required(schema: dict[str, Any]) -> None:
    # The loader refuses a v3 file without a license (with its own message): the
    # upgrade to edition 5 needs one. The schema says so as a required key.
    if "license" not in schema["required"]:
        schema["required"].append("license")


class BackendDepsV3(FileModel):
    python_depends: list[str] = Field(
        [], description="Python packages the kernel needs on this backend."
    )


class CudaV3(BackendDepsV3):
    minver: VersionStr | None = Field(
        None, description="The lowest CUDA version to build for.", examples=["12.6"]
    )
    maxver: VersionStr | None = Field(
        None, description="The highest CUDA version to build for.", examples=["13.2"]
    )


class GeneralV3(FileModel):
    model_config = ConfigDict(json_schema_extra=_license_required)

    name: KernelName = Field(description="The kernel's name.", examples=["my-kernel"])
    version: NonNegativeInt | None = None
    license: str | None = None
    upstream: GitUrl | None = Field(
        None, description="The repository of the code the kernel is built from (Hub card)."
    )
    backends: list[Backend] = Field(
        description="The backends to build for; duplicates are ignored.",
        examples=[["cpu", "cuda"]],
    )
    python_depends: list[str] = Field(
        [],
        description="Python packages the kernel needs on every backend, by the names of "
        "kernelnix/data/python_dependencies.json.",
    )
    hub: Hub | None = Field(None, description="Where `kernelnix upload` puts the kernel.")
    cuda: CudaV3 | None = None
    neuron: BackendDepsV3 | None = None
    xpu: BackendDepsV3 | None = None


class TorchV3(FileModel):
    src: list[str] = Field(
        [], description="The sources of the Torch binding (`torch-ext/torch_binding.cpp`, ...)."
    )
    include: list[str] = Field([], description="Include directories of the binding's sources.")
    minver: VersionStr | None = Field(
        None, description="The lowest Torch version to build for.", examples=["2.12"]
    )
    maxver: VersionStr | None = Field(
        None, description="The highest Torch version to build for.", examples=["2.13"]
    )
    pyext: list[str] | None = Field(None, description=PYEXT)


class TvmFfiV3(FileModel):
    src: list[str] = Field(
        description="The sources of the TVM FFI binding.",
        examples=[["tvm-ffi-ext/binding.cpp"]],
    )
    include: list[str] = Field([], description="Include directories of the binding's sources.")
    pyext: list[str] | None = Field(None, description=PYEXT)


class BuildConfigV3(BuildDocument):
    frameworks: ClassVar[tuple[str, ...]] = ("torch", "tvm-ffi")
    framework_required: ClassVar[bool] = False  # none means a Python-only kernel

    general: GeneralV3
    torch: TorchV3 | None = None
    tvm_ffi: TvmFfiV3 | None = None
    kernel: dict[str, Kernel] = Field({})


def upgrade(doc: Document, new_table: Callable[[], Any]) -> None:
    """v3 -> v4 in place: `version` defaults to 1; no framework section meant noarch."""
    general = doc["general"]
    if "version" not in general:
        general["version"] = 1
    if not any(section in doc for section in BuildConfigV3.frameworks):
        doc["torch-noarch"] = new_table()
