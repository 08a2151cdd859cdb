import torch

from ._ops import ops


def fused_add(
    a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``a + alpha * b`` in one pass, written into ``out`` (allocated when None)."""
    if out is None:
        out = torch.empty_like(a)
    ops.fused_add(out, a, b, alpha)
    return out


__all__ = ["fused_add"]
