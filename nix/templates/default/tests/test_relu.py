# `nix run .#ci-test` runs the tests marked kernels_ci against the built
# variant: KERNEL_PATH is its output, which kernels.get_local_kernel loads.
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kernels import get_local_kernel


@pytest.fixture(scope="module")
def relu():
    return get_local_kernel(Path(os.environ.get("KERNEL_PATH", "build")))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_relu(relu, dtype):
    x = torch.randn(1000, dtype=torch.float32).to(dtype)
    torch.testing.assert_close(relu.relu(x), F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_out(relu):
    x = torch.randn(64)
    out = torch.empty_like(x)
    assert relu.relu(x, out) is out
    torch.testing.assert_close(out, F.relu(x), rtol=0, atol=0)
