"""The build plan: everything every variant build needs, resolved, as JSON.

Pure data, deterministic (same inputs, same bytes), versioned by
`schema-version`. Documented in docs/plan.md.

The planner makes its records with `model_construct`, unvalidated: every value
comes from the validated config or from kernelnix's own typed computations, and
validating it again would build each record model's validator in every fresh
process (3 % of `check-config`'s instructions). The plan file is validated
where it is read (`read_plan`), and the tests check what the planner writes.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelnix import __version__
from kernelnix.config.base import name_of
from kernelnix.config.load import LoadedConfig, format_key_path, load_config, with_lines
from kernelnix.config.model import BuildConfig, CudaKernel
from kernelnix.config.paths import declared_lists, declared_paths
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.plan.flags import cri_image, kernel_compile
from kernelnix.plan.ids import GitState, content_unique_id, git_state, ops_id, unique_id_for
from kernelnix.plan.kernel_deps import (
    KernelLocks,
    candidate_folders,
    plan_kernel_deps,
    read_kernel_locks,
)
from kernelnix.plan.metadata import BUILDER_VERSION, BuilderVersion, KernelGit, Provenance
from kernelnix.plan.model import (
    SCHEMA_VERSION,
    FrameworkSources,
    KernelGitState,
    Plan,
    PlanHub,
    PlanKernel,
    PlanSystem,
    PlanVariant,
)
from kernelnix.plan.units import binding_units, kernel_units
from kernelnix.plan.variant_metadata import (
    UnknownPythonDependency,
    kernel_depends_for,
    metadata_for_backend,
    noarch_archs,
)
from kernelnix.variants.archs import EmptyArchsError, kernel_archs, metadata_archs
from kernelnix.variants.enumerate import Variant, best_variant, variants_for_system
from kernelnix.variants.matrix import Matrix, load_matrix

DEFAULT_PYEXT = ["py", "pyi"]


@dataclass(frozen=True)
class PlanOptions:
    systems: tuple[str, ...] | None = None  # None: every system of the matrix
    unique_id: str | None = None  # None: from git, else a hash of the build's files


def package_dir(config: BuildConfig) -> str:
    root = "tvm-ffi-ext" if config.framework == "tvm-ffi" else "torch-ext"
    return f"{root}/{config.general.python_name}"


def framework_section(config: BuildConfig) -> Any:
    return getattr(config, config.framework.replace("-", "_"))


def pyext(config: BuildConfig) -> list[str]:
    return list(framework_section(config).pyext or DEFAULT_PYEXT)


def _plan_kernels(config: BuildConfig) -> dict[str, PlanKernel]:
    # The kernel tables as the config's serializer writes them: a kernel model's
    # own serializer would be built for each backend's model (milliseconds each).
    tables = config.to_json()["kernel"]
    assert isinstance(tables, dict)
    return {name: _plan_kernel(tables[name]) for name in sorted(tables)}


def _plan_kernel(data: dict[str, Any]) -> PlanKernel:
    data.pop("cuda-capabilities", None)  # resolved per variant: PlanVariant.kernels
    data.pop("rocm-archs", None)
    return PlanKernel.model_construct(**{name_of(key): value for key, value in data.items()})


def _framework_sources(config: BuildConfig) -> FrameworkSources:
    section = framework_section(config)
    return FrameworkSources.model_construct(
        src=list(getattr(section, "src", [])),
        include=list(getattr(section, "include", [])),
        cxx_flags=list(getattr(section, "cxx_flags", [])),
    )


def missing_sources(loaded: LoadedConfig) -> list[Diagnostic]:
    """Declared source files that do not exist: the build could not read them."""
    return [
        Diagnostic(
            f"source file {values[index]!r} does not exist (entry {index} of `{key[-1]}`)",
            file=display_path(loaded.path),
            key=format_key_path((*key, index)),
            fix="create it or fix the path (relative to build.toml's directory)",
        )
        for key, values, must_exist in declared_lists(loaded.config)
        if must_exist
        for index in loaded.files.missing(values)
    ]


def source_files(directory: Path, config: BuildConfig) -> list[str]:
    """Files a build reads, relative to the kernel directory, sorted."""
    files = {"build.toml"}
    files.update(value for _, value, must_exist in declared_paths(config) if must_exist)
    extensions = tuple(f".{e}" for e in pyext(config))
    package = directory / package_dir(config)
    for root, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel_root = Path(root).relative_to(directory).as_posix()
        files.update(f"{rel_root}/{n}" for n in names if n.endswith(extensions))
    return sorted(files)


def _kernels_of_variant(
    config: BuildConfig,
    variant: Variant,
    matrix: Matrix,
) -> dict[str, list[str] | None]:
    """Kernel name -> archs, for the kernels this variant compiles."""
    if variant.kind == "noarch":
        return {}
    version = variant.build_set.version
    selected: dict[str, list[str] | None] = {}
    for name, kernel in config.kernels_for(variant.backend).items():
        if (
            isinstance(kernel, CudaKernel)
            and kernel.cuda_minver
            and version is not None
            and version < kernel.cuda_minver
        ):
            continue
        selected[name] = kernel_archs(kernel, version, matrix, name)
    return selected


def _provenance(git: GitState | None) -> Provenance:
    kernel = KernelGit.model_construct(commit=git.commit, dirty=git.dirty) if git else None
    builder = BuilderVersion.model_construct(version=BUILDER_VERSION)
    return Provenance.model_construct(kernel_builder=builder, kernel=kernel)


def _plan_variant(
    config: BuildConfig,
    variant: Variant,
    matrix: Matrix,
    unique: str,
    provenance: Provenance,
    locks: KernelLocks | None,
) -> PlanVariant:
    build_set = variant.build_set
    kernels = _kernels_of_variant(config, variant, matrix)
    if variant.kind == "noarch":
        archs = noarch_archs(config, variant.backend)
    else:
        compiled = [a for archs in kernels.values() for a in (archs or [])]
        archs = metadata_archs(compiled) if compiled else None
    kernel_id = ops_id(config.general.python_name, variant.backend, unique)
    metadata = metadata_for_backend(
        config, variant.backend, variant.kind, kernel_id, archs, provenance
    )
    macos = matrix.macos_target(variant.backend) if variant.system.endswith("darwin") else None
    cri = cri_image((config.kernel[name] for name in kernels), matrix)
    roots = kernel_depends_for(config, variant.backend)
    candidates = candidate_folders(variant.name, variant.kind, variant.backend)
    deps = plan_kernel_deps(roots, locks, candidates) if roots and locks else None
    return PlanVariant.model_construct(
        kind=variant.kind,
        system=variant.system,
        backend=variant.backend,
        backend_version=str(build_set.version) if build_set.version else None,
        torch=build_set.torch.major_minor(),
        stable_abi=variant.stable_abi.major_minor() if variant.stable_abi else None,
        tvm_ffi=str(build_set.tvm_ffi) if variant.kind == "tvm-ffi" else None,
        bundle=variant.bundle,
        kernels=kernels,
        compile={
            name: kernel_compile(config.kernel[name], archs, build_set.version, matrix, cri)
            for name, archs in kernels.items()
        },
        macos_deployment_target=str(macos) if macos else None,
        metadata=metadata,
        development_archs=None,
        kernel_deps=deps,
    )


def _hub(config: BuildConfig) -> PlanHub:
    hub = config.general.hub
    return PlanHub.model_construct(
        repo_id=hub.repo_id if hub else None, branch=hub.branch if hub else None
    )


def _best_first(variants: list[Variant], matrix: Matrix) -> list[Variant]:
    """The variants in the order `ci-test` prefers them: best_variant, repeatedly."""
    rest = list(variants)
    ranked: list[Variant] = []
    while (best := best_variant(rest, matrix)) is not None:
        ranked.append(best)
        rest.remove(best)
    return ranked


def build_plan(
    loaded: LoadedConfig, options: PlanOptions | None = None, matrix: Matrix | None = None
) -> Plan:
    """The plan of a loaded config; raises UserError for configs that cannot be built."""
    plan, errors = draft_plan(loaded, options, matrix)
    if errors:
        raise UserError(errors)
    return plan


def draft_plan(
    loaded: LoadedConfig, options: PlanOptions | None = None, matrix: Matrix | None = None
) -> tuple[Plan, list[Diagnostic]]:
    """The plan and every problem found making it; the variants with a problem are left
    out of `variants`, so a caller can go on checking the rest."""
    options = options or PlanOptions()
    matrix = matrix or load_matrix()
    config = loaded.config
    directory = loaded.path.parent
    git = git_state(directory) if options.unique_id is None else None
    sources = source_files(directory, config)
    unique = unique_id_for(options.unique_id, git, lambda: content_unique_id(directory, sources))
    provenance = _provenance(git)
    roots = [ref for backend in config.backends for ref in kernel_depends_for(config, backend)]
    locks = read_kernel_locks(directory, roots) if roots else None
    systems: dict[str, PlanSystem] = {}
    variants: dict[str, dict[str, PlanVariant]] = {}
    notes: list[str] = []
    errors: list[Diagnostic] = []
    for system in options.systems or matrix.systems:
        found = variants_for_system(config, system, matrix)
        notes += [n for n in found.notes if n not in notes]
        ranked = _best_first(found.variants, matrix)
        systems[system] = PlanSystem.model_construct(
            variants=found.names(),
            bundle=[v.name for v in found.variants if v.bundle],
            ci_variant=ranked[0].name if ranked else None,
            ci_order=[v.name for v in ranked],
            collisions=[c.describe() for c in found.collisions],
        )
        variants[system] = {}
        for variant in found.variants:
            try:
                variants[system][variant.name] = _plan_variant(
                    config, variant, matrix, unique, provenance, locks
                )
            except (EmptyArchsError, UnknownPythonDependency) as exc:
                errors.append(exc.diagnostic(display_path(loaded.path)))
    errors += missing_sources(loaded)
    kernels = _plan_kernels(config)
    framework_sources = _framework_sources(config)
    plan = Plan.model_construct(
        schema_version=SCHEMA_VERSION,
        generator=f"kernelnix {__version__}",
        build_toml_sha256=hashlib.sha256(loaded.path.read_bytes()).hexdigest(),
        name=config.general.name,
        python_name=config.general.python_name,
        version=config.general.version,
        framework=config.framework,
        package_dir=package_dir(config),
        pyext=pyext(config),
        unique_id=unique,
        kernel_git=KernelGitState.model_construct(commit=git.commit, dirty=git.dirty)
        if git
        else None,
        framework_sources=framework_sources,
        kernels=kernels,
        sources=sources,
        compile_units=sorted(
            {
                *binding_units(framework_sources.src),
                *(u for k in kernels.values() for u in kernel_units(k.src)),
            }
        ),
        systems=systems,
        variants=variants,
        notes=notes,
        hub=_hub(config),
    )
    return plan, with_lines(loaded, list(dict.fromkeys(errors)))


def plan_directory(directory: Path, options: PlanOptions) -> tuple[LoadedConfig, Plan]:
    """The config of `directory` and its plan; an invalid unique id is a UserError."""
    loaded = load_config(directory)
    try:
        return loaded, build_plan(loaded, options)
    except ValueError as exc:
        raise UserError.single(str(exc), key="--unique-id") from None
