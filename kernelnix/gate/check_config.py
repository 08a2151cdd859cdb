"""Whether a config can be planned, emitted and built: every problem at once.

`check-config` runs this gate, so that it rejects whatever `plan`, `generate`
or a build would reject for the config's sake, and says more besides: bounds
that match nothing, archs that no toolkit builds, repo ids the Hub refuses.
Each problem is a diagnostic with file, key path, line and fix.
"""

from __future__ import annotations

from collections.abc import Iterator

from kernelnix.config.load import LoadedConfig, with_lines
from kernelnix.config.model import CudaKernel, RocmKernel
from kernelnix.config.types import hub_repo_id_problem
from kernelnix.core.diagnostics import Diagnostic, display_path, format_key_path
from kernelnix.core.version import Version
from kernelnix.emit.cmake import cmake_value_problems
from kernelnix.plan.build import PlanOptions, draft_plan
from kernelnix.plan.gencode import capability_base
from kernelnix.plan.model import Plan
from kernelnix.plan.variant_metadata import UnknownPythonDependency, python_depends_for
from kernelnix.variants.archs import cuda_capability_supported
from kernelnix.variants.enumerate import variants_for_system, within
from kernelnix.variants.matrix import Matrix, load_matrix

# Any valid id: the gate checks the config, not the build's identity (no git call).
GATE_UNIQUE_ID = "0000000"


def config_problems(loaded: LoadedConfig, matrix: Matrix | None = None) -> list[Diagnostic]:
    """Errors and warnings of a loaded config against every later stage, in line order."""
    matrix = matrix or load_matrix()
    file = display_path(loaded.path)
    plan, problems = draft_plan(loaded, PlanOptions(unique_id=GATE_UNIQUE_ID), matrix)
    built = [name for name, k in plan.kernels.items() if k.backend in loaded.config.backends]
    problems += cmake_value_problems(plan, built, file)
    problems += _python_depends_problems(loaded, file)
    problems += _repo_id_problems(loaded, file)
    problems += _bound_problems(loaded, matrix, file)
    if not any(system.variants for system in plan.systems.values()):
        problems.append(_no_variant(loaded, plan, file))
    problems += _dropped_arch_warnings(loaded, matrix, file)
    located = list(dict.fromkeys(with_lines(loaded, problems)))
    return sorted(located, key=lambda d: (d.line or 0, d.severity != "error"))


def _python_depends_problems(loaded: LoadedConfig, file: str) -> list[Diagnostic]:
    """Unknown python-depends, also of backends no variant is planned for."""
    problems = []
    for backend in loaded.config.backends:
        try:
            python_depends_for(loaded.config, backend)
        except UnknownPythonDependency as exc:
            problems.append(exc.diagnostic(file))
    return problems


def _repo_ids(loaded: LoadedConfig) -> Iterator[tuple[str, str]]:
    """(key path, repo id) of every Hub repository build.toml names."""
    general = loaded.config.general
    if general.hub is not None and general.hub.repo_id is not None:
        yield "general.hub.repo-id", general.hub.repo_id
    for index, ref in enumerate(general.kernel_depends):
        yield f"general.kernel-depends[{index}].repo-id", ref.repo_id
    for backend in ("cuda", "neuron", "xpu"):
        table = getattr(general, backend, None)
        for index, ref in enumerate(getattr(table, "kernel_depends", None) or []):
            yield f"general.{backend}.kernel-depends[{index}].repo-id", ref.repo_id


def _repo_id_problems(loaded: LoadedConfig, file: str) -> list[Diagnostic]:
    named = list(_repo_ids(loaded))
    if not named:
        return []
    problems = []
    for key, repo_id in named:
        problem = hub_repo_id_problem(repo_id)
        if problem is not None:
            problems.append(
                Diagnostic(
                    f"the Hub refuses the repository id {repo_id!r}: {problem}",
                    file=file,
                    key=key,
                    fix='write it as "<owner>/<name>" with letters, digits, "-", "_" and "."',
                )
            )
    return problems


def _bound_problems(loaded: LoadedConfig, matrix: Matrix, file: str) -> list[Diagnostic]:
    """Torch and CUDA bounds that exclude every version the matrix has for the config."""
    config = loaded.config
    sets = [b for b in matrix.build_sets if b.backend in config.backends]
    problems = []
    torch = config.torch
    if torch is not None and (torch.minver or torch.maxver):
        versions = sorted({b.torch for b in sets})
        problems += _outside_all(
            "Torch", torch.minver, torch.maxver, versions, "torch", file, "the [torch] table"
        )
    cuda = config.general.cuda
    if cuda is not None and "cuda" in config.backends and (cuda.minver or cuda.maxver):
        versions = sorted({b.version for b in sets if b.backend == "cuda" and b.version})
        problems += _outside_all(
            "CUDA", cuda.minver, cuda.maxver, versions, "general.cuda", file, "[general.cuda]"
        )
    return problems


