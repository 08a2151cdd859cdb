"""metadata.json: its model and the one function that reads it.

The model is the `kernels` loader's contract (`kernels._rust.Metadata`): what
kernelnix writes, the loader accepts unchanged, and what the loader accepts,
kernelnix reads the same way. Like the loader, the model ignores keys it does
not know, except in `kernel-depends` entries, which the loader refuses
unknown keys in too; it reads `sha` as the older name of `commit`. The JSON
Schema says the same (`additionalProperties`). The plan carries a variant's
model; the build step writes it, and the checks, `hash` and `upload` read it
back with `read_metadata`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kernelnix import __version__
from kernelnix.config.base import FileModel
from kernelnix.config.tables import KernelDependencyRef
from kernelnix.config.types import Backend, KernelName, NonNegativeInt
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path, format_key_path

BUILDER_VERSION = f"kernelnix {__version__}"
METADATA = "metadata.json"


def _unknown_keys_ignored(schema: dict[str, Any]) -> None:
    schema["additionalProperties"] = True


class Record(FileModel):
    """A table of metadata.json: unknown keys are ignored (the loader's serde
    default), a null or absent optional key is left out when written.

    kernelnix also builds these in code, by field name; a file is still read
    by its kebab-case keys only (`validate`)."""

    model_config = ConfigDict(
        validate_by_name=True, extra="ignore", json_schema_extra=_unknown_keys_ignored
    )

    @model_serializer(mode="wrap")
    def _present_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class BackendInfo(Record):
    type: Backend = Field(description="The backend the variant is built for.")
    archs: list[str] | None = Field(
        None, description="The GPU archs the variant's kernels are compiled for."
    )


class Digest(Record):
    """The hashes of the variant's files, as `kernelnix hash` writes them."""

    algorithm: Literal["sha256", "sha512"]
    files: dict[str, str] = Field(
        description="Each file's path in the variant and the base64 of its hash."
    )


# A commit as the loader reads one in provenance: a full git object id, SHA-1 or
# SHA-256, in either case (the loader keeps it lowercase).
GIT_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


def _commit_field(description: str, required: bool) -> Any:
    return Field(
        ... if required else None,
        description=f"{description} Read from `sha` too, its older name; written as `commit`.",
        validation_alias=AliasChoices("commit", "sha"),
    )


def _sha_is_commit(schema: dict[str, Any]) -> None:
    _unknown_keys_ignored(schema)
    properties = schema["properties"]
    properties["sha"] = {**properties["commit"], "description": "The older name of `commit`."}
    schema["not"] = {"required": ["commit", "sha"]}
    if "commit" in schema.get("required", []):
        schema["required"].remove("commit")
        schema["oneOf"] = [{"required": ["commit"]}, {"required": ["sha"]}]


class GitRecord(Record):
    """A table with a git `commit` (or `sha`, its older name: the loader reads both)."""

    model_config = ConfigDict(json_schema_extra=_sha_is_commit)

    @model_validator(mode="before")
    @classmethod
    def _one_commit_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "commit" in data and "sha" in data:
            raise ValueError("`sha` is the older name of `commit`; keep `commit` only")
        return data


class BuilderVersion(GitRecord):
    version: str
    commit: str | None = _commit_field("The builder's git commit.", required=False)
    dirty: bool | None = None


class KernelGit(GitRecord):
    commit: str = _commit_field("The kernel's git commit the variant was built from.", True)
    dirty: bool = Field(description="Whether the work tree had uncommitted changes.")


class BuildProvenance(Record):
    """kernelnix's own record: which toolchain built it and whether it may be shared."""

    toolchain: str
    redistributable: bool
    policy: str | None = Field(
        None,
        description="The check policy the variant passed when it was built "
        "(`kernelnix check` applies it again unless given --policy).",
    )
    development_archs: list[str] | None = Field(
        None, description="A development build's archs (`--cuda-archs`): not publishable."
    )


