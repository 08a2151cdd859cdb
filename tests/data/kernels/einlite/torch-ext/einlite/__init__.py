"""Readable reshapes and reductions of tensors, spelled as einops-like patterns."""


class EinliteError(ValueError):
    """A pattern that does not fit the tensor it is applied to."""


# Below the error class: the modules import it from the package.
from ._backends import backend_for  # noqa: E402
from .ops import asnumpy, rearrange, reduce  # noqa: E402

__all__ = ["EinliteError", "asnumpy", "backend_for", "rearrange", "reduce"]
