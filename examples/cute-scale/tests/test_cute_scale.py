import pytest
import torch

import cute_scale


@pytest.mark.kernels_ci
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cute_scale_matches_torch() -> None:
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(cute_scale.cute_scale(x, 2.5), 2.5 * x)
