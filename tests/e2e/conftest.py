"""Fixtures shared by the e2e tests."""

from __future__ import annotations

import pytest
from cuda_venv import CudaTorch, find_cuda_torch


@pytest.fixture(scope="session")
def cuda_torch() -> CudaTorch:
    """The CUDA build of Torch and nvcc (tests/support/cuda_venv.py)."""
    return find_cuda_torch()
