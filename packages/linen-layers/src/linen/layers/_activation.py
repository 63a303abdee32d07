"""``PReLU``, the one activation with a learned parameter (public in :mod:`linen.layers.activation`)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax.nn.initializers import constant

from linen.module import Module, compact

__all__ = ['PReLU']


class PReLU(Module):
    """Parametric ReLU: ``x`` where ``x >= 0``, else ``negative_slope * x``.

    ``negative_slope`` is a learned scalar parameter.

    Attributes:
      param_dtype: dtype of the ``negative_slope`` parameter.
      negative_slope_init: its initial value.

    >>> import jax, jax.numpy as jnp
    >>> layer = PReLU()
    >>> variables = layer.init(jax.random.key(0), jnp.ones(3))
    >>> variables['params']['negative_slope']
    Array(0.01, dtype=float32)
    >>> layer.apply(variables, jnp.array([-2.0, 3.0]))
    Array([-0.02,  3.  ], dtype=float32)
    """

    param_dtype: Any = jnp.float32
    negative_slope_init: float = 0.01

    @compact
    def __call__(self, inputs):
        negative_slope = self.param(
            'negative_slope', constant(self.negative_slope_init), (), self.param_dtype
        )
        return jnp.where(inputs >= 0, inputs, jnp.asarray(negative_slope, inputs.dtype) * inputs)
