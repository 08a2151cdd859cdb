"""The CUDA Torch environment of scripts/setup.sh (Torch 2.14.1 cu130 in a venv, with
/usr/local/cuda's nvcc), for the tests and benchmarks that build CUDA variants."""

from __future__ import annotations

import os
from pathlib import Path

from paths import ROOT

VENV = Path(os.environ.get("KERNELNIX_CUDA_VENV", ROOT / ".venv-cu130"))
PYTHON = VENV / "bin" / "python"
NVCC = Path("/usr/local/cuda/bin/nvcc")
VARIANT = "torch214-cxx11-cu130-x86_64-linux"


def cuda_torch_missing() -> str | None:
    """Why the CUDA Torch environment cannot be used here; None when it can."""
    missing = [str(p) for p in (PYTHON, NVCC) if not p.exists()]
    if not missing:
        return None
    return f"no CUDA Torch environment or nvcc ({', '.join(missing)}); scripts/setup.sh"


def with_cuda_torch(env: dict[str, str]) -> dict[str, str]:
    """`env` with the venv's Python (and `kernelnix`) and nvcc first on PATH, and this
    checkout's kernelnix on PYTHONPATH."""
    path = os.pathsep.join([str(PYTHON.parent), str(NVCC.parent), env["PATH"]])
    return {**env, "PATH": path, "PYTHONPATH": str(ROOT)}
