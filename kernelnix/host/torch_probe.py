"""Where Torch is and what it was built for, without importing it.

`import torch` takes seconds; this reads `torch/version.py` (which has no
imports of its own) through the interpreter's import machinery instead. The
build step calls `probe()` in-process; the generated CMake project runs this
file as a script with the build's Python interpreter and reads the JSON it
prints (it is copied there verbatim: stdlib only, no kernelnix imports).
`hip` decides ROCm: Torch 2.13's CMake config no longer tells whether HIP was
found, `torch.version.hip` always does. `cuda-wheel-include`: a CUDA Torch from
PyPI brings the CUDA libraries as `nvidia-*` wheels, whose headers (cuBLAS,
cuSPARSE, ...) ATen's CUDA headers include; a toolkit with only nvcc lacks them.
"""

from __future__ import annotations

import importlib.util
import json
import runpy
import sys
import sysconfig
from pathlib import Path
from typing import Any


def probe() -> dict[str, Any] | None:
    """Torch's location, version and toolkit versions; None without Torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    version = runpy.run_path(str(root / "version.py"))
    return {
        "dir": root.as_posix(),
        "version": version["__version__"],
        "cuda": version.get("cuda"),
        "hip": version.get("hip"),
        "xpu": version.get("xpu"),
        "python-include": sysconfig.get_path("include", scheme="posix_prefix"),
        "cuda-wheel-include": cuda_wheel_includes(root.parent) if version.get("cuda") else [],
    }


def cuda_wheel_includes(site_packages: Path) -> list[str]:
    """The include directories of the `nvidia-*` wheels beside Torch: `nvidia/cu13/include`
    (CUDA 13 wheels share one tree), or one per library (`nvidia/cusparse/include`, CUDA 12)."""
    nvidia = site_packages / "nvidia"
    found = sorted(nvidia.glob("*/include")) if nvidia.is_dir() else []
    return [path.as_posix() for path in found if path.is_dir()]


if __name__ == "__main__":
    found = probe()
    if found is None:
        sys.exit(f"{sys.executable}: no module named 'torch'; install Torch for this interpreter")
    print(json.dumps(found))
