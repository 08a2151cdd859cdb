"""The CMake (Ninja) project of one build variant, rendered from `kernelnix/templates/`.

`cmake_project(plan, system, name)` returns the project's files (relative path
-> text): `CMakeLists.txt` with the variant's data, read from the plan alone
(its flags are resolved there, see kernelnix.plan.flags), the static helpers
`kernelnix.cmake` and `probe_torch.py`, and the generated `include/registration.h`
(also as `torch-ext/registration.h`, where kernel-builder puts it) and `_ops.py`;
a tvm-ffi variant's project finds the tvm_ffi CMake package of the build Python's
apache-tvm-ffi instead of Torch, and has no registration.h.
The project compiles the framework's binding sources and each kernel of the
variant as its own object library (a kernel's flags reach only its own sources;
a source several kernels list compiles once, in the first, with the flags of
each in turn), links them into `<ops-id>.abi3.so` (`<ops-id>.so` for tvm-ffi)
and installs the variant directory. Every build.toml value is checked by
`kernelnix.emit.escape` first, so an unsafe one is reported with its key path,
never rendered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kernelnix import __version__
from kernelnix.core.diagnostics import Diagnostic, UserError, format_key_path
from kernelnix.core.version import Version
from kernelnix.emit.escape import cmake_problem
from kernelnix.emit.render import render
from kernelnix.plan.dependencies import kernel_header_dependencies
from kernelnix.plan.ids import check_unique_id
from kernelnix.plan.model import KernelCompile, Plan, PlanKernel, PlanModel, PlanVariant
from kernelnix.plan.units import (
    CXX_SUFFIXES,
    GPU_SUFFIXES,
    OBJCXX_SUFFIXES,
    binding_units,
    suffix,
)

PROBE_SCRIPT = Path(__file__).resolve().parents[1] / "host" / "torch_probe.py"


@dataclass
class Component:
    """One object library: sources, include dirs, options per source group."""

    target: str
    sources: list[str]
    includes: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)  # header dependencies (CUTLASS)
    groups: list[dict[str, list[str]]] = field(default_factory=list)
    languages: dict[str, list[str]] = field(default_factory=dict)

    def add_group(self, sources: list[str], options: list[str]) -> None:
        if sources and options:
            self.groups.append({"sources": sources, "options": options})


def stable_abi_hex(version: str) -> str:
    """`TORCH_TARGET_VERSION` of a stable-ABI target: (major << 56) | (minor << 48)."""
    parsed = Version.parse(version)
    return f"0x{(parsed.major << 56) | (parsed.minor << 48):016x}"


def _target_name(name: str, taken: set[str]) -> str:
    base = "kernel_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
    target, index = base, 1
    while target in taken:
        index += 1
        target = f"{base}_{index}"
    taken.add(target)
    return target


def _source_flags(source: str, compile: KernelCompile) -> list[str] | None:
    """The flags a kernel compiles `source` with; None for a header."""
    if suffix(source) in CXX_SUFFIXES | OBJCXX_SUFFIXES:
        return compile.cxx_flags
    if suffix(source) in GPU_SUFFIXES:
        return compile.gpu_flags
    return None


@dataclass
class _Shared:
    """Sources that several kernels of a variant list (flash-mla's two kernels share
    their API and scheduling sources). kernel-builder compiles each source once,
    with every listing kernel's archs and flags appended in turn; so does the
    first kernel that lists it here (`extra`: the later kernels' flags), and the
    later kernels leave it out (`elsewhere`), or its symbols would be defined twice."""

    elsewhere: list[set[str]]
    extra: dict[str, list[str]]


def _shared_sources(kernels: list[tuple[PlanKernel, KernelCompile]]) -> _Shared:
    owner: dict[str, int] = {}
    extra: dict[str, list[str]] = {}
    for index, (kernel, compile) in enumerate(kernels):
        for source in dict.fromkeys(kernel.src):
            flags = _source_flags(source, compile)
            if flags is None:
                continue
            if owner.setdefault(source, index) != index:
                extra.setdefault(source, []).extend(flags)
    elsewhere = [
        {s for s in kernel.src if owner.get(s, index) != index}
        for index, (kernel, _) in enumerate(kernels)
    ]
    return _Shared(elsewhere, extra)


def _kernel_component(
    kernel: PlanKernel,
    compile: KernelCompile,
    target: str,
    elsewhere: set[str],
    extra: dict[str, list[str]],
) -> Component:
    sources = [s for s in kernel.src if s not in elsewhere]
    includes = [*kernel.include, *(i for d in compile.dependencies for i in d.include)]
    component = Component(target, sources, includes, kernel_header_dependencies(kernel.depends))
    gpu = [s for s in sources if suffix(s) in GPU_SUFFIXES]
    for group, flags in (
        ([s for s in sources if suffix(s) in CXX_SUFFIXES], compile.cxx_flags),
        ([s for s in sources if suffix(s) in OBJCXX_SUFFIXES], compile.cxx_flags),
        (gpu, compile.gpu_flags),
    ):
        component.add_group([s for s in group if s not in extra], flags)
        for source in (s for s in group if s in extra):
            component.add_group([source], [*flags, *extra[source]])
    if kernel.backend == "rocm" and gpu:
        component.languages["HIP"] = gpu
    return component


def _components(plan: Plan, variant: PlanVariant) -> list[Component]:
    framework = plan.framework_sources
    binding = Component("kernelnix_binding", list(framework.src), list(framework.include))
    binding.add_group(binding_units(framework.src), list(framework.cxx_flags))
    taken = {binding.target}
    compiled = [(plan.kernels[name], compile) for name, compile in variant.compile.items()]
    shared = _shared_sources(compiled)
    kernels = [
        _kernel_component(kernel, compile, _target_name(name, taken), elsewhere, shared.extra)
        for name, (kernel, compile), elsewhere in zip(
            variant.compile, compiled, shared.elsewhere, strict=True
        )
    ]
    # The binding sees the header dependencies of the variant's kernels, as every
    # source of kernel-builder's one extension target does: flash-attn3's binding,
    # flash-attn/flash_api_stable.cpp, includes CUTLASS's headers.
    binding.dependencies = list(dict.fromkeys(d for k in kernels for d in k.dependencies))
    # A kernel whose every source compiles in another has nothing left to build.
    return [binding, *(k for k in kernels if k.sources)]


def _languages(components: list[Component]) -> list[str]:
    suffixes = {suffix(s) for c in components for s in c.sources}
    languages = ["CXX"]
    if any(c.languages.get("HIP") for c in components) or ".hip" in suffixes:
        languages.append("HIP")
    elif ".cu" in suffixes:
        languages.append("CUDA")
    if suffixes & OBJCXX_SUFFIXES:
        languages.append("OBJCXX")
    return languages


_PATH_KEYS = ("src", "include", "pyext")


def _build_toml_values(
    plan: Plan, kernels: Iterable[str]
) -> list[tuple[tuple[str | int, ...], str]]:
    """(key path, value) of every build.toml value the project of `kernels` renders."""
    framework: str = plan.framework
    values: list[tuple[tuple[str | int, ...], str]] = [
        ((framework, *k), v) for k, v in _listed(plan.framework_sources)
    ]
    for name in kernels:
        values += [(("kernel", name, *k), v) for k, v in _listed(plan.kernels[name])]
    values += [((framework, "pyext", i), e) for i, e in enumerate(plan.pyext)]
    return values


def _listed(table: PlanModel) -> list[tuple[tuple[str, int], str]]:
    """((key, index), value) of each string in the table's lists, keys as in build.toml."""
    # Read by attribute, not model_dump: dumping would build the model's serializer
    # (milliseconds in every check-config) for values already at hand.
    fields = type(table).model_fields
    return [
        ((fields[name].alias or name, index), value)
        for name in fields
        if isinstance(values := getattr(table, name), list)
        for index, value in enumerate(values)
        if isinstance(value, str)
    ]


def cmake_value_problems(plan: Plan, kernels: Iterable[str], file: str) -> list[Diagnostic]:
    """One diagnostic per build.toml value of `kernels` that CMake cannot take verbatim."""
    return [
        Diagnostic(f"{value!r} {problem}", file=file, key=format_key_path(key), fix="remove it")
        for key, value in _build_toml_values(plan, kernels)
        if (problem := cmake_problem(value, path=key[-2] in _PATH_KEYS))
    ]


def check_cmake_values(plan: Plan, variant: PlanVariant) -> None:
    """Every value that would reach CMake is safe; else one diagnostic per value."""
    problems = cmake_value_problems(plan, variant.compile, "build.toml")
    if problems:
        raise UserError(problems)


def python_identifier(value: str) -> str:
    """`value` when it is a plain Python identifier (it is rendered into Python code)."""
    if not (value.isidentifier() and value.isascii()):
        raise ValueError(f"{value!r} is not a Python identifier")
    return value


def ops_py(variant: PlanVariant) -> str:
    """`_ops.py` of a compiled variant: its library loaded, as `ops`."""
    ops_id = python_identifier(variant.ops_id)
    if variant.kind == "tvm-ffi":  # rendered in quotes: an identifier and a fixed suffix
        return render("tvm_ffi/_ops.py.j2", {"ops_id": ops_id, "library": variant.library})
    return render("torch/_ops.py.j2", {"ops_id": ops_id})


def noarch_ops_py(python_name: str, unique_id: str) -> str:
    return render(
        "torch/_ops_noarch.py.j2",
        {
            "python_name": python_identifier(python_name),
            "unique_id": check_unique_id(unique_id),
        },
    )


def cmake_project(plan: Plan, system: str, name: str) -> dict[str, str]:
    """The files of variant `name`'s CMake project (relative path -> text)."""
    variant = plan.variant(system, name)
    if variant.kind == "noarch":
        raise UserError.single(
            f"variant {name} is {variant.kind}: it has no CMake project",
            fix="noarch variants are copied, not compiled (kernelnix.compile)",
        )
    check_cmake_values(plan, variant)
    components = _components(plan, variant)
    stable_abi = variant.stable_abi
    context = {
        "kernelnix_version": __version__,
        "variant": name,
        "ops_id": variant.ops_id,
        "backend": variant.backend,
        "backend_version": variant.backend_version,
        "torch": variant.torch,
        "stable_abi": stable_abi,
        "stable_abi_hex": stable_abi_hex(stable_abi) if stable_abi else None,
        "tvm_ffi": variant.tvm_ffi,
        "library_suffix": variant.library.removeprefix(variant.ops_id),
        "macos_deployment_target": variant.macos_deployment_target,
        "languages": _languages(components),
        "components": components,
        "package_dir": plan.package_dir,
        "pyext": plan.pyext,
    }
    files = {
        "CMakeLists.txt": render("cmake/CMakeLists.txt.j2", context),
        "kernelnix.cmake": render("cmake/kernelnix.cmake", {}),
        "_ops.py": ops_py(variant),
    }
    if variant.kind == "tvm-ffi":
        return files
    registration = render("torch/registration.h.j2", {})
    return {
        **files,
        "probe_torch.py": PROBE_SCRIPT.read_text(),
        "include/registration.h": registration,
        # kernel-builder writes registration.h into the kernel's torch-ext/, and a
        # source one folder down includes it as "../torch-ext/registration.h"
        # (flash-attn3's flash-attn/flash_api_stable.cpp): through include/, the
        # include path, that name finds this copy.
        "torch-ext/registration.h": registration,
    }


def write_project(files: dict[str, str], directory: Path) -> None:
    """Write a project's files under `directory` (a build tree, never the sources).

    Unchanged files are left alone, so an incremental build does not reconfigure.
    """
    for relative, text in files.items():
        path = directory / relative
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
