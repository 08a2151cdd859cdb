"""One backend per tensor framework, chosen from the tensor's type.

A backend imports its framework when it is created, and it is created only for
a framework the program has already imported (a tensor of it cannot exist
otherwise): importing every installed framework up front would cost seconds,
and the kernel must load where none of them is installed.
"""

from __future__ import annotations

import sys
from typing import Any

from . import EinliteError

try:  # recognises any array of the array API standard, when installed
    import array_api_compat
except ImportError:
    array_api_compat = None


class Backend:
    framework = ""

    def owns(self, tensor: Any) -> bool:
        raise NotImplementedError

    def shape(self, tensor: Any) -> tuple[int, ...]:
        return tuple(tensor.shape)

    def reshape(self, tensor: Any, shape: tuple[int, ...]) -> Any:
        return tensor.reshape(shape)

    def permute(self, tensor: Any, order: list[int]) -> Any:
        raise NotImplementedError

    def reduce(self, tensor: Any, how: str, axes: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def to_numpy(self, tensor: Any) -> Any:
        raise NotImplementedError


class TorchBackend(Backend):
    framework = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def owns(self, tensor: Any) -> bool:
        return isinstance(tensor, self.torch.Tensor)

    def permute(self, tensor: Any, order: list[int]) -> Any:
        return tensor.permute(order)

    def reduce(self, tensor: Any, how: str, axes: tuple[int, ...]) -> Any:
        name = {"max": "amax", "min": "amin"}.get(how, how)
        return getattr(self.torch, name)(tensor, dim=axes) if axes else tensor

    def to_numpy(self, tensor: Any) -> Any:
        return tensor.detach().cpu().numpy()


class NumpyBackend(Backend):
    framework = "numpy"

    def __init__(self) -> None:
        import numpy

        self.np = numpy

    def owns(self, tensor: Any) -> bool:
        return isinstance(tensor, self.np.ndarray)

    def permute(self, tensor: Any, order: list[int]) -> Any:
        return self.np.transpose(tensor, order)

    def reduce(self, tensor: Any, how: str, axes: tuple[int, ...]) -> Any:
        return getattr(self.np, how)(tensor, axis=axes)

    def to_numpy(self, tensor: Any) -> Any:
        return tensor


class CupyBackend(NumpyBackend):
    framework = "cupy"

    def __init__(self) -> None:
        import cupy

        self.np = cupy

    def to_numpy(self, tensor: Any) -> Any:
        return self.np.asnumpy(tensor)


class JaxBackend(NumpyBackend):
    framework = "jax"

    def __init__(self) -> None:
        import jax
        import jax.numpy

        self.jax = jax
        self.np = jax.numpy

    def owns(self, tensor: Any) -> bool:
        return isinstance(tensor, self.jax.Array)

    def to_numpy(self, tensor: Any) -> Any:
        import numpy

        return numpy.asarray(tensor)


class TensorflowBackend(Backend):
    framework = "tensorflow"

    def __init__(self) -> None:
        import tensorflow

        self.tf = tensorflow

    def owns(self, tensor: Any) -> bool:
        return self.tf.is_tensor(tensor)

    def reshape(self, tensor: Any, shape: tuple[int, ...]) -> Any:
        return self.tf.reshape(tensor, shape)

    def permute(self, tensor: Any, order: list[int]) -> Any:
        return self.tf.transpose(tensor, order)

    def reduce(self, tensor: Any, how: str, axes: tuple[int, ...]) -> Any:
        return getattr(self.tf, f"reduce_{how}")(tensor, axis=axes)

    def to_numpy(self, tensor: Any) -> Any:
        return tensor.numpy()


class PaddleBackend(Backend):
    framework = "paddle"

    def __init__(self) -> None:
        import paddle

        self.paddle = paddle

    def owns(self, tensor: Any) -> bool:
        return self.paddle.is_tensor(tensor)

    def permute(self, tensor: Any, order: list[int]) -> Any:
        return self.paddle.transpose(tensor, order)

    def reduce(self, tensor: Any, how: str, axes: tuple[int, ...]) -> Any:
        return getattr(self.paddle, how)(tensor, axis=list(axes))

    def to_numpy(self, tensor: Any) -> Any:
        return tensor.numpy()


BACKENDS = (TorchBackend, NumpyBackend, CupyBackend, JaxBackend, TensorflowBackend, PaddleBackend)
_by_type: dict[type, Backend] = {}


def backend_for(tensor: Any) -> Backend:
    """The backend of the tensor's framework; EinliteError for an unknown type."""
    known = _by_type.get(type(tensor))
    if known is not None:
        return known
    for backend_class in BACKENDS:
        if backend_class.framework in sys.modules:
            backend = backend_class()
            if backend.owns(tensor):
                _by_type[type(tensor)] = backend
                return backend
    if array_api_compat is not None and array_api_compat.is_array_api_obj(tensor):
        raise EinliteError(f"{type(tensor).__name__}: array API arrays are not supported yet")
    kind = type(tensor)
    raise EinliteError(f"einlite has no backend for {kind.__module__}.{kind.__name__}")
