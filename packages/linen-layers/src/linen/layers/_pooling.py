"""Pooling: ``pool`` (any reduction over windows) and average/max/min pooling.

Inputs are channels-last ``(*batch, *window_dims, features)``. The window
covers the spatial axes only; batch and feature axes are never pooled. An input
with no batch axis works too.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from jax import lax

from linen.layers.errors import (
    LayerPaddingStringError,
    PoolArgumentError,
    PoolInputRankError,
    PoolPaddingError,
)

__all__ = [
    'avg_pool',
    'max_pool',
    'min_pool',
    'pool',
]


def _window_padding(padding, n: int, fn: str):
    if isinstance(padding, str):
        # lax reads its padding strings in any case ('same'), as under Flax; it raises
        # RuntimeError for any other string.
        if padding.upper() not in ('SAME', 'VALID', 'SAME_LOWER'):
            raise LayerPaddingStringError(
                fn, padding, 'pooling takes "SAME", "VALID" or (low, high) pairs'
            )
        return padding
    try:
        pairs = tuple(map(tuple, padding))  # as Flax reads it: any iterable of pairs
    except TypeError:
        pairs = None
    if pairs is None or len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise PoolPaddingError(
            fn, padding, f'expected {n} (low, high) pairs, one per window dimension'
        )
    return pairs


def pool(inputs, init, reduce_fn: Callable, window_shape, strides, padding):
    """Reduces each window of the spatial axes with ``reduce_fn`` (via ``lax.reduce_window``).

    Args:
      inputs: array ``(*batch, *spatial, features)`` with ``len(spatial) ==
        len(window_shape)``; zero or more batch axes.
      init: the reduction's identity (e.g. ``0.`` for a sum, ``-inf`` for a max).
      reduce_fn: a binary reduction such as ``lax.add``.
      window_shape: the window's size per spatial axis.
      strides: step per spatial axis (default 1).
      padding: ``'SAME'``, ``'VALID'`` or one ``(low, high)`` pair per spatial axis.

    Returns:
      the pooled array (same batch and feature axes).

    >>> import jax.numpy as jnp
    >>> from jax import lax
    >>> pool(jnp.arange(4.).reshape(1, 4, 1), 0., lax.add, (2,), (2,), 'VALID')[..., 0]
    Array([[1., 5.]], dtype=float32)
    """
    window_shape = tuple(window_shape)
    n = len(window_shape)
    strides = tuple(strides) if strides else (1,) * n
    if len(strides) != n:
        raise PoolArgumentError(
            'pool',
            f'strides={strides} has {len(strides)} entries for window_shape={window_shape}',
            'Give one stride per window dimension.',
        )
    num_batch = inputs.ndim - n - 1
    if num_batch < 0:
        raise PoolInputRankError(
            'pool',
            f'>= {n + 1} for window_shape={window_shape} (..., {n} spatial dims, features)',
            inputs.shape,
            'Add the feature axis (e.g. x[..., None]), or use a shorter window_shape.',
        )
    padding = _window_padding(padding, n, 'pool')
    if num_batch == 0:
        # Pooled as a batch of one, as Flax does: XLA compiles a window over an added
        # axis of one into another program than the window without it.
        inputs = lax.expand_dims(inputs, (0,))
    lead = (1,) * max(num_batch, 1)
    dims = (*lead, *window_shape, 1)
    full_strides = (*lead, *strides, 1)
    if not isinstance(padding, str):
        padding = (*((0, 0),) * len(lead), *padding, (0, 0))
    y = lax.reduce_window(inputs, init, reduce_fn, dims, full_strides, padding)
    return lax.squeeze(y, (0,)) if num_batch == 0 else y


def avg_pool(inputs, window_shape, strides=None, padding='VALID', count_include_pad=True):
    """Averages each window.

    Args:
      inputs, window_shape, strides, padding: as in :func:`pool`.
      count_include_pad: divide by the full window size even where the window
        overlaps padding; if false, divide by the number of real elements.

    >>> import jax.numpy as jnp
    >>> avg_pool(jnp.array([[1.], [3.], [5.]]), (2,), padding=((0, 1),), count_include_pad=False)
    Array([[2.],
           [4.],
           [5.]], dtype=float32)
    """
    y = pool(inputs, 0.0, lax.add, window_shape, strides, padding)
    if count_include_pad:
        return y / np.prod(window_shape)
    # Count the real elements per window by pooling ones of the input's shape, one
    # feature and (for a single batch axis) one example: the ones Flax pools. They are
    # of the default float dtype, as Flax's, so a narrower input averages into it.
    shape = inputs.shape
    batch = shape[: len(shape) - len(tuple(window_shape)) - 1]
    ones = jnp.ones((*(batch if len(batch) != 1 else (1,)), *shape[len(batch) : -1], 1))
    return y / pool(ones, 0.0, lax.add, window_shape, strides, padding)


def max_pool(inputs, window_shape, strides=None, padding='VALID'):
    """Takes the maximum of each window (padding counts as ``-inf``).

    >>> import jax.numpy as jnp
    >>> max_pool(jnp.array([[1.], [3.], [2.]]), (2,))[:, 0]
    Array([3., 3.], dtype=float32)
    """
    return pool(inputs, -jnp.inf, lax.max, window_shape, strides, padding)


def min_pool(inputs, window_shape, strides=None, padding='VALID'):
    """Takes the minimum of each window (padding counts as ``+inf``).

    >>> import jax.numpy as jnp
    >>> min_pool(jnp.array([[1.], [3.], [2.]]), (2,))[:, 0]
    Array([1., 2.], dtype=float32)
    """
    return pool(inputs, jnp.inf, lax.min, window_shape, strides, padding)
