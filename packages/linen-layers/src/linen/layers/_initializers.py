"""The ``*_init()`` helpers of :mod:`linen.layers.initializers` (its public surface)."""

from __future__ import annotations

from jax.nn.initializers import Initializer, ones, zeros

__all__ = ['ones_init', 'zeros_init']


def zeros_init() -> Initializer:
    """Returns an initializer that gives an array of zeros.

    >>> import jax, jax.numpy as jnp
    >>> zeros_init()(jax.random.key(0), (2, 3), jnp.float32)
    Array([[0., 0., 0.],
           [0., 0., 0.]], dtype=float32)
    """
    return zeros


def ones_init() -> Initializer:
    """Returns an initializer that gives an array of ones.

    >>> import jax, jax.numpy as jnp
    >>> ones_init()(jax.random.key(0), (2,), jnp.float32)
    Array([1., 1.], dtype=float32)
    """
    return ones