# The build provenance of a variant built through a kernel's flake: SLSA build
# provenance v1 as an in-toto statement (what was built: the files the loader
# hashes, with their sha256; from what: the source, kernelnix, the toolchain
# lock, the locked wheels; by what: Nix and its derivation). Its keys are
# SLSA's, in camelCase. The bundle step records it (`kernelnix
# bundle`); `kernelnix hash` adds the source repository's URL from
# git where the flake could not know it. docs/hermetic.md maps the fields.
IN_TOTO_STATEMENT: Final = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE: Final = "https://slsa.dev/provenance/v1"
BUILD_TYPE: Final = "urn:kernelnix:nix-flake-variant:v1"
BUILDER_ID: Final = "urn:kernelnix:nix"


class SlsaRecord(Record):
    """A table of the SLSA statement: its keys are camelCase."""

    model_config = ConfigDict(alias_generator=to_camel)


class ResourceDescriptor(SlsaRecord):
    """An artifact or input: a name and/or URI, and its digests (`sha256`, `gitCommit`)."""

    name: str | None = None
    uri: str | None = None
    digest: dict[str, str] = Field(default_factory=dict)


class SourceParameter(ResourceDescriptor):
    """The kernel's source: its repository (where known), commit and whether the
    work tree was dirty."""

    dirty: bool


class ExternalParameters(SlsaRecord):
    source: SourceParameter
    variant: str = Field(description="The variant built (its flake attribute).")
    toolchain: str = Field(description="The kernelnix toolchain that built it.")


class BuildDefinition(SlsaRecord):
    build_type: Literal["urn:kernelnix:nix-flake-variant:v1"] = BUILD_TYPE
    external_parameters: ExternalParameters
    resolved_dependencies: list[ResourceDescriptor]


class Builder(SlsaRecord):
    id: Literal["urn:kernelnix:nix"] = BUILDER_ID
    version: dict[str, str] = Field(description="Nix's and kernelnix's versions.")


class BuildMetadata(SlsaRecord):
    invocation_id: str = Field(
        description="The variant's Nix derivation (`/nix/store/...drv`).",
        pattern=r"^/nix/store/[0-9a-df-np-sv-z]{32}-[^/]+\.drv$",
    )


class RunDetails(SlsaRecord):
    builder: Builder
    metadata: BuildMetadata


class SlsaPredicate(SlsaRecord):
    build_definition: BuildDefinition
    run_details: RunDetails


class SlsaStatement(SlsaRecord):
    type: Literal["https://in-toto.io/Statement/v1"] = Field(
        default=IN_TOTO_STATEMENT, alias="_type"
    )
    subject: list[ResourceDescriptor] = Field(
        description="The variant's files the loader hashes, each with its sha256."
    )
    predicate_type: Literal["https://slsa.dev/provenance/v1"] = SLSA_PROVENANCE
    predicate: SlsaPredicate


class Provenance(Record):
    kernel_builder: BuilderVersion = Field(description="The tool that built the variant.")
    kernel: KernelGit | None = None
    kernelnix: BuildProvenance | None = None
    slsa: SlsaStatement | None = Field(
        default=None, description="How the variant was built, SLSA build provenance v1 (in-toto)."
    )


@cache
def unknown_provenance() -> Provenance:
    """The provenance of a metadata.json that records none (a plan always records one).
    Built on first use: building a model's validator at import costs every command."""
    return Provenance(kernel_builder=BuilderVersion(version="unknown"))


class Metadata(Record):
    """A variant's metadata.json, as the `kernels` loader reads it."""

    # The fields are in the reference's order: metadata.json is written in it.

    name: KernelName
    id: str = Field(description="The variant's Torch ops namespace.")
    version: NonNegativeInt
    kernels_minver: str | None = Field(
        None,
        description="The oldest `kernels` loader that loads the variant (`major.minor.patch`); "
        "kernelnix derives it from what the variant uses (kernelnix/data/loader-releases.json).",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
    )
    license: str
    upstream: str | None = None
    source: str | None = None
    python_depends: list[str] = Field(description="Python packages the variant needs.")
    kernel_depends: list[KernelDependencyRef] = Field(
        [], description="Hub kernels the variant needs at run time."
    )
    backend: BackendInfo
    digest: Digest | None = None
    provenance: Provenance | None = None

    @field_serializer("kernel_depends")
    def _kernel_depends_present_keys(self, value: list[KernelDependencyRef]) -> list[Any]:
        return [entry.to_data(exclude_none=True) for entry in value]

    @property
    def own(self) -> BuildProvenance | None:
        """kernelnix's provenance record; None when kernelnix did not build it."""
        return self.provenance.kernelnix if self.provenance else None

    def to_json_text(self) -> str:
        return json.dumps(self.to_data(), indent=2) + "\n"


