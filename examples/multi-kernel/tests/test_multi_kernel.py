import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

SHAPES = [(1,), (7,), (8,), (9,), (1000,), (64, 129), (3, 4, 5, 6), (0,)]


@pytest.fixture(scope="module")
def kernel():
    # KERNEL_PATH: a built kernel (a directory of variants, or one variant);
    # otherwise the variant directory is on PYTHONPATH (upstream's ci-test).
    kernel_path = os.environ.get("KERNEL_PATH")
    if kernel_path:
        from kernels import get_local_kernel

        return get_local_kernel(Path(kernel_path))
    import multi_kernel

    return multi_kernel


def _inputs(shape):
    torch.manual_seed(0)
    # Wide range: exercises exp() far into both tails.
    return torch.randn(shape, dtype=torch.float32) * 30


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", SHAPES)
def test_silu(kernel, shape):
    x = _inputs(shape)
    torch.testing.assert_close(kernel.silu(x), F.silu(x))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", SHAPES)
def test_silu_portable(kernel, shape):
    x = _inputs(shape)
    out = torch.empty_like(x)
    kernel._ops.ops.silu_portable(out, x)
    torch.testing.assert_close(out, F.silu(x))


@pytest.mark.kernels_ci
def test_silu_variant(kernel):
    variant = kernel.silu_variant()
    assert variant in ("avx2", "portable")
    if variant == "portable":
        pytest.skip("this CPU has no AVX2+FMA: only the portable kernel ran")


@pytest.mark.kernels_ci
def test_silu_small_and_special_values(kernel):
    x = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 20.0, -20.0, 87.0, -87.0, 100.0, -100.0, float("nan")])
    torch.testing.assert_close(kernel.silu(x), F.silu(x), equal_nan=True)


@pytest.mark.kernels_ci
def test_silu_rejects_other_dtypes(kernel):
    with pytest.raises(RuntimeError, match="only float32"):
        kernel.silu(torch.randn(4, dtype=torch.float64))


@pytest.mark.kernels_ci
def test_silu_layer(kernel):
    x = _inputs((16, 32))
    torch.testing.assert_close(kernel.layers.SiLU()(x), torch.nn.SiLU()(x))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("factor", [0.0, -1.5, 3.0])
def test_scale(kernel, dtype, factor):
    x = _inputs((33, 17)).to(dtype)
    torch.testing.assert_close(kernel.scale(x, factor), x * factor)


@pytest.mark.kernels_ci
def test_scale_out(kernel):
    x = _inputs((100,))
    out = torch.empty_like(x)
    assert kernel.scale(x, 2.0, out) is out
    torch.testing.assert_close(out, x * 2.0)
