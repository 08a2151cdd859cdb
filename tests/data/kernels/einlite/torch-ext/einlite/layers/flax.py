import flax.linen as nn
import jax.numpy as jnp

from ..ops import rearrange


class Rearrange(nn.Module):
    pattern: str

    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        return rearrange(x, self.pattern)
