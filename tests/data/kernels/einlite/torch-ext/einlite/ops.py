"""`rearrange` and `reduce`: reshape, transpose and reduce in one readable pattern."""

from __future__ import annotations

import math
import typing
from typing import Any

from . import EinliteError
from ._backends import backend_for
from .parsing import Pattern, parse_pattern

if typing.TYPE_CHECKING:
    import numpy as np

REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def rearrange(tensor: Any, pattern: str, **sizes: int) -> Any:
    """`rearrange(x, "b c h w -> b (h w) c")`: the same elements, another layout."""
    parsed = parse_pattern(pattern)
    left, right = parsed.names(parsed.left), parsed.names(parsed.right)
    if sorted(left) != sorted(right):
        raise EinliteError(f"{pattern!r}: both sides must name the same axes")
    return _apply(tensor, parsed, None, sizes)


def reduce(tensor: Any, pattern: str, how: str, **sizes: int) -> Any:
    """`reduce(x, "b c h w -> b c", "mean")`: reduce the axes the right side drops."""
    if how not in REDUCTIONS:
        raise EinliteError(f"unknown reduction {how!r}; expected one of {', '.join(REDUCTIONS)}")
    parsed = parse_pattern(pattern)
    left, right = parsed.names(parsed.left), parsed.names(parsed.right)
    if not set(right) <= set(left):
        raise EinliteError(f"{pattern!r}: the right side names axes the left side lacks")
    return _apply(tensor, parsed, how, sizes)


def asnumpy(tensor: Any) -> np.ndarray:
    """The tensor as a numpy array, whatever its framework (needs numpy)."""
    import numpy as np

    return np.asarray(backend_for(tensor).to_numpy(tensor))


def _apply(tensor: Any, parsed: Pattern, how: str | None, sizes: dict[str, int]) -> Any:
    backend = backend_for(tensor)
    lengths = _axis_lengths(parsed.left, backend.shape(tensor), sizes)
    left = parsed.names(parsed.left)
    kept = [name for name in left if name in parsed.names(parsed.right)]
    flat = backend.reshape(tensor, tuple(lengths[name] for name in left))
    if how is not None:
        dropped = tuple(i for i, name in enumerate(left) if name not in kept)
        flat = backend.reduce(flat, how, dropped)
    order = [kept.index(name) for name in parsed.names(parsed.right)]
    moved = backend.permute(flat, order)
    shape = tuple(math.prod(lengths[name] for name in group) for group in parsed.right)
    return backend.reshape(moved, shape)


def _axis_lengths(
    groups: list[list[str]], shape: tuple[int, ...], sizes: dict[str, int]
) -> dict[str, int]:
    if len(groups) != len(shape):
        raise EinliteError(f"the pattern has {len(groups)} dimensions, the tensor {len(shape)}")
    lengths: dict[str, int] = {}
    for index, group in enumerate(groups):
        length = shape[index]
        unknown = [name for name in group if name not in sizes]
        known = math.prod(sizes[name] for name in group if name in sizes)
        if len(unknown) > 1:
            raise EinliteError(f"give the sizes of all but one of {', '.join(unknown)}")
        if length % known:
            raise EinliteError(f"dimension of length {length} does not split by {known}")
        lengths.update({name: sizes[name] for name in group if name in sizes})
        if unknown:
            lengths[unknown[0]] = length // known
        elif known != length:
            raise EinliteError(f"axes {group} multiply to {known}, the dimension is {length}")
    return lengths
