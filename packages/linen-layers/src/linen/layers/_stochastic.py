"""Dropout: randomly zero inputs during training, scaling the rest by ``1 / keep``."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from linen.layers._staged import STAGING_TRACER, nested_derivative, staged
from linen.layers.errors import DropoutBroadcastDimsError, describe_layer
from linen.module import Module, compact, merge_param

__all__ = ['Dropout']

# The masking select: a one-operation staged call (see `_staged.py`).
_select = staged(lax.select)


class Dropout(Module):
    """Zeroes each input with probability ``rate``, scaling kept ones by ``1 / (1 - rate)``.

    The mask is drawn from the ``rng_collection`` stream (one ``make_rng`` per
    call, none when deterministic or ``rate`` is 0 or 1), so a model gives the
    same dropout mask as the same model in Flax for the same key.

    Attributes:
      rate: the probability of dropping an element, in ``[0, 1]``.
      broadcast_dims: axes along which the mask is shared (e.g. ``(1,)`` drops
        whole time steps of a ``(batch, time, features)`` input).
      deterministic: if true, return the inputs unchanged; may instead be given
        at call time (exactly one of the two).
      rng_collection: the rng stream the mask comes from.

    >>> import jax, jax.numpy as jnp
    >>> layer = Dropout(rate=0.5)
    >>> x = jnp.ones((2, 3))
    >>> layer.apply({}, x, deterministic=True) is x
    True
    >>> y = layer.apply({}, x, deterministic=False, rngs={'dropout': jax.random.key(0)})
    >>> sorted(set(y.ravel().tolist())) in ([0.0, 2.0], [0.0], [2.0])
    True
    """

    rate: float
    broadcast_dims: Sequence[int] = ()
    deterministic: bool | None = None
    rng_collection: str = 'dropout'

    @compact
    def __call__(self, inputs, deterministic: bool | None = None, rng: jax.Array | None = None):
        """Applies dropout.

        Args:
          inputs: an array of any shape.
          deterministic: overrides nothing: give it here or in the constructor.
          rng: a key to use instead of ``make_rng(rng_collection)``.
        """
        deterministic = merge_param('deterministic', self.deterministic, deterministic)
        rate = self.rate
        if rate == 0.0 or deterministic:
            return inputs
        # Flax returns zeros here without drawing a key; keep that rng consumption.
        if rate == 1.0:
            return jnp.zeros_like(inputs)
        keep_prob = 1.0 - rate
        if rng is None:
            rng = self.make_rng(self.rng_collection)
        shape = list(jnp.shape(inputs))
        for dim in self.broadcast_dims:
            if not -len(shape) <= dim < len(shape):
                raise DropoutBroadcastDimsError(
                    describe_layer(self),
                    f'> {max(dim, -dim - 1)} for broadcast_dims={tuple(self.broadcast_dims)}',
                    shape,
                    'Drop the out-of-range broadcast dims or add the axes to the input.',
                )
            shape[dim] = 1
        mask = jax.random.bernoulli(rng, p=keep_prob, shape=shape)
        mask = jnp.broadcast_to(mask, inputs.shape)
        scaled = inputs / keep_prob
        if (
            type(scaled) is not STAGING_TRACER
            and isinstance(scaled, jax.core.Tracer)
            and nested_derivative(scaled)
        ):
            return lax.select(mask, scaled, jnp.zeros_like(inputs))  # no staged call (F36)
        return _select(mask, scaled, jnp.zeros_like(inputs))