@cache
def python_dependency_table() -> dict[str, Any]:
    text = resources.files("kernelnix.data").joinpath("python_dependencies.json").read_text()
    return json.loads(text)


@cache
def loader_releases() -> dict[str, Any]:
    """The first loader release for each variant kind and feature (kernels-minver)."""
    text = resources.files("kernelnix.data").joinpath("loader-releases.json").read_text()
    return json.loads(text)


@dataclass(frozen=True)
class PythonPackage:
    """A pip package a python-depends entry stands for, and the module it provides."""

    depends: str
    pip: str
    module: str | None


def python_packages(names: list[str], backend: str) -> list[PythonPackage]:
    """The pip packages of python-depends names, from the shared dependency table."""
    table = python_dependency_table()
    packages = []
    for name in names:
        entry = table["general"].get(name) or table["backends"].get(backend, {}).get(name, {})
        found = entry.get("python", [])
        packages += [PythonPackage(name, p["pkg"], p.get("import")) for p in found]
    return packages


def python_imports(names: list[str], backend: str) -> list[str]:
    """The import names of python-depends (for the Python import rule)."""
    return [p.module for p in python_packages(names, backend) if p.module]


def metadata_schema() -> dict[str, Any]:
    """The JSON Schema of metadata.json (`kernelnix schema metadata`)."""
    from kernelnix.config.json_schema import document_schema  # the editions' models too

    return document_schema(Metadata, METADATA)


@dataclass(frozen=True)
class MetadataProblem:
    key: str  # the key path in metadata.json (`backend.type`), "" for the whole file
    message: str


@dataclass(frozen=True)
class VariantMetadata:
    """A variant's valid metadata.json: the JSON as written (key order, unknown keys
    kept for rewriting it) and its model."""

    path: Path
    raw: dict[str, Any]
    model: Metadata


@dataclass(frozen=True)
class MetadataRead:
    """What `read_metadata` found: the JSON object (None when there is none: `error`
    says why), and its model or the problems that keep it from being one."""

    path: Path
    raw: dict[str, Any] | None
    error: str | None  # missing, unreadable, not an object
    model: Metadata | None
    problems: tuple[MetadataProblem, ...]

    def valid(self, fix: str) -> VariantMetadata:
        """The metadata; a UserError with every problem (and `fix`) when it is not valid."""
        where = display_path(self.path)
        if self.raw is None:
            error = self.error or "unreadable"
            if error == "missing":
                error = "missing: every variant needs a metadata.json"
            raise UserError.single(error, file=where, fix=fix)
        if self.model is None:
            raise UserError(
                [
                    Diagnostic(p.message, file=where, key=p.key or None, fix=fix)
                    for p in self.problems
                ]
            )
        return VariantMetadata(self.path, self.raw, self.model)


def read_metadata(variant_dir: Path) -> MetadataRead:
    """`variant_dir/metadata.json`, read and validated as the loader reads it."""
    path = variant_dir / METADATA
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return MetadataRead(path, None, "missing", None, ())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return MetadataRead(path, None, f"unreadable: {exc}", None, ())
    if not isinstance(raw, dict):
        error = f"expected a JSON object, found {type(raw).__name__}"
        return MetadataRead(path, None, error, None, ())
    try:
        return MetadataRead(path, raw, None, Metadata.validate(raw), ())
    except ValidationError as exc:
        from kernelnix.config.issues import issues_of  # only a bad file pays for it

        problems = tuple(
            MetadataProblem(format_key_path(issue.loc), issue.message)
            for issue in issues_of(exc, Metadata)
        )
        return MetadataRead(path, raw, None, None, problems)
