import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: the built kernel; its kernel dependency comes from LOCAL_KERNELS.
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import scaled_relu

    return scaled_relu


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1,), (33,), (64, 48), (0,)])
def test_scaled_relu(kernel, shape, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    expected = (F.relu(x).float() * 2.5).to(dtype)
    torch.testing.assert_close(kernel.scaled_relu(x, 2.5), expected)


@pytest.mark.kernels_ci
def test_scaled_relu_out(kernel):
    x = torch.randn(100)
    out = torch.full_like(x, 42.0)
    assert kernel.scaled_relu(x, -1.0, out) is out
    torch.testing.assert_close(out, -F.relu(x))
