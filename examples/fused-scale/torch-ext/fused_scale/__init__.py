from typing import Optional

import torch

from ._ops import ops


def scale_add(
    x: torch.Tensor, y: torch.Tensor, alpha: float, out: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """``alpha * x + y``, written into ``out`` (allocated when None)."""
    if out is None:
        out = torch.empty_like(x)
    ops.scale_add(out, x, y, alpha)
    return out


def sum_squares(x: torch.Tensor) -> torch.Tensor:
    """The sum of ``x * x`` as a one-element tensor of ``x``'s dtype."""
    return ops.sum_squares(x)


__all__ = ["scale_add", "sum_squares"]
