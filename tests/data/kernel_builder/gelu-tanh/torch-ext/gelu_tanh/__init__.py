from . import layers
from ._gelu import gelu_tanh

__all__ = ["gelu_tanh", "layers"]
