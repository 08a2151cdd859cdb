import pytest
import torch
from kernels import get_kernel


@pytest.fixture(scope="module")
def fused_add():
    # `nix run .#ci-test` maps the repo id to the built kernel (LOCAL_KERNELS).
    return get_kernel("kernelnix-tests/fused-add", version=1)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fused_add_matches_torch(fused_add, dtype: torch.dtype) -> None:
    a = torch.randn(1000, dtype=dtype)
    b = torch.randn(1000, dtype=dtype)
    torch.testing.assert_close(fused_add.fused_add(a, b, 0.5), torch.add(a, b, alpha=0.5))
