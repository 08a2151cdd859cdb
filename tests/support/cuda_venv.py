"""The CUDA build of Torch (2.14.1, CUDA 13.0, from PyPI) in its own virtual
environment, made by scripts/setup.sh (`KERNELNIX_CUDA_VENV`, default
`.venv-cu130` in the checkout), with /usr/local/cuda's nvcc. CI must have it:
there the tests that use it (the `cuda_torch` fixture) fail without it instead of skipping."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import ROOT

NVCC = Path("/usr/local/cuda/bin/nvcc")
VENV = Path(os.environ.get("KERNELNIX_CUDA_VENV", ROOT / ".venv-cu130"))
# The cu130 variant of Torch 2.14 on this machine.
CUDA_VARIANT = "torch214-cxx11-cu130-x86_64-linux"


@dataclass(frozen=True)
class CudaTorch:
    python: Path
    env: dict[str, str]


def find_cuda_torch() -> CudaTorch:
    """The CUDA Torch environment; skips the test (fails it in CI) without one."""
    python = VENV / "bin" / "python"
    missing = [str(p) for p in (python, NVCC) if not p.exists()]
    if missing:
        reason = f"no CUDA Torch environment or nvcc ({', '.join(missing)}); scripts/setup.sh"
        if os.environ.get("CI"):
            pytest.fail(f"CI needs them: {reason}")
        pytest.skip(reason)
    env = {
        **os.environ,
        "PATH": f"{python.parent}{os.pathsep}{NVCC.parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
    }
    return CudaTorch(python, env)
