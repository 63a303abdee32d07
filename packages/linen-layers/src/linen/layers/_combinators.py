"""Sequential: chain layers, each one's output feeding the next."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from linen.layers.errors import LayerArgumentError, describe_layer
from linen.module import Module, compact

__all__ = ['Sequential']


class Sequential(Module):
    """Applies ``layers`` in order.

    The first layer gets the call's arguments. After that, a ``tuple`` output is
    spread as positional arguments of the next layer, a ``dict`` output as
    keyword arguments, and anything else is passed as the single argument.
    Submodules are named ``layers_0``, ``layers_1``, ... as in Flax; plain
    functions (``nn.relu``) may be mixed in.

    Attributes:
      layers: the modules or functions to apply.

    >>> import jax, jax.numpy as jnp
    >>> from linen.layers import Dense, relu
    >>> model = Sequential([Dense(4), relu, Dense(2)])
    >>> variables = model.init(jax.random.key(0), jnp.ones((1, 3)))
    >>> sorted(variables['params'])
    ['layers_0', 'layers_2']
    """

    layers: Sequence[Callable[..., Any]]

    # Compact as Flax's: a function in ``layers`` may make its layer inline
    # (``lambda x: nn.Dense(4)(x)``), named ``Dense_0``... under the Sequential.
    @compact
    def __call__(self, *args, **kwargs):
        if not self.layers:
            raise LayerArgumentError(
                describe_layer(self),
                'the layers list is empty',
                'Give Sequential at least one layer.',
                flax_text=f'Empty Sequential module {self.name}.',
            )
        outputs = self.layers[0](*args, **kwargs)
        for layer in self.layers[1:]:
            if isinstance(outputs, tuple):
                outputs = layer(*outputs)
            elif isinstance(outputs, dict):
                outputs = layer(**outputs)
            else:
                outputs = layer(outputs)
        return outputs
