import pytest
import torch

import fused_scale

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_scale_add_matches_torch(dtype: torch.dtype) -> None:
    x = torch.randn(1000, dtype=dtype, device=DEVICE)
    y = torch.randn(1000, dtype=dtype, device=DEVICE)
    torch.testing.assert_close(fused_scale.scale_add(x, y, 0.5), 0.5 * x + y)


@pytest.mark.kernels_ci
def test_sum_squares_matches_torch() -> None:
    x = torch.randn(4099, device=DEVICE)
    expected = (x * x).sum().reshape(1)
    torch.testing.assert_close(fused_scale.sum_squares(x), expected, rtol=1e-4, atol=1e-3)
