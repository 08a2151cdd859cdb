from .causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_update
from .causal_conv1d_varlen import causal_conv1d_varlen_states

__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "causal_conv1d_varlen_states"]
