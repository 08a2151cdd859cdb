from typing import Optional

import torch

from . import layers
from ._ops import ops


def silu(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x * sigmoid(x)`` for float32 CPU tensors (AVX2 when the CPU has it)."""
    if out is None:
        out = torch.empty_like(x)
    ops.silu(out, x)
    return out


def scale(x: torch.Tensor, factor: float, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x * factor``."""
    if out is None:
        out = torch.empty_like(x)
    ops.scale(out, x, float(factor))
    return out


def silu_variant() -> str:
    """The silu kernel used on this machine: ``"avx2"`` or ``"portable"``."""
    return ops.silu_variant()


__all__ = ["silu", "scale", "silu_variant", "layers"]
