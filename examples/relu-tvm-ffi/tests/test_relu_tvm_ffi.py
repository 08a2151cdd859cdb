import math
import os
from pathlib import Path

import pytest

SHAPES = [(1,), (7,), (256, 256), (3, 5, 17), (0,)]


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


# The kernel takes anything DLPack gives: Torch tensors (what ci-test has, as
# upstream's tests use) and numpy arrays, each tested where it is installed.
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def np():
    return pytest.importorskip("numpy")


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_torch(kernel, torch, shape):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    out = torch.full_like(x, 42.0)
    kernel.relu(x, out)
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_relu_special_values(kernel, torch):
    x = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, -1.5, 2.5])
    out = torch.empty_like(x)
    kernel.relu(x, out)
    assert out[1:].tolist() == [math.inf, 0.0, 0.0, 0.0, 0.0, 2.5]
    assert math.isnan(out[0].item())


@pytest.mark.kernels_ci
def test_relu_rejects_float64(kernel, torch):
    x = torch.ones(4, dtype=torch.float64)
    with pytest.raises(Exception, match="float32"):
        kernel.relu(x, torch.empty_like(x))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_numpy(kernel, np, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.full_like(x, 42.0)
    assert kernel.relu(x, out) is out
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.kernels_ci
def test_relu_torch_cuda(kernel, torch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    x = torch.randn(100_000, device="cuda")
    out = torch.empty_like(x)
    kernel.relu(x, out)
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)
