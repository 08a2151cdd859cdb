"""The build plan's models: `kernelnix-plan.json`, the contract between Python and Nix.

The planner (kernelnix.plan.build) constructs a `Plan`; `Plan.to_json()` is the
file's canonical text; `read_plan` reads it back for the build step. Keys are
kebab-case in the file, attributes snake_case in Python. Unknown keys are
refused: a plan from another kernelnix is rewritten, never half understood.
docs/plan.md's field tables are generated from these models (kernelnix.plan.docs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from kernelnix.config.base import FileModel
from kernelnix.core.diagnostics import Diagnostic, UserError, format_key_path
from kernelnix.plan.ids import ops_id
from kernelnix.plan.metadata import KernelGit, Metadata, unknown_provenance
from kernelnix.variants.names import library_suffix


def schema_version(document: str) -> int:
    """The schema version of `plan` or `host-record`: data/schema-versions.json, which
    Nix reads too."""
    text = resources.files("kernelnix.data").joinpath("schema-versions.json").read_text()
    version: int = json.loads(text)[document]
    return version


SCHEMA_VERSION = schema_version("plan")
PLAN_FILE = "kernelnix-plan.json"
REWRITE_FIX = (
    "write the plan again with this kernelnix: `kernelnix generate` (for Nix) or `kernelnix plan`"
)


class PlanModel(FileModel):
    """A frozen table of the plan: a file model (kebab-case keys, no unknown keys, strict)
    that the planner also constructs by attribute name."""

    NONE_IS_ABSENT: ClassVar[bool] = False  # a None field is written as null

    model_config = ConfigDict(validate_by_name=True)


class KernelGitState(PlanModel):
    commit: str = Field(description="The kernel's git commit.")
    dirty: bool = Field(description="Whether tracked files had uncommitted changes.")


class PlanHub(PlanModel):
    """`[general.hub]`: the Hub repository the flake's scripts and shells name."""

    repo_id: str | None = Field(description="`repo-id`, or null.")
    branch: str | None = Field(description="`branch`, or null (upload's default).")


class FrameworkSources(PlanModel):
    src: list[str] = Field(description="The binding's sources.")
    include: list[str] = Field(description="Its include directories.")
    cxx_flags: list[str] = Field(description="Its C++ compiler flags.")


class PlanKernel(PlanModel):
    """A `[kernel.<name>]` table as build.toml gives it; the keys of other backends are absent."""

    NONE_IS_ABSENT: ClassVar[bool] = True  # a None field is left out of the file (docs: absent)

    backend: Literal["cpu", "cuda", "metal", "rocm", "xpu"] = Field(
        description="The backend the kernel is written for."
    )
    src: list[str] = Field(description="Its sources, relative to build.toml's directory.")
    depends: list[str] = Field(description="Its dependencies (`torch`, `cutlass_3_9`, ...).")
    include: list[str] = Field(description="Its include directories.")
    cxx_flags: list[str] = Field(description="Its C++ compiler flags.")
    cuda_flags: list[str] | None = Field(None, description="CUDA only: its nvcc flags.")
    cuda_minver: str | None = Field(
        None, description="CUDA only, when set: the oldest CUDA it is built with."
    )
    hip_flags: list[str] | None = Field(None, description="ROCm only: its hipcc flags.")
    sycl_flags: list[str] | None = Field(None, description="XPU only: its SYCL flags.")

    @model_serializer(mode="wrap")
    def _present_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class PlanDependency(PlanModel):
    """A resolved dependency of a kernel: what its compile needs from it."""

    name: str = Field(description="The dependency's name in `depends`.")
    include: list[str] = Field(description="Include directories the kernel's sources get.")


class KernelCompile(PlanModel):
    """How one kernel is compiled in one variant: every flag resolved."""

    cxx_flags: list[str] = Field(
        description="Flags of its C++ and Objective-C++ sources: for XPU the SYCL "
        "ahead-of-time flags (offload targets, devices), then `sycl-flags`, then "
        "`cxx-flags`; else `cxx-flags`."
    )
    gpu_flags: list[str] = Field(
        description="Flags of its `.cu`/`.hip` sources: CUDA: one `-gencode` per "
        "capability (`+PTX` adds the PTX), then `cuda-flags` (without "
        "`-static-global-template-stub` before CUDA 12.8); ROCm: one `--offload-arch` "
        "per arch, then `hip-flags`; else empty."
    )
    dependencies: list[PlanDependency] = Field(
        description="Its resolved dependencies; their include directories are added "
        "to its own. Empty until dependencies are resolved (Torch is always there)."
    )


class PlanSystem(PlanModel):
    variants: list[str] = Field(description="The system's variant names, in matrix order.")
    bundle: list[str] = Field(description="Those `packages.<system>.bundle` builds.")
    ci_variant: str | None = Field(description="The variant `ci-test` uses.")
    ci_order: list[str] = Field(
        description="Every variant, in `ci-test`'s order of preference (the Nix host "
        "toolchain takes the first it can build)."
    )
    collisions: list[str] = Field(
        description="Build sets that gave a variant name already taken (see Rules)."
    )


