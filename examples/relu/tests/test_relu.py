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
DTYPES = [torch.float32, torch.float16]
if DEVICE != "mps":  # the Metal kernel supports float32 and float16 only
    DTYPES.append(torch.bfloat16)
if DEVICE in ("cpu", "cuda"):
    DTYPES.append(torch.float64)


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: a built kernel (a directory of variants, or one variant);
    # otherwise the variant directory is on PYTHONPATH (upstream's ci-test).
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import relu

    return relu


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (1024, 1024), (3, 5, 17), (0,)])
def test_relu(kernel, shape, dtype):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float32, device=DEVICE).to(dtype)
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_out(kernel):
    x = torch.randn(4096, device=DEVICE)
    out = torch.full_like(x, 42.0)
    result = kernel.relu(x, out)
    assert result is out
    torch.testing.assert_close(out, F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_special_values(kernel):
    x = torch.tensor(
        [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -1.5, 2.5],
        device=DEVICE,
    )
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.kernels_ci
def test_relu_views(kernel):
    # Contiguous views with a storage offset: the kernel must honour it.
    x = torch.arange(-20, 20, device=DEVICE, dtype=torch.float32)
    out = torch.empty_like(x)
    expected = torch.empty_like(x)
    for i in range(0, 41, 5):
        out.fill_(42)
        expected.fill_(42)
        kernel.relu(x[i:], out[i:])
        expected[i:] = F.relu(x[i:])
        torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_rejects_mismatched_shapes(kernel):
    x = torch.randn(8, device=DEVICE)
    with pytest.raises(RuntimeError, match="same shape"):
        kernel.relu(x, torch.empty(4, device=DEVICE))
