"""The base of every model of a file kernelnix reads: build.toml's tables, metadata.json,
the plan, the host record, matrix.json's build sets and the check policies (whose
model keeps auditwheel's snake_case keys); pydantic's errors on any of them are
translated by one function, kernelnix.config.issues.issues_of.

Keys are kebab-case (`cuda-capabilities`) and only kebab-case: a snake_case key
is an unknown key, or `[tvm_ffi]` would slip past the one-framework check and
`cuda_capabilities` into a kernel table. Unknown keys are rejected and nothing
is coerced (pydantic's strict mode: a float is not a string, a bool is not an
integer). Validators are built on first use (`defer_build`), so a run pays only
for the models of the files it reads, and a command that reads none (`--help`,
`completion`) pays nothing.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound="FileModel")


def kebab(name: str) -> str:
    """A field's key in the file: `cuda_flags` -> `cuda-flags`."""
    return name.replace("_", "-")


def name_of(key: str) -> str:
    """A field's attribute name from its key in the file: `cuda-flags` -> `cuda_flags`."""
    return key.replace("-", "_")


class FileModel(BaseModel):
    """A frozen record validated from a table of a file, every problem reported at once."""

    model_config = ConfigDict(
        alias_generator=kebab,
        validate_by_alias=True,
        validate_by_name=False,
        extra="forbid",
        strict=True,
        frozen=True,
        defer_build=True,
    )

    @classmethod
    def validate(cls: type[M], value: Any) -> M:
        """The model of `value` as the file spells it (kebab-case keys only), or a
        pydantic ValidationError listing every problem."""
        return cls.model_validate(value, by_alias=True, by_name=False)

    def to_data(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """Plain JSON data with the file's key names, fields in declaration order."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=exclude_none)

    @classmethod
    def file_keys(cls) -> list[str]:
        """The keys of the table in the file, in declaration order."""
        return [info.alias or name for name, info in cls.model_fields.items()]
