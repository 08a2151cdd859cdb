"""ROCm kernels from CUDA sources: the `.cu`/`.cuh` files of a ROCm kernel are
translated to HIP with Torch's own hipify (`torch.utils.hipify`), as kernel-builder
does, before its CMake project is configured.

The kernel's tree is copied into the build's work directory and hipified there,
so the sources are never touched. Torch's tool writes each translated file
beside the original with `cuda` in the path replaced by `hip` and `.cu` by
`.hip` (`relu_cuda/relu.cu` -> `relu_hip/relu.hip`), and rewrites the includes
between them; the plan's sources are then renamed the same way.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

from kernelnix.core.diagnostics import UserError
from kernelnix.plan.model import Plan, PlanVariant

CUDA_SUFFIXES = (".cu", ".cuh")


def needs_hipify(plan: Plan, variant: PlanVariant) -> bool:
    """Whether a ROCm variant compiles CUDA sources."""
    return variant.backend == "rocm" and any(
        source.endswith(CUDA_SUFFIXES)
        for name in variant.compile
        for source in plan.kernels[name].src
    )


def hipify_tree(source_dir: Path, dest: Path, sources: list[str]) -> dict[str, str]:
    """Copy `source_dir` to `dest` and hipify `sources` (relative paths) there.

    Returns each source's hipified path relative to `dest` (a source hipify
    leaves alone maps to itself).
    """
    try:
        from torch.utils.hipify import hipify_python
    except ImportError:
        raise UserError.single(
            "hipifying a ROCm kernel's CUDA sources needs Torch (torch.utils.hipify)",
            fix="build with a Python that has Torch installed",
        ) from None
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source_dir, dest, ignore=shutil.ignore_patterns(".git", "build", "result"))
    root = os.path.abspath(dest)
    files = [os.path.join(root, source) for source in sources]
    # The tool prints a line per file and a summary: kept out of the build log.
    with contextlib.redirect_stdout(io.StringIO()):
        results = hipify_python.hipify(
            project_directory=root,
            output_directory=root,
            includes=[os.path.join(root, "*")],
            extra_files=files,
            header_include_dirs=[],
            is_pytorch_extension=True,
            hipify_extra_files_only=True,
            show_detailed=False,
            show_progress=False,
        )
    mapping = {}
    for source, path in zip(sources, files, strict=True):
        result = results.get(path)
        hipified = result.hipified_path if result is not None else None
        mapping[source] = os.path.relpath(hipified, root) if hipified else source
    return mapping


def with_hipified_sources(plan: Plan, mapping: dict[str, str]) -> Plan:
    """`plan` with its kernels' sources renamed to their hipified paths."""
    kernels = {
        name: kernel.model_copy(update={"src": [mapping.get(s, s) for s in kernel.src]})
        for name, kernel in plan.kernels.items()
    }
    return plan.model_copy(update={"kernels": kernels})
