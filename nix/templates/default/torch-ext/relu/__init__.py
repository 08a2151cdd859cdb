import torch

from ._ops import ops


def relu(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Elementwise ``max(x, 0)``, written into ``out`` (allocated when None)."""
    if out is None:
        out = torch.empty_like(x)
    ops.relu(out, x)
    return out


__all__ = ["relu"]
