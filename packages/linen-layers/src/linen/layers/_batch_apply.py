"""BatchApply: run a function on several leading axes by merging them into one."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from linen.layers.errors import LayerInputRankError

__all__ = ['BatchApply']


class BatchApply:
    """Calls ``f`` with the first ``num_dims`` axes of its array inputs merged into one.

    Useful to apply a layer written for ``(batch, features)`` to
    ``(time, batch, features)`` without a transform: the leading axes are merged
    on the way in and split again on every array output. Like Flax's, this is a
    plain callable, not a Module, so ``f`` may be a bound submodule.

    Array arguments (positional or keyword, at any depth of a pytree) with at
    least ``num_dims`` axes are reshaped; other arguments pass through.

    Args:
      f: the function to call.
      num_dims: how many leading axes to merge.

    >>> import jax.numpy as jnp
    >>> BatchApply(lambda x: x.sum(-1, keepdims=True))(jnp.ones((4, 3, 2))).shape
    (4, 3, 1)
    """

    def __init__(self, f: Callable, num_dims: int = 2):
        self._f = f
        self.num_dims = num_dims

    def __call__(self, *args, **kwargs):
        num_dims = self.num_dims
        leaves = [
            x
            for x in jax.tree_util.tree_leaves((args, kwargs))
            if hasattr(x, 'shape') and jnp.ndim(x) >= num_dims
        ]
        if not leaves:
            raise LayerInputRankError(
                'BatchApply',
                f'>= {num_dims} (num_dims) for at least one array argument',
                (),
                'Pass an array with the leading axes to merge, or lower num_dims.',
                flax_text=f'BatchApply requires at least one input with ndim >= {num_dims}.',
            )
        # The first array's leading axes split the outputs. As in Flax, the others are
        # not compared with them: each is merged on its own, and `f` meets any mismatch.
        batch_shape = tuple(leaves[0].shape[:num_dims])

        def merge(x):
            if hasattr(x, 'shape') and jnp.ndim(x) >= num_dims:
                return jnp.reshape(x, (-1, *x.shape[num_dims:]))
            return x

        def split(y):
            if hasattr(y, 'shape') and jnp.ndim(y) >= 1:
                return jnp.reshape(y, (*batch_shape, *y.shape[1:]))
            return y

        merged_args, merged_kwargs = jax.tree_util.tree_map(merge, (args, kwargs))
        return jax.tree_util.tree_map(split, self._f(*merged_args, **merged_kwargs))