class PlanKernelFile(PlanModel):
    path: str = Field(description="Its path under the variant folder.")
    url: str = Field(description="Where the Hub serves it at the locked commit.")
    sha256: str = Field(description="Its sha256, which the fixed-output fetch checks.")


class PlanKernelDep(PlanModel):
    repo_id: str = Field(description="The dependency's Hub repo.")
    commit: str = Field(description="The commit kernels.lock locks it to.")
    variant: str = Field(description="Its variant folder that loads beside this variant.")
    files: list[PlanKernelFile] = Field(description="The files of that folder.")


class PlanKernelDeps(PlanModel):
    lock_sha256: str | None = Field(
        description="sha256 of kernelnix-kernels.json when planned (null: there was none); "
        "the flake plans again when the file changes."
    )
    error: str | None = Field(
        description="Why the variant cannot be built with its kernel dependencies (a lock "
        "missing or stale, a dependency without a folder for it), with the fix; else null."
    )
    kernels: list[PlanKernelDep] = Field(
        description="Every kernel it depends on, transitive ones included."
    )


class PlanVariant(PlanModel):
    kind: Literal["arch", "stable-abi", "tvm-ffi", "noarch"] = Field(
        description="What is built: a compiled variant for one Torch, one for Torch's "
        "stable ABI, a tvm-ffi one, or a Python-only one."
    )
    system: str = Field(description="`x86_64-linux`, `aarch64-linux` or `aarch64-darwin`.")
    backend: str = Field(description="`cpu`, `cuda`, `metal`, `rocm`, `xpu`, ...")
    backend_version: str | None = Field(description="e.g. `12.6`; null for cpu and metal.")
    torch: str = Field(description="The Torch it is built with (`2.13`).")
    stable_abi: str | None = Field(description="The stable-ABI target version, or null.")
    tvm_ffi: str | None = Field(description="The tvm-ffi version of tvm-ffi variants.")
    bundle: bool = Field(description="Whether `packages.<system>.bundle` includes it.")
    kernels: dict[str, list[str] | None] = Field(
        description="The kernels compiled into it and their archs (CUDA capabilities, "
        "ROCm gfx targets), null for backends without archs."
    )
    compile: dict[str, KernelCompile] = Field(
        description="How each of those kernels is compiled (the CMake project reads only this)."
    )
    macos_deployment_target: str | None = Field(
        description="`15` (CPU) or `26` (Metal) on Darwin, else null."
    )
    metadata: Metadata = Field(
        description="Its `metadata.json` (kernelnix.plan.metadata), before the build adds "
        "kernelnix's provenance and the digest. Its `id` is "
        "`_<python-name>_<backend>_<unique-id>`: op namespace, module name, library stem; "
        "its `backend.archs` the union of the compiled archs (sorted as strings, like the "
        "reference; noarch: from `[torch-noarch]`). Its `kernels-minver` is derived, never "
        "set by the author: the newest of the first `kernels` releases that load the "
        "variant's kind and, with `kernel-depends`, the first that resolves kernel "
        "dependencies (kernelnix/data/loader-releases.json says how each was established)."
    )
    development_archs: list[str] | None = Field(
        None,
        description="Only in a development build (`--cuda-archs`): the archs its CUDA "
        "kernels were restricted to. metadata.json records them; `upload` refuses it.",
    )
    kernel_deps: PlanKernelDeps | None = Field(
        None,
        description="Only for a variant with `kernel-depends`: the kernels it is built and "
        "import-checked with (kernelnix.plan.kernel_deps).",
    )

    @property
    def ops_id(self) -> str:
        """The op namespace, module name and library stem: metadata.json's `id`."""
        return self.metadata.id

    @property
    def library(self) -> str:
        """The compiled library's file name: the ops id and the kind's suffix."""
        return self.ops_id + library_suffix(self.kind, self.system.partition("-")[2])

    @property
    def archs(self) -> list[str] | None:
        """The archs metadata.json lists: the union of the compiled ones."""
        return self.metadata.backend.archs

    def with_metadata(self, **update: Any) -> PlanVariant:
        """The variant with those fields of its metadata replaced."""
        return self.model_copy(update={"metadata": self.metadata.model_copy(update=update)})

    @model_serializer(mode="wrap")
    def _without_unset_options(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent unless set: only a development build sets the first, only a variant
        # with kernel-depends the second; other plans stay as they were.
        data: dict[str, Any] = handler(self)
        for name in ("development_archs", "kernel_deps"):
            if getattr(self, name) is None:
                data.pop(name.replace("_", "-"), data.pop(name, None))
        return data


class Plan(PlanModel):
    schema_version: int = Field(
        description="`3` (kernelnix/data/schema-versions.json). Bumped on any incompatible change."
    )
    generator: str = Field(description="`kernelnix <version>`.")
    build_toml_sha256: str = Field(
        description="sha256 of `build.toml`; the flake refuses a stale plan."
    )
    name: str = Field(description="`[general] name`.")
    python_name: str = Field(description="The name with `-` as `_`.")
    version: int = Field(description="`[general] version`.")
    framework: Literal["torch", "torch-noarch", "tvm-ffi"] = Field(
        description="The framework table of build.toml."
    )
    package_dir: str = Field(description="`torch-ext/<python-name>` (or `tvm-ffi-ext/...`).")
    pyext: list[str] = Field(description="Python package file extensions (default `py`, `pyi`).")
    unique_id: str = Field(description="Unique part of the op namespace (see Rules).")
    kernel_git: KernelGitState | None = Field(
        description="The kernel's git state when the plan was written, for provenance "
        "(Nix builds pass the commit they build instead: `build-variant --kernel-git`)."
    )
    framework_sources: FrameworkSources = Field(
        description="The binding sources of `[torch]`/`[tvm-ffi]`."
    )
    kernels: dict[str, PlanKernel] = Field(description="Every `[kernel.<name>]`, once.")
    sources: list[str] = Field(
        description="The files a build reads (build.toml, sources, package files); Nix "
        "filters the source tree to these, so unrelated edits never rebuild."
    )
    compile_units: list[str] = Field(
        description="The sources that compile into an object (kernelnix.plan.units: "
        "C++, CUDA, HIP and Objective-C++ of the kernels, C++ of the binding), sorted; "
        "an object-by-object build makes one derivation of each that a variant "
        "compiles (docs/distributed.md)."
    )
    systems: dict[str, PlanSystem] = Field(description="Per system: its variants.")
    variants: dict[str, dict[str, PlanVariant]] = Field(
        description="Per system: variant name -> variant."
    )
    notes: list[str] = Field(
        description="Things the user should know (skipped build sets, backends without build sets)."
    )
    hub: PlanHub = Field(
        description="`[general.hub]`: what Nix reads of build.toml besides the plan's "
        "own keys (build.toml itself is `kernelnix check-config --json`)."
    )

    def to_json(self) -> str:
        """The canonical text: keys in the models' order, 2-space indent, trailing
        newline. pydantic writes it (not `json.dumps`, whose indenting encoder is
        pure Python: 5 % of `kernelnix plan` on a large config)."""
        return self.model_dump_json(indent=2, by_alias=True) + "\n"

    def variant(self, system: str, name: str) -> PlanVariant:
        """Variant `name` of `system`; a UserError lists the valid ones."""
        variants = self.variants.get(system)
        if variants is None:
            raise UserError.single(
                f"the plan has no system {system!r}",
                fix=f"use one of: {', '.join(sorted(self.variants))}",
            )
        if name not in variants:
            raise UserError.single(
                f"no variant {name!r} for {system}",
                key="--variant",
                fix=f"use one of: {', '.join(variants) or '(none)'}",
            )
        return variants[name]

    def with_variants(self, rebase: Callable[[PlanVariant], PlanVariant], **update: Any) -> Plan:
        """The plan with every variant passed through `rebase` (and `update` applied)."""
        variants = {
            system: {name: rebase(variant) for name, variant in entries.items()}
            for system, entries in self.variants.items()
        }
        return self.model_copy(update={**update, "variants": variants})

    def with_unique_id(self, unique: str) -> Plan:
        """The plan with another (already checked) unique id: every ops id and metadata id anew."""

        def rebase(variant: PlanVariant) -> PlanVariant:
            return variant.with_metadata(id=ops_id(self.python_name, variant.backend, unique))

        return self.with_variants(rebase, unique_id=unique)

    def with_kernel_git(self, kernel: KernelGitState | None) -> Plan:
        """The plan with another kernel git state, in every variant's provenance too."""

        git = None if kernel is None else KernelGit(commit=kernel.commit, dirty=kernel.dirty)

        def rebase(variant: PlanVariant) -> PlanVariant:
            provenance = variant.metadata.provenance or unknown_provenance()
            return variant.with_metadata(provenance=provenance.model_copy(update={"kernel": git}))

        return self.with_variants(rebase, kernel_git=kernel)


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of kernelnix-plan.json (`kernelnix schema plan`)."""
    from kernelnix.config.json_schema import document_schema

    return document_schema(Plan, PLAN_FILE)


def read_plan(path: Path) -> Plan:
    """The plan in `path`; a UserError when it is unreadable, of another schema
    version or not shaped like a plan."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise UserError.single(f"not a plan file: {exc}", file=str(path), fix=REWRITE_FIX) from None
    version = data.get("schema-version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise UserError.single(
            f"plan schema {version} is not {SCHEMA_VERSION}", file=str(path), fix=REWRITE_FIX
        )
    try:
        return Plan.validate(data)
    except ValidationError as exc:
        from kernelnix.config.issues import issues_of  # only a misshapen plan pays for it

        raise UserError(
            [
                Diagnostic(
                    issue.message,
                    file=str(path),
                    key=format_key_path(issue.loc),
                    fix=REWRITE_FIX,
                )
                for issue in issues_of(exc, Plan)
            ]
        ) from None
