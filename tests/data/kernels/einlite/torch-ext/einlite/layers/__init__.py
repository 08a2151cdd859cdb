"""Layers for each framework: import the submodule of yours (`layers.torch`, ...).

The package does not import them: each one imports its framework at module
level, and only the one a program asks for must be installed.
"""

from __future__ import annotations

from typing import Any

from ..ops import rearrange, reduce


class RearrangeMixin:
    """Holds a pattern; the framework's layer class calls `_rearrange` on its input."""

    def __init__(self, pattern: str, **sizes: int) -> None:
        super().__init__()
        self.pattern = pattern
        self.sizes = sizes

    def _rearrange(self, tensor: Any) -> Any:
        return rearrange(tensor, self.pattern, **self.sizes)


class ReduceMixin:
    def __init__(self, pattern: str, how: str, **sizes: int) -> None:
        super().__init__()
        self.pattern = pattern
        self.how = how
        self.sizes = sizes

    def _reduce(self, tensor: Any) -> Any:
        return reduce(tensor, self.pattern, self.how, **self.sizes)
