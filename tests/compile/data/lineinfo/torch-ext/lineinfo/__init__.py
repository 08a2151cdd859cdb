from ._ops import ops

__all__ = ["ops"]
