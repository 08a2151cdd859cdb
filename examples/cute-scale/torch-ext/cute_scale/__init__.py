from typing import Optional

import torch

from ._ops import ops


def cute_scale(x: torch.Tensor, alpha: float, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``alpha * x`` for float32 CUDA tensors, computed by a CuTe kernel."""
    if out is None:
        out = torch.empty_like(x)
    ops.cute_scale(out, x, alpha)
    return out


__all__ = ["cute_scale"]
