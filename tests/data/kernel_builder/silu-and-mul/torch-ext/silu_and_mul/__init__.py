import torch

from ._ops import ops


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(x[:, :d]) * x[:, d:]`` for a matrix ``x`` with ``2 * d`` columns."""
    if out is None:
        out = torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype, device=x.device)
    ops.silu_and_mul(out, x)
    return out


__all__ = ["silu_and_mul"]
