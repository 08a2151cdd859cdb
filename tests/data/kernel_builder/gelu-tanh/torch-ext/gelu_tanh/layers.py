import torch

from ._gelu import gelu_tanh


class GeluTanh(torch.nn.Module):
    """A drop-in for ``torch.nn.GELU(approximate="tanh")``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_tanh(x)
