"""The CMake (Ninja) project of one build variant, rendered from `kernelnix/templates/`.

`cmake_project(plan, system, name)` returns the project's files (relative path
-> text): `CMakeLists.txt` with the variant's data, the static helpers
`kernelnix.cmake` and `probe_torch.py`, and the generated `include/registration.h`
and `_ops.py`. The project compiles the framework's binding sources and each
kernel of the variant as its own object library (a kernel's flags reach only
its own sources), links them into `<ops-id>.abi3.so` and installs the variant
directory. Every build.toml value is checked by `kernelnix.emit.escape` first,
so an unsafe one is reported with its key path, never rendered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kernelnix import __version__
from kernelnix.config.types import parse_capability
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.version import Version
from kernelnix.emit.escape import cmake_problem
from kernelnix.emit.render import render
from kernelnix.plan.ids import check_unique_id
from kernelnix.variants.matrix import load_matrix

PROBE_SCRIPT = Path(__file__).resolve().parents[1] / "host" / "torch_probe.py"

CXX_SUFFIXES = frozenset({".cpp", ".cc", ".cxx", ".c++", ".C"})
_STUB_FLAG = "-static-global-template-stub"
_CUDA_STUB_MIN = Version((12, 8))


@dataclass
class Component:
    """One object library: sources, include dirs, options per source group."""

    target: str
    sources: list[str]
    includes: list[str] = field(default_factory=list)
    groups: list[dict[str, list[str]]] = field(default_factory=list)
    languages: dict[str, list[str]] = field(default_factory=dict)

    def add_group(self, sources: list[str], options: list[str]) -> None:
        if sources and options:
            self.groups.append({"sources": sources, "options": options})


def variant_of(plan: dict[str, Any], system: str, name: str) -> dict[str, Any]:
    """The plan's entry of variant `name` on `system`; a UserError lists the valid ones."""
    variants = plan["variants"].get(system)
    if variants is None:
        raise UserError.single(
            f"the plan has no system {system!r}",
            fix=f"use one of: {', '.join(sorted(plan['variants']))}",
        )
    if name not in variants:
        raise UserError.single(
            f"no variant {name!r} for {system}",
            key="--variant",
            fix=f"use one of: {', '.join(variants) or '(none)'}",
        )
    return variants[name]


def stable_abi_hex(version: str) -> str:
    """`TORCH_TARGET_VERSION` of a stable-ABI target: (major << 56) | (minor << 48)."""
    parsed = Version.parse(version)
    return f"0x{(parsed.major << 56) | (parsed.minor << 48):016x}"


def cuda_gencode(archs: list[str]) -> list[str]:
    """nvcc flags for capabilities: one `-gencode` per arch, `+PTX` adds the PTX."""
    flags = []
    for capability in archs:
        version, suffix, ptx = parse_capability(capability)
        number = f"{version.major}{version.minor}{suffix}"
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def _target_name(name: str, taken: set[str]) -> str:
    base = "kernel_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
    target, index = base, 1
    while target in taken:
        index += 1
        target = f"{base}_{index}"
    taken.add(target)
    return target


def _suffix(source: str) -> str:
    return PurePosixPath(source).suffix


def _cuda_flags(kernel: dict[str, Any], backend_version: str | None) -> list[str]:
    flags = list(kernel.get("cuda-flags", []))
    if backend_version and Version.parse(backend_version) < _CUDA_STUB_MIN:
        flags = [f for f in flags if not f.startswith(_STUB_FLAG)]
    return flags


def _sycl_flags(kernel: dict[str, Any]) -> list[str]:
    xpu = load_matrix().toolkits["xpu"]
    devices = xpu["aot-devices-sycl-tla" if "sycl_tla" in kernel["depends"] else "aot-devices"]
    targets = ",".join(xpu["offload-targets"])
    return [
        "-fsycl",
        f"-fsycl-targets={targets}",
        "-Xs",
        f"-device {','.join(devices)}",
        *kernel.get("sycl-flags", []),
    ]


def _kernel_component(
    kernel: dict[str, Any], archs: list[str] | None, variant: dict[str, Any], target: str
) -> Component:
    backend = kernel["backend"]
    sources = list(kernel["src"])
    component = Component(target, sources, list(kernel.get("include", [])))
    cxx = [s for s in sources if _suffix(s) in CXX_SUFFIXES]
    gpu = [s for s in sources if _suffix(s) in (".cu", ".hip")]
    cxx_flags = list(kernel.get("cxx-flags", []))
    if backend == "xpu":
        cxx_flags = _sycl_flags(kernel) + cxx_flags
    component.add_group(cxx, cxx_flags)
    component.add_group([s for s in sources if _suffix(s) == ".mm"], cxx_flags)
    if backend == "cuda":
        flags = cuda_gencode(archs or []) + _cuda_flags(kernel, variant["backend-version"])
        component.add_group(gpu, flags)
    elif backend == "rocm":
        offload = [f"--offload-arch={arch}" for arch in archs or []]
        component.add_group(gpu, offload + list(kernel.get("hip-flags", [])))
        if gpu:
            component.languages["HIP"] = gpu
    return component