def _outside_all(
    what: str,
    low: Version | None,
    high: Version | None,
    versions: list[Version],
    table: str,
    file: str,
    where: str,
) -> list[Diagnostic]:
    if not versions or any(within(v, low, high) for v in versions):
        return []
    bounds = f"{low.major_minor() if low else 'any'}..{high.major_minor() if high else 'any'}"
    return [
        Diagnostic(
            f"the {what} bounds {bounds} match no build set: kernelnix builds {what} "
            f"{', '.join(v.major_minor() for v in versions)}",
            file=file,
            key=f"{table}.{'minver' if low is not None else 'maxver'}",
            fix=f"widen minver/maxver in {where} to include one of these versions",
        )
    ]


def _no_variant(loaded: LoadedConfig, plan: Plan, file: str) -> Diagnostic:
    reasons = "; ".join(plan.notes) or "no build set of the matrix applies to it"
    return Diagnostic(
        f"the config yields no build variant on any system ({reasons})",
        file=file,
        key="general.backends",
        fix="add a backend kernelnix builds (`kernelnix list-variants --matrix` lists them), "
        "or widen the Torch and CUDA bounds",
    )


def _toolkit_versions(loaded: LoadedConfig, matrix: Matrix, backend: str) -> list[Version]:
    """The versions of `backend`'s toolkit that compile the config's kernels."""
    return sorted(
        {
            variant.build_set.version
            for system in matrix.systems
            for variant in variants_for_system(loaded.config, system, matrix).variants
            if variant.backend == backend
            and variant.kind != "noarch"
            and variant.build_set.version is not None
        }
    )


def _dropped_arch_warnings(loaded: LoadedConfig, matrix: Matrix, file: str) -> list[Diagnostic]:
    """Archs a kernel asks for that some of its toolkits do not build: named, not dropped
    silently; a CUDA capability no toolkit knows is an error."""
    cuda_versions = _toolkit_versions(loaded, matrix, "cuda")
    rocm_versions = [v.major_minor() for v in _toolkit_versions(loaded, matrix, "rocm")]
    warnings = []
    known = matrix.cuda_supported_archs()
    for name, kernel in loaded.config.kernel.items():
        if isinstance(kernel, CudaKernel) and kernel.cuda_capabilities:
            for index, capability in enumerate(kernel.cuda_capabilities):
                key = format_key_path(("kernel", name, "cuda-capabilities", index))
                if capability_base(capability) not in known:
                    warnings.append(_unknown_capability(file, key, capability, known))
                    continue
                without = [
                    cuda.major_minor()
                    for cuda in cuda_versions
                    if (kernel.cuda_minver is None or cuda >= kernel.cuda_minver)
                    and not cuda_capability_supported(capability, cuda, matrix)
                ]
                if without:
                    warnings.append(_dropped(file, key, capability, "CUDA", without))
        if isinstance(kernel, RocmKernel) and kernel.rocm_archs and rocm_versions:
            for index, arch in enumerate(kernel.rocm_archs):
                if arch.split(":")[0] not in matrix.rocm_archs():
                    key = format_key_path(("kernel", name, "rocm-archs", index))
                    warnings.append(_dropped(file, key, arch, "ROCm", rocm_versions))
    return warnings


def _unknown_capability(file: str, key: str, capability: str, known: list[str]) -> Diagnostic:
    return Diagnostic(
        f"{capability!r} is not a CUDA capability that any CUDA version of the matrix builds; "
        f"valid capabilities: {', '.join(known)} (each may end in `a` or `f`, and `+PTX`)",
        file=file,
        key=key,
        fix="use one of the valid capabilities, or remove it",
    )


def _dropped(file: str, key: str, arch: str, toolkit: str, versions: list[str]) -> Diagnostic:
    return Diagnostic(
        f"arch {arch!r} is not built with {toolkit} {', '.join(versions)}, which do not "
        "support it; those variants leave it out",
        file=file,
        key=key,
        fix=f"remove {arch!r}, or bound the {toolkit} versions to those that build it",
        severity="warning",
    )
