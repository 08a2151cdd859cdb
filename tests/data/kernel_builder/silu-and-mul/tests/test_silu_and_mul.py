import numpy as np
import pytest
import torch
from kernels import get_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def kernel():
    # `nix run .#ci-test` maps the repo id to the built kernel (LOCAL_KERNELS).
    return get_kernel("kernelnix-tests/silu-and-mul", version=1)


def reference(x: np.ndarray) -> np.ndarray:
    gate, up = np.split(x, 2, axis=1)
    return gate / (1.0 + np.exp(-gate)) * up


@pytest.mark.kernels_ci
def test_matches_numpy(kernel) -> None:
    x = np.random.default_rng(0).standard_normal((16, 64))
    out = kernel.silu_and_mul(torch.from_numpy(x).to(DEVICE))
    np.testing.assert_allclose(out.cpu().numpy(), reference(x), rtol=1e-12)
