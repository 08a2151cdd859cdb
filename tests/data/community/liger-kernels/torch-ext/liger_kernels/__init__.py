from . import layers
from .layers import LigerForCausalLMLoss, liger_rotary_pos_emb


__all__ = [
    "layers",
    # kept for BC
    "LigerForCausalLMLoss",
    "liger_rotary_pos_emb",
]
