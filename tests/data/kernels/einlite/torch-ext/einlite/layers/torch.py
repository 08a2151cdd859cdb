import torch

from . import RearrangeMixin, ReduceMixin


class Rearrange(RearrangeMixin, torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._rearrange(x)


class Reduce(ReduceMixin, torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._reduce(x)
