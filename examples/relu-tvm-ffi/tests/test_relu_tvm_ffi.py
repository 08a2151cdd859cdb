import os
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: a built kernel (a directory of variants, or one variant);
    # otherwise the variant directory is on PYTHONPATH (upstream's ci-test).
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import relu_tvm_ffi

    return relu_tvm_ffi


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(1,), (7,), (256, 256), (3, 5, 17), (0,)])
def test_relu_numpy(kernel, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.full_like(x, 42.0)
    assert kernel.relu(x, out) is out
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.kernels_ci
def test_relu_special_values(kernel):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, -1.5, 2.5], dtype=np.float32)
    out = np.empty_like(x)
    kernel.relu(x, out)
    np.testing.assert_array_equal(out[1:], [np.inf, 0, 0, 0, 0, 2.5])
    assert np.isnan(out[0])


@pytest.mark.kernels_ci
def test_relu_torch(kernel):
    torch = pytest.importorskip("torch")
    x = torch.randn(1000)
    out = torch.empty_like(x)
    kernel.relu(x, out)
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_rejects_float64(kernel):
    x = np.ones(4, dtype=np.float64)
    with pytest.raises(Exception, match="float32"):
        kernel.relu(x, np.empty_like(x))


@pytest.mark.kernels_ci
def test_relu_torch_cuda(kernel):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(100_000, device="cuda")
    out = torch.empty_like(x)
    kernel.relu(x, out)
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)
