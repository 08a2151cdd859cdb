import pytest
import torch
from kernels import get_kernel


@pytest.fixture(scope="module")
def kernel():
    # `nix run .#ci-test` maps the repo id to the built kernel (LOCAL_KERNELS).
    return get_kernel("kernelnix-tests/gelu-tanh", version=1)


@pytest.mark.kernels_ci
def test_matches_torch_gelu(kernel) -> None:
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    expected = torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(kernel.gelu_tanh(x), expected)
    torch.testing.assert_close(kernel.layers.GeluTanh()(x), expected)
