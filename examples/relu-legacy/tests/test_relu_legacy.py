import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: a built kernel (a directory of variants, or one variant);
    # otherwise the variant directory is on PYTHONPATH (upstream's ci-test).
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import relu_legacy

    return relu_legacy


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(1,), (100,), (32, 64), (0,)])
def test_relu(kernel, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, device=DEVICE)
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_rejects_float64(kernel):
    with pytest.raises(RuntimeError, match="only float32"):
        kernel.relu(torch.randn(4, dtype=torch.float64, device=DEVICE))