def _components(plan: dict[str, Any], variant: dict[str, Any]) -> list[Component]:
    framework = plan["framework-sources"]
    binding = Component("kernelnix_binding", list(framework["src"]), list(framework["include"]))
    binding.add_group(
        [s for s in framework["src"] if _suffix(s) in CXX_SUFFIXES], list(framework["cxx-flags"])
    )
    taken = {binding.target}
    kernels = [
        _kernel_component(plan["kernels"][name], archs, variant, _target_name(name, taken))
        for name, archs in variant["kernels"].items()
    ]
    return [binding, *kernels]


def _languages(components: list[Component]) -> list[str]:
    suffixes = {_suffix(s) for c in components for s in c.sources}
    languages = ["CXX"]
    if any(c.languages.get("HIP") for c in components) or ".hip" in suffixes:
        languages.append("HIP")
    elif ".cu" in suffixes:
        languages.append("CUDA")
    if ".mm" in suffixes:
        languages.append("OBJCXX")
    return languages


_PATH_KEYS = ("src", "include", "pyext")


def _build_toml_values(plan: dict[str, Any], variant: dict[str, Any]) -> list[tuple[str, str]]:
    """(key path, value) of every build.toml value the project renders."""
    values = [(f"{plan['framework']}.{k}", v) for k, v in _listed(plan["framework-sources"])]
    for name in variant["kernels"]:
        values += [(f"kernel.{name}.{k}", v) for k, v in _listed(plan["kernels"][name])]
    values += [(f"{plan['framework']}.pyext[{i}]", e) for i, e in enumerate(plan["pyext"])]
    return values


def _listed(table: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f"{key}[{index}]", value)
        for key, values in table.items()
        if isinstance(values, list)
        for index, value in enumerate(values)
        if isinstance(value, str)
    ]


def check_cmake_values(plan: dict[str, Any], variant: dict[str, Any]) -> None:
    """Every value that would reach CMake is safe; else one diagnostic per value."""
    problems = [
        Diagnostic(f"{value!r} {problem}", file="build.toml", key=key, fix="remove it")
        for key, value in _build_toml_values(plan, variant)
        if (problem := cmake_problem(value, path=key.split(".")[-1].split("[")[0] in _PATH_KEYS))
    ]
    if problems:
        raise UserError(problems)


def python_identifier(value: str) -> str:
    """`value` when it is a plain Python identifier (it is rendered into Python code)."""
    if not (value.isidentifier() and value.isascii()):
        raise ValueError(f"{value!r} is not a Python identifier")
    return value


def ops_py(ops_id: str) -> str:
    return render("torch/_ops.py.j2", {"ops_id": python_identifier(ops_id)})


def noarch_ops_py(python_name: str, unique_id: str) -> str:
    return render(
        "torch/_ops_noarch.py.j2",
        {
            "python_name": python_identifier(python_name),
            "unique_id": check_unique_id(unique_id),
        },
    )


def cmake_project(plan: dict[str, Any], system: str, name: str) -> dict[str, str]:
    """The files of variant `name`'s CMake project (relative path -> text)."""
    variant = variant_of(plan, system, name)
    if variant["kind"] not in ("arch", "stable-abi"):
        raise UserError.single(
            f"variant {name} is {variant['kind']}: it has no CMake project",
            fix="noarch variants are copied, not compiled (kernelnix.compile)",
        )
    check_cmake_values(plan, variant)
    components = _components(plan, variant)
    stable_abi = variant["stable-abi"]
    context = {
        "kernelnix_version": __version__,
        "variant": name,
        "ops_id": variant["ops-id"],
        "backend": variant["backend"],
        "backend_version": variant["backend-version"],
        "torch": variant["torch"],
        "stable_abi": stable_abi,
        "stable_abi_hex": stable_abi_hex(stable_abi) if stable_abi else None,
        "macos_deployment_target": variant["macos-deployment-target"],
        "languages": _languages(components),
        "components": components,
        "package_dir": plan["package-dir"],
        "pyext": plan["pyext"],
    }
    return {
        "CMakeLists.txt": render("cmake/CMakeLists.txt.j2", context),
        "kernelnix.cmake": render("cmake/kernelnix.cmake", {}),
        "probe_torch.py": PROBE_SCRIPT.read_text(),
        "include/registration.h": render("torch/registration.h.j2", {}),
        "_ops.py": ops_py(variant["ops-id"]),
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
