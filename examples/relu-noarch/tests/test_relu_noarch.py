import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F


def _device() -> str:
    if torch.cuda.is_available():  # CUDA and ROCm builds of torch
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


DEVICE = _device()
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: a built kernel (a directory of variants, or one variant);
    # otherwise the variant directory is on PYTHONPATH (upstream's ci-test).
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import relu_noarch

    return relu_noarch


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (33,), (256, 128), (2, 3, 5, 7), (0,)])
def test_relu(kernel, shape, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float32, device=DEVICE).to(dtype)
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_out(kernel):
    x = torch.randn(1000, device=DEVICE)
    out = torch.full_like(x, 42.0)
    assert kernel.relu(x, out) is out
    torch.testing.assert_close(out, F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_special_values(kernel):
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -1.5, 2.5], device=DEVICE)
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.kernels_ci
def test_relu_is_a_registered_op(kernel):
    # The op is registered in the kernel's unique ops namespace (from the
    # generated _ops.py) and can be called through torch.ops.
    x = torch.randn(16, device=DEVICE)
    out = torch.empty_like(x)
    kernel._ops.ops.relu(out, x)
    torch.testing.assert_close(out, F.relu(x), rtol=0, atol=0)
